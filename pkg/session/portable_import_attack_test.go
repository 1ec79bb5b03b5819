package session

import (
	"context"
	"testing"

	"agent/pkg/llm"
)

// A session's memory_seq (the last message already compressed into
// long-term facts) does not move: every imported session starts at 0, so
// the new box's compressor sends the user's whole history to the LLM again
// and stores its facts a second time (the facts themselves moved too).
func TestImportKeepsMemorySeq(t *testing.T) {
	ctx := context.Background()
	src, _ := newStore(t)
	key := must(P2P("wecom", "bob"))
	s1, _ := src.Current(ctx, key)
	src.Append(ctx, s1.ID, llm.Message{Role: llm.RoleUser, Content: "I like tea"}, llm.Message{Role: llm.RoleAssistant, Content: "noted"})
	src.Reset(ctx, key) // closed
	// The compressor has turned it into facts.
	if _, err := src.db.ExecContext(ctx, `UPDATE sessions SET memory_seq = message_count`); err != nil {
		t.Fatal(err)
	}
	exp, err := src.Export(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := newStore(t)
	if _, err := dst.Import(ctx, key, exp); err != nil {
		t.Fatal(err)
	}
	var n int
	// What the compressor's sweep selects.
	if err := dst.db.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE closed_at IS NOT NULL AND message_count > memory_seq`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d already-compressed sessions are to be compressed again on the new box", n)
	}
}

// A move whose import is repeated (the reply was lost, the move undone and
// run again) doubles the sessions: unlike memory.Import, session Import is
// not idempotent.
func TestImportTwiceDoublesSessions(t *testing.T) {
	ctx := context.Background()
	src, _ := newStore(t)
	key := must(P2P("wecom", "bob"))
	s1, _ := src.Current(ctx, key)
	src.Append(ctx, s1.ID, llm.Message{Role: llm.RoleUser, Content: "hi"})
	src.Reset(ctx, key)
	exp, _ := src.Export(ctx, key)
	dst, _ := newStore(t)
	dst.Import(ctx, key, exp)
	dst.Import(ctx, key, exp)
	got, _ := dst.Export(ctx, key)
	if len(got) != len(exp) {
		t.Fatalf("imported the same snapshot twice: %d sessions, want %d", len(got), len(exp))
	}
}

// A snapshot whose sequence numbers are not 1..n (a corrupt or hand-made
// one, or one from a version that numbers differently) is accepted, and
// sets message_count to the number of messages: the next Append reuses a
// sequence number that exists and fails, for good (the conversation of
// that user is broken on the new box).
func TestImportWithGappedSeqBreaksAppend(t *testing.T) {
	ctx := context.Background()
	key := must(P2P("wecom", "bob"))
	dst, _ := newStore(t)
	snap := []PortableSession{{CreatedAt: 1, LastAt: 2, Messages: []PortableMessage{
		{Seq: 1, Role: "user", Content: "a", CreatedAt: 1},
		{Seq: 3, Role: "assistant", Content: "b", CreatedAt: 2},
	}}}
	if _, err := dst.Import(ctx, key, snap); err != nil {
		return // refused: fine
	}
	cur, err := dst.Current(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Append(ctx, cur.ID, llm.Message{Role: llm.RoleUser, Content: "c"}); err != nil {
		t.Fatalf("first append after the import: %v", err)
	}
	if err := dst.Append(ctx, cur.ID, llm.Message{Role: llm.RoleUser, Content: "d"}); err != nil {
		t.Fatalf("second append after an import the store accepted: %v", err)
	}
}
