package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/llm"
	"agent/pkg/llm/llmtest"
	"agent/pkg/recipient"
	"agent/pkg/session"
	"agent/pkg/store/storetest"
	"agent/pkg/tools"
)

func textReply(text string) llmtest.Reply { return llmtest.Text(text) }

type tc struct{ id, name, args string }

func toolReply(calls ...tc) llmtest.Reply {
	var cs []llmtest.ToolCall
	for _, c := range calls {
		cs = append(cs, llmtest.ToolCall{ID: c.id, Name: c.name, Arguments: c.args})
	}
	return llmtest.Calls(cs...)
}

// turnStart is the time every harness turn runs at.
var turnStart = time.Date(2026, 3, 2, 1, 30, 0, 0, time.UTC)

type harness struct {
	agent    *Agent
	srv      *llmtest.Server
	clock    *clock.Fake
	sessions *session.Store
	reg      *tools.Registry
	key      session.Key
}

func newHarness(t *testing.T, cfg Config, replies ...llmtest.Reply) *harness {
	t.Helper()
	srv := llmtest.New(t, replies...)
	client, err := llm.New(llm.Config{Provider: "openai", BaseURL: srv.URL(), APIKey: "k", Model: "main-model"},
		llm.WithRetry(llm.RetryPolicy{MaxAttempts: 1}), llm.WithBreaker(-1, 0))
	if err != nil {
		t.Fatal(err)
	}
	db := storetest.Open(t)
	clk := clock.NewFake(turnStart)
	sessions := session.New(db.DB(), clk.Now)
	reg := tools.NewRegistry()
	mustRegister(t, reg, tools.Tool{Name: "echo", Description: "echo", Handler: func(ctx context.Context, c tools.Call) (string, error) {
		return "echo:" + string(c.Args), nil
	}})
	mustRegister(t, reg, tools.Tool{Name: "fail", Description: "fails", Handler: func(ctx context.Context, c tools.Call) (string, error) {
		return "", errors.New("disk on fire")
	}})
	mustRegister(t, reg, tools.Tool{Name: "boom", Description: "panics", Handler: func(ctx context.Context, c tools.Call) (string, error) {
		panic("kaboom")
	}})
	mustRegister(t, reg, tools.Tool{Name: "big", Description: "big output", Handler: func(ctx context.Context, c tools.Call) (string, error) {
		return strings.Repeat("x", 100<<10), nil
	}})
	key, _ := session.P2P("wecom", "alice")
	a := New(cfg, Deps{LLM: client, Tools: reg, Sessions: sessions, Prompt: NewPrompt(t.TempDir(), nil), Clock: clk})
	return &harness{agent: a, srv: srv, clock: clk, sessions: sessions, reg: reg, key: key}
}

func mustRegister(t testing.TB, r *tools.Registry, tool tools.Tool) {
	t.Helper()
	if err := r.Register(tool); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) turn(t *testing.T, text string) (Output, []Event) {
	t.Helper()
	var events []Event
	out, err := h.agent.Turn(context.Background(), Input{Key: h.key, User: "alice", Channel: "wecom", Profile: "wecom", Text: text, Verbose: true},
		func(e Event) { events = append(events, e) })
	if err != nil {
		t.Fatalf("Turn: %v", err)
	}
	h.checkSession(t)
	return out, events
}

