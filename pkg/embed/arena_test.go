//go:build cgo

package embed

import (
	"context"
	"strings"
	"testing"
)

// TestLongBatchLeavesNoPeak: batches of long texts (512 tokens, what a
// compressed session's summary or a re-embedding hands the embedder) must
// not leave their buffers resident. ONNX Runtime's arena kept them for the
// life of the process: +106 MB on bge-small after these batches, the soak's
// one-time step. Without the arena, and trimmed after a large run, resident
// memory comes back down.
func TestLongBatchLeavesNoPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the bge-small shape on long batches")
	}
	e := bgeSmall(t)
	ctx := context.Background()
	for range 20 {
		if _, err := e.Embed(ctx, []string{benchSentence}); err != nil {
			t.Fatal(err)
		}
	}
	before := rssBytes(t)
	long := strings.Repeat("the quarterly budget review moves to thursday afternoon ", 60)
	for range 3 {
		if _, err := e.Embed(ctx, []string{long, long}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Embed(ctx, []string{long + " x", long, long, long}); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		if _, err := e.Embed(ctx, []string{benchSentence}); err != nil {
			t.Fatal(err)
		}
	}
	after := rssBytes(t)
	t.Logf("RSS %d MiB -> %d MiB after long batches", before>>20, after>>20)
	if growth := after - before; growth > 40<<20 {
		t.Errorf("long batches left %d MiB more resident", growth>>20)
	}
}
