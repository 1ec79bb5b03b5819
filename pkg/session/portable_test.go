package session

import (
	"context"
	"testing"
	"time"

	"agent/pkg/llm"
)

// A key's sessions move to another store with every message as stored;
// the target's own open session of the key is closed; Purge removes them
// and the cache forgets them.
func TestExportImportPurge(t *testing.T) {
	ctx := context.Background()
	src, _ := newStore(t)
	key, _ := P2P("wecom", "bob")
	s1, _ := src.Current(ctx, key)
	src.Append(ctx, s1.ID, llm.Message{Role: llm.RoleUser, Content: "hi"}, llm.Message{Role: llm.RoleAssistant, Content: "hello",
		ToolCalls: []llm.ToolCall{{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "x", Arguments: "{}"}}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: "done"})
	src.Reset(ctx, key)
	s2, _ := src.Current(ctx, key)
	src.Append(ctx, s2.ID, llm.Message{Role: llm.RoleUser, Content: "second"})
	exp, err := src.Export(ctx, key)
	if err != nil || len(exp) != 2 || len(exp[0].Messages) != 3 || exp[0].ClosedAt == nil || exp[1].ClosedAt != nil {
		t.Fatalf("export: %+v, %v", exp, err)
	}

	dst, dclk := newStore(t)
	dclk.advance(time.Hour)
	own, _ := dst.Current(ctx, key) // the user wrote here before
	dst.Append(ctx, own.ID, llm.Message{Role: llm.RoleUser, Content: "old here"})
	dst.Window(ctx, own.ID, 10) // cached
	n, err := dst.Import(ctx, key, exp)
	if err != nil || n != 4 {
		t.Fatalf("import: %d messages, %v", n, err)
	}
	cur, err := dst.Current(ctx, key)
	if err != nil || cur.ID == own.ID {
		t.Fatalf("current after import: %+v, %v (the imported open session should be current)", cur, err)
	}
	win, _ := dst.Window(ctx, cur.ID, 10)
	if len(win) != 1 || win[0].Content != "second" {
		t.Fatalf("window of the imported session: %+v", win)
	}
	list, _ := dst.List(ctx)
	if len(list) != 3 {
		t.Fatalf("%d sessions after import, want 3", len(list))
	}
	first := list[0]
	for _, s := range list {
		if s.ID < first.ID {
			first = s
		}
	}

	gone, err := dst.Purge(ctx, key)
	if err != nil || gone != 3 {
		t.Fatalf("purge: %d, %v", gone, err)
	}
	fresh, _ := dst.Current(ctx, key)
	if win, _ := dst.Window(ctx, fresh.ID, 10); len(win) != 0 {
		t.Fatalf("a new session after purge shows old messages: %+v", win)
	}
	if ss, _ := dst.Export(ctx, key); len(ss) != 1 || len(ss[0].Messages) != 0 {
		t.Fatalf("after purge: %+v", ss)
	}
}