// checkSession asserts the stored session is valid and returns it.
func (h *harness) checkSession(t *testing.T) []llm.Message {
	t.Helper()
	ctx := context.Background()
	sess, err := h.sessions.Current(ctx, h.key)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := h.sessions.Window(ctx, sess.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := session.Valid(msgs); err != nil {
		t.Fatalf("session not valid: %v\n%+v", err, msgs)
	}
	return msgs
}

// sentMessages returns the messages of request i.
func (h *harness) sentMessages(t *testing.T, i int) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range h.srv.Request(i).JSON["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

func lastMsg(msgs []map[string]any) map[string]any { return msgs[len(msgs)-1] }

func TestPlainReply(t *testing.T) {
	h := newHarness(t, Config{}, textReply("hello alice"))
	out, _ := h.turn(t, "hi")
	if out.Text != "hello alice" || out.Steps != 1 || out.Usage.TotalTokens != 15 {
		t.Fatalf("got %+v", out)
	}
	msgs := h.sentMessages(t, 0)
	if msgs[0]["role"] != "system" || !strings.Contains(msgs[0]["content"].(string), "2026-03-02 01:30:00") {
		t.Errorf("system message: %v", msgs[0])
	}
	if m := lastMsg(msgs); m["role"] != "user" || m["content"] != "hi" {
		t.Errorf("last message sent = %v", m)
	}
	if req := h.srv.Request(0).JSON; req["model"] != "main-model" || req["tools"] == nil {
		t.Errorf("model/tools: %v %v", req["model"], req["tools"])
	}
	stored := h.checkSession(t)
	if len(stored) != 2 || stored[1].Content != "hello alice" {
		t.Fatalf("stored %+v", stored)
	}
}

func TestToolCallThenReply(t *testing.T) {
	h := newHarness(t, Config{}, toolReply(tc{"c1", "echo", `{"a":1}`}), textReply("done"))
	out, events := h.turn(t, "use echo")
	if out.Text != "done" || out.Steps != 2 || out.ToolCalls != 1 || out.Usage.TotalTokens != 30 {
		t.Fatalf("got %+v", out)
	}
	m := lastMsg(h.sentMessages(t, 1))
	if m["role"] != "tool" || m["tool_call_id"] != "c1" || m["content"] != `echo:{"a":1}` {
		t.Errorf("tool result sent = %v", m)
	}
	kinds := ""
	for _, e := range events {
		kinds += string(e.Kind) + " "
	}
	if kinds != "step tool_call tool_result step " {
		t.Errorf("events = %s", kinds)
	}
	if stored := h.checkSession(t); len(stored) != 4 {
		t.Errorf("stored %d messages, want 4", len(stored))
	}
}

func TestParallelToolCalls(t *testing.T) {
	h := newHarness(t, Config{})
	var running, peak atomic.Int32
	gate := make(chan struct{})
	for _, name := range []string{"slow_a", "slow_b"} {
		mustRegister(t, h.reg, tools.Tool{Name: name, Handler: func(ctx context.Context, c tools.Call) (string, error) {
			n := running.Add(1)
			if n == 2 {
				close(gate) // both are running at once
			}
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			select {
			case <-gate:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			running.Add(-1)
			return "result of " + name, nil
		}})
	}
	h.srv.Script(toolReply(tc{"id_a", "slow_a", `{}`}, tc{"id_b", "slow_b", `{}`}), textReply("both done"))
	out, _ := h.turn(t, "go")
	if out.Text != "both done" || peak.Load() != 2 {
		t.Fatalf("out %+v peak %d", out, peak.Load())
	}
	msgs := h.sentMessages(t, 1)
	a, b := msgs[len(msgs)-2], msgs[len(msgs)-1]
	if a["tool_call_id"] != "id_a" || a["content"] != "result of slow_a" || b["tool_call_id"] != "id_b" || b["content"] != "result of slow_b" {
		t.Errorf("results = %v / %v", a, b)
	}
}

func TestModelMistakesBecomeToolResults(t *testing.T) {
	h := newHarness(t, Config{},
		toolReply(tc{"c1", "nope", `{}`}, tc{"c2", "echo", `{"a":`}, tc{"c3", "fail", `{}`}, tc{"c4", "boom", `{}`}, tc{"c5", "big", `{}`}),
		textReply("recovered"))
	out, _ := h.turn(t, "break things")
	if out.Text != "recovered" {
		t.Fatalf("got %+v", out)
	}
	msgs := h.sentMessages(t, 1)
	results := msgs[len(msgs)-5:]
	want := []string{"unknown tool", "not valid JSON", "disk on fire", "panic", "truncated"}
	for i, w := range want {
		c, _ := results[i]["content"].(string)
		if !strings.Contains(c, w) {
			t.Errorf("result %d = %.200q, want it to mention %q", i, c, w)
		}
		if i < 4 && !strings.HasPrefix(c, "error: ") {
			t.Errorf("result %d = %.100q, want an error", i, c)
		}
	}
	if n := len(results[4]["content"].(string)); n > 17<<10 {
		t.Errorf("big result is %d bytes", n)
	}
	// The invalid arguments are not sent back as arguments.
	asst := msgs[len(msgs)-6]
	calls := asst["tool_calls"].([]any)
	if args := calls[1].(map[string]any)["function"].(map[string]any)["arguments"]; args != "{}" {
		t.Errorf("invalid args sent back as %q", args)
	}
}

func TestRepeatGuard(t *testing.T) {
	same := toolReply(tc{"", "echo", `{"q": "x"}`})
	h := newHarness(t, Config{RepeatLimit: 3}, same, same, same, same, textReply("ok, stopping"))
	out, _ := h.turn(t, "loop")
	if out.Stopped != StopRepeat || out.Text != "ok, stopping" || out.Steps != 5 {
		t.Fatalf("got %+v", out)
	}
	third := lastMsg(h.sentMessages(t, 3))
	if c := third["content"].(string); !strings.Contains(c, "Do not repeat") {
		t.Errorf("third result = %q", c)
	}
	final := h.srv.Request(4).JSON
	if final["tools"] != nil {
		t.Errorf("final call sent tools")
	}
}

func TestMaxIterations(t *testing.T) {
	h := newHarness(t, Config{MaxIterations: 3},
		toolReply(tc{"a", "echo", `{"n":1}`}), toolReply(tc{"b", "echo", `{"n":2}`}), toolReply(tc{"c", "echo", `{"n":3}`}),
		textReply("summary: echoed 3 times"))
	out, _ := h.turn(t, "keep going")
	if out.Stopped != StopIterations || out.Steps != 4 || out.Text != "summary: echoed 3 times" {
		t.Fatalf("got %+v", out)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 4 || reqs[3].JSON["tools"] != nil {
		t.Fatalf("%d requests, last tools %v", len(reqs), reqs[3].JSON["tools"])
	}
	if m := lastMsg(h.sentMessages(t, 3)); m["role"] != "user" || !strings.Contains(m["content"].(string), "Do not call any tools") {
		t.Errorf("final prompt = %v", m)
	}
}

func TestGarbageReplies(t *testing.T) {
	h := newHarness(t, Config{},
		textReply(""),
		toolReply(tc{"x", "", `{}`}),
		llmtest.Reply{Finish: "length"})
	for _, want := range []string{EmptyReplyText, InvalidReplyText, TruncatedText} {
		out, _ := h.turn(t, "hello?")
		if out.Text != want || out.Stopped != StopGarbage {
			t.Errorf("got %+v, want %q", out, want)
		}
	}
}

func TestHistoryAcrossTurnsAndVoiceModel(t *testing.T) {
	h := newHarness(t, Config{VoiceModel: "voice-model"}, toolReply(tc{"c1", "echo", `{}`}), textReply("first answer"), textReply("second answer"))
	h.turn(t, "first question")
	out, err := h.agent.Turn(context.Background(), Input{Key: h.key, User: "alice", Channel: "voice", Profile: "voice", Fast: true, Text: "second question"}, nil)
	if err != nil || out.Text != "second answer" {
		t.Fatalf("second turn: %+v %v", out, err)
	}
	if req := h.srv.Request(2); req.Model != "voice-model" {
		t.Errorf("model = %v", req.Model)
	}
	var roles []string
	for _, m := range h.sentMessages(t, 2) {
		roles = append(roles, m["role"].(string))
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,assistant,user" {
		t.Errorf("roles = %s", got)
	}
	h.checkSession(t)
}

func TestUnreachableLLM(t *testing.T) {
	h := newHarness(t, Config{})
	h.srv.Close()
	_, err := h.agent.Turn(context.Background(), Input{Key: h.key, User: "alice", Channel: "wecom", Text: "hi"}, nil)
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if stored := h.checkSession(t); len(stored) != 1 || stored[0].Content != "hi" {
		t.Errorf("stored %+v, want the user message kept", stored)
	}
}

func TestStreamEmitsText(t *testing.T) {
	h := newHarness(t, Config{}, llmtest.Stream("Hel", "lo"))
	var text string
	out, err := h.agent.Turn(context.Background(), Input{Key: h.key, Text: "hi", Stream: true}, func(e Event) {
		if e.Kind == EventText {
			text += e.Text
		}
	})
	if err != nil || out.Text != "Hello" || text != "Hello" {
		t.Fatalf("out %+v err %v streamed %q", out, err, text)
	}
	if !h.srv.Request(0).Stream {
		t.Error("the request did not ask for a stream")
	}
}

// TestTurnTimeout: a model that does not answer within TurnTimeout stops
// the loop; the closing summary call gets FinalGrace more.
func TestTurnTimeout(t *testing.T) {
	h := newHarness(t, Config{TurnTimeout: time.Minute, FinalGrace: 10 * time.Second},
		toolReply(tc{"c1", "echo", `{}`}), llmtest.Hang(), textReply("I ran out of time."))
	type result struct {
		out Output
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := h.agent.Turn(context.Background(), Input{Key: h.key, User: "alice", Channel: "wecom", Profile: "wecom", Text: "slow"}, nil)
		done <- result{out, err}
	}()
	h.srv.Wait(2) // the second call hangs
	h.clock.Advance(time.Minute)
	r := <-done
	if r.err != nil || r.out.Stopped != StopTime || r.out.Text != "I ran out of time." || r.out.Steps != 3 {
		t.Fatalf("got %+v, %v; want a summary after the time budget", r.out, r.err)
	}
	if final := h.srv.Request(2); final.JSON["tools"] != nil || !strings.Contains(final.Last().Content, "Do not call any tools") {
		t.Errorf("final call: tools %v, last message %+v", final.JSON["tools"], final.Last())
	}
	h.checkSession(t)
}

func TestMessageTool(t *testing.T) {
	var got []string
	policy := recipient.Policy{IsOwner: func(p string) bool { return p == "wecom:boss" }}
	tool := MessageTool(policy, func(ctx context.Context, channel, to, text string) error {
		got = append(got, channel+"|"+to+"|"+text)
		return nil
	})
	reg := tools.NewRegistry()
	mustRegister(t, reg, tool)
	ctx := context.Background()
	boss := tools.Call{Channel: "wecom", User: "boss", Session: "p2p:wecom:boss"}
	alice := tools.Call{Channel: "wecom", User: "alice", Session: "p2p:wecom:alice"}
	run := func(c tools.Call, args string) error {
		c.Args = json.RawMessage(args)
		_, err := reg.Run(ctx, "message", c)
		return err
	}
	if err := run(boss, `{"to":"bob","text":"hi"}`); err != nil {
		t.Fatal(err)
	}
	if err := run(alice, `{"to":"wecom:alice","text":"note to self"}`); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"to":"bob"}`, `{"to":"","text":"x"}`, `{"to":"bob","text":"x","cc":"y"}`} {
		if err := run(boss, bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	// The attack: a user addressing colleagues, everyone, or a list.
	for _, to := range []string{"bob", "@all", "ceo|cfo|hr", "tag:1"} {
		err := run(alice, `{"to":"`+to+`","text":"x"}`)
		if !errors.Is(err, recipient.ErrRefused) {
			t.Errorf("alice to %s: %v, want refused", to, err)
		}
	}
	if err := run(boss, `{"to":"@all","text":"x"}`); !errors.Is(err, recipient.ErrRefused) {
		t.Errorf("owner to @all without owner_broadcast: %v", err)
	}
	if strings.Join(got, ",") != "wecom|bob|hi,wecom|alice|note to self" {
		t.Errorf("sent %v", got)
	}
}

func TestTokenBudget(t *testing.T) {
	h := newHarness(t, Config{TurnTokenBudget: 20},
		toolReply(tc{"a", "echo", `{"n":1}`}), toolReply(tc{"b", "echo", `{"n":2}`}), textReply("summary"))
	out, _ := h.turn(t, "go")
	if out.Stopped != StopTokens || out.Steps != 3 || out.Text != "summary" || h.srv.Request(2).JSON["tools"] != nil {
		t.Fatalf("got %+v", out)
	}
}

type recordingMemory struct {
	mu    sync.Mutex
	calls []string
}

func (m *recordingMemory) Block(ctx context.Context, scope, query string, fast bool) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, fmt.Sprintf("%s|%s|%v", scope, query, fast))
	return "- #7 [2026-03-01] The user likes oolong tea", nil
}

func TestMemoryBlockAndTurnHook(t *testing.T) {
	h := newHarness(t, Config{}, textReply("a"), textReply("b"), textReply("c"))
	mem := &recordingMemory{}
	var turned []int64
	h.agent.d.Memory = mem
	h.agent.d.OnTurn = func(id int64) { turned = append(turned, id) }
	h.turn(t, "what tea do I like")
	if _, err := h.agent.Turn(context.Background(), Input{Key: h.key, User: "alice", Channel: "voice", Profile: "voice", Fast: true, Text: "and now?"}, nil); err != nil {
		t.Fatal(err)
	}
	group, _ := session.Group("wecom", "team")
	if _, err := h.agent.Turn(context.Background(), Input{Key: group, User: "alice", Channel: "wecom", Profile: "wecom", Text: "team question"}, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"wecom:alice|what tea do I like|false", "wecom:alice|and now?|true", "group:wecom:team|team question|false"}
	if strings.Join(mem.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("memory calls:\n%s\nwant:\n%s", strings.Join(mem.calls, "\n"), strings.Join(want, "\n"))
	}
	sys := h.sentMessages(t, 0)[0]["content"].(string)
	if !strings.Contains(sys, "## Relevant memory\n\n- #7 [2026-03-01] The user likes oolong tea") {
		t.Errorf("system message:\n%s", sys)
	}
	sess, _ := h.sessions.Current(context.Background(), h.key)
	if len(turned) != 3 || turned[0] != sess.ID || turned[1] != sess.ID || turned[2] == sess.ID {
		t.Errorf("OnTurn: %v (alice's session %d)", turned, sess.ID)
	}
}
