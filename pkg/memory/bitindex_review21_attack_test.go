package memory

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// A search that read the old embedder state before a model change and
// reaches bitScope after prepareVectors' reset creates the scope's index
// in the NEW map with the OLD width (bitScope never checks b.words against
// dim). From then on every put from the new model inserts vectors of
// another width (slices.Insert of len(q) words at i*b.words: the rows
// shift), and a search with the new model scans rows of the old width
// against a shorter query: index out of range.
func TestReview21ModelChangeMidSearchLeavesWrongWidthIndex(t *testing.T) {
	e1 := newVecs()
	e1.dim = 768
	s, _ := newMem(t, e1, Config{})
	ctx := context.Background()
	const scope = "wecom:alice"
	for i := range 5 {
		if _, err := s.Add(ctx, scope, Input{Text: "old fact " + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Search(ctx, scope, "warm the index", 5); err != nil {
		t.Fatal(err)
	}

	// A search starts under the old model and is inside its query embedding.
	gate := make(chan struct{})
	e1.mu.Lock()
	e1.gate = gate
	e1.mu.Unlock()
	before := e1.Calls()
	done := make(chan error, 1)
	go func() {
		_, err := s.Search(ctx, scope, "a query embedded by the old model", 5)
		done <- err
	}()
	for e1.Calls() == before {
		time.Sleep(time.Millisecond)
	}

	// Meanwhile the model changes (another width) and the backfill runs.
	e2 := newVecs()
	e2.dim = 384
	if err := s.SetEmbedder(ctx, e2, "model-2"); err != nil {
		t.Fatal(err)
	}
	s.Wait()
	close(gate)
	if err := <-done; err != nil {
		t.Logf("the old search: %v", err)
	}
	if b := s.bits.loaded(scope); b != nil && b.words != (384+63)/64 {
		t.Errorf("after the model change the %s index has %d words per vector, want %d (made by a search under the old model)", scope, b.words, (384+63)/64)
	}

	// The new model writes and searches.
	for i := range 3 {
		if _, err := s.Add(ctx, scope, Input{Text: "new fact " + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		_, err = s.Search(ctx, scope, "new fact", 5)
		return err
	}()
	if err != nil {
		t.Errorf("search with the new model: %v", err)
	}
}
