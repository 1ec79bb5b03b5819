//go:build cgo

package embed

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/embed/embedtest"
	"agent/pkg/mallocarena"
)

// longText is about 540 tokens: truncated to MaxTokens (512).
var longText = strings.Repeat("the quarterly budget review moves to thursday afternoon ", 60)

// bgeSmallWith is the bge-small-shaped test model with cfg (ModelDir set).
func bgeSmallWith(t *testing.T, cfg Config) *Embedder {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "testdata", "models", "bge-small-random")
	if err := embedtest.EnsureBGESmall(dir); err != nil {
		t.Fatal(err)
	}
	cfg.ModelDir, cfg.Threads = dir, 2
	return newTestEmbedder(t, cfg)
}

// longBatches embeds batches of long texts (what a compressed session's
// summary or a re-embedding hands the embedder).
func longBatches(t *testing.T, e *Embedder) {
	t.Helper()
	ctx := context.Background()
	for range 3 {
		if _, err := e.Embed(ctx, []string{longText, longText}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Embed(ctx, []string{longText + " x", longText, longText, longText}); err != nil {
			t.Fatal(err)
		}
	}
}

func shortRuns(t *testing.T, e *Embedder) {
	t.Helper()
	for range 20 {
		if _, err := e.Embed(context.Background(), []string{benchSentence}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitShrinks waits (up to a minute) until e has shrunk its arena n times.
func waitShrinks(t *testing.T, e *Embedder, n int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); e.shrinks.Load() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("arena shrunk %d times, want %d", e.shrinks.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testDeadline(t *testing.T) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx.Done()
}

// TestLongBatchLeavesNoPeak: batches of long texts must not leave their
// buffers resident. ONNX Runtime's arena kept them for the life of the
// process (+86 MB on bge-small after these batches, the soak's one-time
// step); now the arena keeps them only until the embedder has seen no
// large run for ArenaIdle.
func TestLongBatchLeavesNoPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the bge-small shape on long batches")
	}
	clk := clock.NewFake(time.Time{})
	e := bgeSmallWith(t, Config{Clock: clk})
	if !e.arena {
		t.Fatal("the session runs without its arena: ONNX Runtime's shrink option was not reachable")
	}
	shortRuns(t, e)
	mallocarena.Trim() // start from what the process holds, not from what malloc kept of loading the model
	before := rssBytes(t)
	longBatches(t, e)
	held := rssBytes(t)
	if n := e.shrinks.Load(); n != 0 {
		t.Fatalf("arena shrunk %d times during the burst", n)
	}
	if !clk.WaitTimers(1, testDeadline(t)) {
		t.Fatal("no idle wait after large runs")
	}
	clk.Advance(e.cfg.ArenaIdle)
	waitShrinks(t, e, 1)
	shortRuns(t, e)
	after := rssBytes(t)
	t.Logf("RSS %d MiB -> %d MiB during the burst -> %d MiB once idle", before>>20, held>>20, after>>20)
	if growth := after - before; growth > 40<<20 {
		t.Errorf("long batches left %d MiB more resident", growth>>20)
	}
	if n := clk.Pending(); n != 0 {
		t.Errorf("%d timers pending after the shrink, want 0 (short runs arm none)", n)
	}
}

// Without the arena (where the shrink option cannot be reached), each
// large run hands its memory back at once.
func TestLongBatchWithoutArena(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the bge-small shape on long batches")
	}
	clk := clock.NewFake(time.Time{})
	e := bgeSmallWith(t, Config{Clock: clk, noArena: true})
	shortRuns(t, e)
	mallocarena.Trim()
	before := rssBytes(t)
	longBatches(t, e)
	shortRuns(t, e)
	after := rssBytes(t)
	t.Logf("RSS %d MiB -> %d MiB after long batches, no arena", before>>20, after>>20)
	if growth := after - before; growth > 40<<20 {
		t.Errorf("long batches left %d MiB more resident", growth>>20)
	}
	if e.arena || clk.Pending() != 0 || e.shrinks.Load() != 0 {
		t.Errorf("arena %v, %d timers, %d shrinks: want none of them", e.arena, clk.Pending(), e.shrinks.Load())
	}
}

// A large run during the idle wait moves it on: the arena is shrunk
// ArenaIdle after the last large run, once.
func TestArenaIdleMovesOn(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	e := bgeSmallWith(t, Config{Clock: clk, ArenaIdle: 3 * time.Second})
	ctx := context.Background()
	large := []string{longText[:1200], longText[:1200]} // 2 × ~170 tokens
	if _, err := e.Embed(ctx, large); err != nil {
		t.Fatal(err)
	}
	dl := testDeadline(t)
	if !clk.WaitTimers(1, dl) {
		t.Fatal("no idle wait after a large run")
	}
	clk.Advance(2 * time.Second)
	if _, err := e.Embed(ctx, large); err != nil { // at 2 s: the wait ends at 5 s now
		t.Fatal(err)
	}
	if clk.Pending() != 1 {
		t.Fatalf("%d timers pending, want the one idle wait", clk.Pending())
	}
	clk.Advance(time.Second) // 3 s: the first timer fires, 1 s idle
	if !clk.WaitTimers(1, dl) {
		t.Fatal("the idle wait did not move on")
	}
	if n := e.shrinks.Load(); n != 0 {
		t.Fatalf("shrunk %d times 1 s after a large run", n)
	}
	if next, _ := clk.Next(); !next.Equal(clk.Now().Add(2 * time.Second)) {
		t.Fatalf("the wait ends at %v, want 2 s from now", next.Sub(clk.Now()))
	}
	clk.Advance(2 * time.Second)
	waitShrinks(t, e, 1)
	if _, err := e.Embed(ctx, []string{"a query"}); err != nil { // the session still works
		t.Fatal(err)
	}
	if clk.Pending() != 0 || e.shrinks.Load() != 1 {
		t.Fatalf("%d timers, %d shrinks after one burst; want 0 and 1", clk.Pending(), e.shrinks.Load())
	}
}

// Close during the idle wait ends it (no shrink, nothing left waiting), and
// Close racing the shrink itself waits for it.
func TestCloseDuringArenaWait(t *testing.T) {
	for i := range 6 {
		clk := clock.NewFake(time.Time{})
		e := bgeSmallWith(t, Config{Clock: clk})
		if _, err := e.Embed(context.Background(), []string{longText}); err != nil {
			t.Fatal(err)
		}
		if !clk.WaitTimers(1, testDeadline(t)) {
			t.Fatal("no idle wait after a large run")
		}
		if i%2 == 1 {
			go clk.Advance(e.cfg.ArenaIdle) // the shrink races Close
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Embed after Close: %v", err)
		}
		if i%2 == 0 && (e.shrinks.Load() != 0 || clk.Pending() != 0) {
			t.Fatalf("after Close: %d shrinks, %d timers; want none", e.shrinks.Load(), clk.Pending())
		}
		if n := e.live.Load(); n != 0 {
			t.Fatalf("%d native values alive after Close", n)
		}
	}
}
