package memory

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"agent/pkg/embed"
	"agent/pkg/embed/embedtest"
)

// onnxEmbedder loads ONNX Runtime and an embedding model of shape in dir
// (generated when missing).
func onnxEmbedder(t testing.TB, dir string, shape embedtest.Shape) *embed.Embedder {
	t.Helper()
	lib := embedtest.ORTLibrary(t)
	if err := embedtest.Ensure(dir, shape, 3); err != nil {
		t.Fatal(err)
	}
	e, err := embed.New(embed.Config{ModelDir: dir, LibraryPath: lib, Threads: 2}, slog.New(slog.DiscardHandler))
	if err != nil {
		if strings.Contains(err.Error(), "stub") || strings.Contains(err.Error(), "not built") {
			embedtest.RequireNative(t, err.Error(), "make build (cgo)")
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// The real embedding path end to end, on a generated bge-shaped model: the
// vectors come from ONNX Runtime, dedup sees the same sentence in another
// case (the tokenizer lower-cases, so the vectors are equal), and the
// hybrid search and the fast block work on them. A random-weight model maps
// every text to nearly the same vector (cosine ~0.9999), so dedup runs at
// threshold 1 here: only equal vectors are duplicates.
func TestONNXEndToEnd(t *testing.T) {
	e := onnxEmbedder(t, t.TempDir(), embedtest.Tiny())
	s, _ := newMem(t, nil, Config{DedupThreshold: 1})
	if err := s.SetEmbedder(ctx, e, "tiny"); err != nil {
		t.Fatal(err)
	}
	a := mustAdd(t, s, "wecom:alice", Input{Text: "The user walks the dog every morning at seven."})
	dup := mustAdd(t, s, "wecom:alice", Input{Text: "THE USER WALKS THE DOG EVERY MORNING AT SEVEN."})
	if dup.Action != Duplicate || dup.ID != a.ID || dup.Similarity < 0.9999 {
		t.Fatalf("same sentence upper-cased: %+v", dup)
	}
	for _, text := range []string{"用户每周三去游泳", "The user's car is a blue Volvo", "Meeting with Dr. Chen on Friday 🦷"} {
		mustAdd(t, s, "wecom:alice", Input{Text: text})
	}
	mustAdd(t, s, "wecom:bob", Input{Text: "Bob walks the dog too"})
	hits, err := s.Search(ctx, "wecom:alice", "dog walking in the morning", 3)
	if err != nil || len(hits) == 0 {
		t.Fatalf("search: %v %v", ids(hits), err)
	}
	for _, h := range hits {
		if h.Scope != "wecom:alice" || h.VectorRank == 0 {
			t.Errorf("hit %+v", h)
		}
	}
	if hits[0].ID != a.ID || hits[0].KeywordRank == 0 {
		t.Errorf("the fact sharing words with the query is not first: %+v", hits[0])
	}
	b, err := s.Block(context.Background(), "wecom:alice", "游泳", false)
	if err != nil || !strings.Contains(b, "游泳") {
		t.Fatalf("block: %q %v", b, err)
	}
	if st, _ := s.Stats(ctx, ""); st.Unembedded != 0 || st.Facts != 5 {
		t.Errorf("stats %+v", st)
	}
}
