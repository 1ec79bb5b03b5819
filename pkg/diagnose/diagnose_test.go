package diagnose

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/errlog"
	"agent/pkg/llm"
	"agent/pkg/session"
	"agent/pkg/store/storetest"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func call(id, name, args string) llm.ToolCall {
	c := llm.ToolCall{ID: id, Type: "function"}
	c.Function.Name, c.Function.Arguments = name, args
	return c
}

func TestDiagnoseOrphanedCallAndFailingTool(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	clk := &clock{t: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)}
	sessions := session.New(st.DB(), clk.now)
	key, _ := session.P2P("wecom", "alice")
	sess, err := sessions.Current(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	add := func(d time.Duration, msgs ...llm.Message) {
		t.Helper()
		clk.add(d)
		if err := sessions.Append(ctx, sess.ID, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	// Turn 1: web_search fails twice with the same arguments, then the answer (slow: 95 s).
	add(0, llm.Message{Role: llm.RoleUser, Content: "what is the weather"})
	add(5*time.Second, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("c1", "web_search", `{"q": "weather"}`)}})
	add(40*time.Second, llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "web_search", Content: "error: search engine answered 502"})
	add(time.Second, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("c2", "web_search", `{"q":"weather"}`)}})
	add(40*time.Second, llm.Message{Role: llm.RoleTool, ToolCallID: "c2", Name: "web_search", Content: "error: search engine answered 502"})
	add(9*time.Second, llm.Message{Role: llm.RoleAssistant, Content: "I could not search right now."})
	// Turn 2: an exec call that never got its result (the daemon stopped).
	add(time.Minute, llm.Message{Role: llm.RoleUser, Content: "list my files"})
	add(2*time.Second, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call("c3", "exec", `{"cmd":"ls"}`)}})
	// Turn 3: the model service failed.
	add(time.Minute, llm.Message{Role: llm.RoleUser, Content: "hello?"})
	rec := errlog.New(st.DB(), errlog.Options{Now: clk.now})
	log := slog.New(rec.Handler(slog.DiscardHandler)).With("component", "conversation")
	log.Warn("turn failed", "key", key, "err", "agent: turn p2p:wecom:alice: step 1: llm: openai: rate limited (HTTP 429): quota (after 3 attempts)")
	log.Warn("turn failed", "key", "p2p:wecom:bob", "err", "llm: openai: server error (HTTP 500)") // another session
	rec.Flush(ctx)
	rec.Close(ctx)

	in, err := Load(ctx, st.DB(), sessions, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := Explain(in)
	for _, want := range []string{
		"Session #1 (p2p:wecom:alice), open, 9 messages",
		"Orphaned tool calls: 1 call(s) never got a result: exec (c3, 09:02:37)",
		`Tool web_search failed 2 of 2 time(s); first error: "error: search engine answered 502"`,
		`The model called web_search with the same arguments {"q":"weather"} more than once in one turn`,
		"Model-service errors: 1× HTTP 429",
		"rate-limited",
		"Slow turns: 1 turn(s) took longer than 1m0s (09:00:00 took 1m35s)",
		"Context: about",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnosis lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "HTTP 500") {
		t.Errorf("another session's error is in the diagnosis:\n%s", got)
	}

	// A clean session says so.
	clean := Input{Session: session.Summary{Session: session.Session{ID: 2, Key: "p2p:voice:kitchen", CreatedAt: clk.now(), LastActivity: clk.now()}, Messages: 2},
		Messages: []Message{{Message: llm.Message{Role: llm.RoleUser, Content: "hi"}, At: clk.now()}, {Message: llm.Message{Role: llm.RoleAssistant, Content: "hello"}, At: clk.now()}}}
	if got := Explain(clean); !strings.Contains(got, "Nothing went wrong") {
		t.Errorf("clean session:\n%s", got)
	}
}
