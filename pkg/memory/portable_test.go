package memory

import (
	"context"
	"slices"
	"testing"
)

// A scope's facts move to another memory: with their vectors under the
// same model (found by meaning at once), re-embedded under another one,
// never twice when the import is repeated; Purge leaves nothing of the
// scope, history included, and another scope untouched.
func TestExportImportPurge(t *testing.T) {
	ctx := context.Background()
	src, _ := newMem(t, newVecs(), Config{})
	for _, text := range []string{"Bob's daughter is called Mia.", "Bob drinks his coffee black.", "Bob's car is a blue Volvo."} {
		if _, err := src.Add(ctx, "wecom:bob", Input{Text: text, Keywords: []string{"bob"}}); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := src.Add(ctx, "wecom:bob", Input{Text: "Bob lives in Berlin."})
	if _, err := src.Correct(ctx, "wecom:bob", old.ID, "Bob lives in Hamburg.", "test"); err != nil {
		t.Fatal(err)
	}
	src.Add(ctx, "wecom:alice", Input{Text: "Alice plays the piano."})
	facts, model, err := src.Export(ctx, "wecom:bob")
	if err != nil || len(facts) != 4 || model != "test-model" {
		t.Fatalf("export: %d facts of model %q, %v", len(facts), model, err)
	}
	for _, f := range facts {
		if f.Text == "Bob lives in Berlin." {
			t.Fatal("a superseded version was exported")
		}
		if len(f.Embedding) != 4*testDim {
			t.Fatalf("%q exported without its vector", f.Text)
		}
	}

	same, _ := newMem(t, newVecs(), Config{})
	if n, err := same.Import(ctx, "wecom:bob", model, facts); err != nil || n != 4 {
		t.Fatalf("import: %d, %v", n, err)
	}
	if n, err := same.Import(ctx, "wecom:bob", model, facts); err != nil || n != 0 {
		t.Fatalf("import again: %d added, %v", n, err)
	}
	st, _ := same.Stats(ctx, "wecom:bob")
	if st.Facts != 4 || st.Unembedded != 0 {
		t.Fatalf("after import under the same model: %+v", st)
	}
	hits, err := same.Search(ctx, "wecom:bob", "Bob's daughter is called Mia.", 1)
	if err != nil || len(hits) != 1 || hits[0].Text != "Bob's daughter is called Mia." || hits[0].VectorRank != 1 {
		t.Fatalf("search after import: %+v, %v", hits, err)
	}

	other, _ := newMem(t, newVecs(), Config{})
	if n, err := other.Import(ctx, "wecom:bob", "another-model", facts); err != nil || n != 4 {
		t.Fatalf("import under another model: %d, %v", n, err)
	}
	other.Wait() // the background re-embedding
	if st, _ := other.Stats(ctx, "wecom:bob"); st.Unembedded != 0 || st.Facts != 4 {
		t.Fatalf("vectors of another model were kept or not remade: %+v", st)
	}

	// Purge after a search loaded the scope's index.
	src.Search(ctx, "wecom:bob", "coffee", 3)
	n, err := src.Purge(ctx, "wecom:bob")
	if err != nil || n != 5 { // four current facts and one old version
		t.Fatalf("purge: %d rows, %v", n, err)
	}
	if hits, _ := src.Search(ctx, "wecom:bob", "Bob's daughter is called Mia.", 5); len(hits) != 0 {
		t.Fatalf("purged facts still found: %+v", hits)
	}
	if left, _, _ := src.Export(ctx, "wecom:bob"); len(left) != 0 {
		t.Fatalf("%d facts left", len(left))
	}
	alice, _, _ := src.Export(ctx, "wecom:alice")
	if !slices.ContainsFunc(alice, func(p Portable) bool { return p.Text == "Alice plays the piano." }) {
		t.Fatal("another scope was purged too")
	}
	if _, err := src.Purge(ctx, ""); err == nil {
		t.Fatal("purge of every scope accepted")
	}
}
