package memory

import (
	"context"
	"fmt"
	"strconv"
	"sync"
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
func TestModelChangeMidSearchLeavesWrongWidthIndex(t *testing.T) {
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
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		for i := range 3 {
			if _, err := s.Add(ctx, scope, Input{Text: "new fact " + strconv.Itoa(i)}); err != nil {
				return err
			}
		}
		_, err = s.Search(ctx, scope, "new fact", 5)
		return err
	}()
	if err != nil {
		t.Errorf("add and search with the new model: %v", err)
	}
}

// Concurrent adds, corrections, forgets, searches and first loads of
// several scopes; afterwards each loaded index equals SQLite, and no
// search ever returned another scope's fact or one forgotten before the
// search began.
func TestConcurrentWritesAndLoads(t *testing.T) {
	e := newVecs()
	e.dim = 384
	s, _ := newMem(t, e, Config{DedupThreshold: 0.9999})
	ctx := context.Background()
	scopes := []string{"wecom:a", "wecom:b", "wecom:c"}
	errc := make(chan error, 64)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := scopes[w%len(scopes)]
			var mine []int64
			for i := range 60 {
				res, err := s.Add(ctx, sc, Input{Text: fmt.Sprintf("w%d fact %d zebra", w, i)})
				if err != nil {
					errc <- err
					return
				}
				mine = append(mine, res.ID)
				switch i % 5 {
				case 1:
					if r, err := s.Correct(ctx, sc, res.ID, fmt.Sprintf("w%d fact %d corrected zebra", w, i), "t"); err == nil {
						mine[len(mine)-1] = r.ID
					}
				case 3:
					id := mine[len(mine)-1]
					if _, err := s.Forget(ctx, sc, id); err != nil {
						errc <- err
						return
					}
					hits, err := s.Search(ctx, sc, fmt.Sprintf("w%d fact %d zebra", w, i), 10)
					if err != nil {
						errc <- err
						return
					}
					for _, h := range hits {
						if h.ID == id {
							errc <- fmt.Errorf("forgotten %d found", id)
						}
					}
				}
				if i%7 == 0 && w < 3 {
					s.bits.reset() // as a model change would, mid-traffic
				}
				hits, err := s.Search(ctx, sc, "zebra", 20)
				if err != nil {
					errc <- err
					return
				}
				for _, h := range hits {
					if h.Scope != sc {
						errc <- fmt.Errorf("%s got %s's fact %d", sc, h.Scope, h.ID)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	for _, sc := range scopes {
		checkAgainstSQLite(t, s, sc, hashVec("q "+sc, 384))
	}
}
