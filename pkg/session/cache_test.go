package session

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"agent/pkg/llm"
)

// The cached window is exactly SQLite's, through random appends (tool
// exchanges, orphaned results, parts, reasoning, large messages), resets
// and windows of every size; the answers are the caller's to change; and
// the session the cache says is current is the one SQLite says.
func TestCacheAgreesWithSQLite(t *testing.T) {
	s, clk := newStore(t)
	raw := &Store{db: s.db, now: s.now} // no cache: SQLite itself
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	keys := []Key{must(P2P("wecom", "alice")), must(P2P("wecom", "bob")), must(P2P("voice", "panel"))}
	msg := func(i int) llm.Message {
		switch r.IntN(7) {
		case 0:
			return llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: fmt.Sprint("c", i), Type: "function",
				Function: llm.FunctionCall{Name: "echo", Arguments: `{"n":` + fmt.Sprint(i) + `}`}}}}
		case 1, 2:
			return llm.Message{Role: llm.RoleTool, ToolCallID: fmt.Sprint("c", i-1), Content: fmt.Sprint("result ", i)}
		case 3:
			return llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(fmt.Sprint("look ", i))}}
		case 4:
			return llm.Message{Role: llm.RoleAssistant, Content: fmt.Sprint("answer ", i), ReasoningContent: "because"}
		case 5:
			return llm.Message{Role: llm.RoleUser, Content: strings.Repeat("long ", r.IntN(20000))}
		}
		return llm.Message{Role: llm.RoleUser, Content: fmt.Sprint("hello ", i)}
	}
	for i := range 1500 {
		k := keys[r.IntN(len(keys))]
		cur, err := s.Current(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		want, err := raw.Current(ctx, k)
		if err != nil || cur.ID != want.ID || !cur.LastActivity.Equal(want.LastActivity) {
			t.Fatalf("step %d: Current %+v, SQLite %+v (%v)", i, cur, want, err)
		}
		switch op := r.IntN(20); {
		case op == 0:
			if _, err := s.Reset(ctx, k); err != nil {
				t.Fatal(err)
			}
		case op < 12:
			batch := make([]llm.Message, 1+r.IntN(3))
			for j := range batch {
				batch[j] = msg(i)
			}
			clk.advance(1e9)
			if err := s.Append(ctx, cur.ID, batch...); err != nil {
				t.Fatal(err)
			}
		default:
			n := 1 + r.IntN(110)
			got, err := s.Window(ctx, cur.ID, n)
			if err != nil {
				t.Fatal(err)
			}
			want, err := raw.Window(ctx, cur.ID, n)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
				t.Fatalf("step %d: window(%d) of %d: %d messages from the cache, %d from SQLite", i, n, cur.ID, len(got), len(want))
			}
			if len(got) > 0 { // the caller may scribble on what it got
				got[0].Content = "scribbled"
				if len(got[0].ToolCalls) > 0 {
					got[0].ToolCalls[0].Function.Name = "scribbled"
				}
			}
		}
	}
}

// A message too large to keep (a picture as a data URL) is left out of
// the cache, which keeps the newer ones; a window reaching it is read
// from SQLite, and right.
func TestCacheSkipsLargeSessions(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	k := must(P2P("wecom", "alice"))
	cur, _ := s.Current(ctx, k)
	big := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("see"), {Type: "image_url", ImageURL: "data:image/png;base64," + strings.Repeat("A", cacheBytes)}}}
	if err := s.Append(ctx, cur.ID, big, llm.Message{Role: llm.RoleAssistant, Content: "a cat"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := s.Window(ctx, cur.ID, 10)
		if err != nil || len(got) != 2 || got[0].Parts[1].ImageURL != big.Parts[1].ImageURL {
			t.Fatalf("window: %d messages, %v", len(got), err)
		}
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if w, ok := s.c.wins[cur.ID]; ok && (w.bytes > cacheBytes || w.complete || len(w.msgs) != 1) {
		t.Errorf("cached: %d messages, %d bytes, complete %v; want the newest only, within the bound", len(w.msgs), w.bytes, w.complete)
	}
}
