package embed

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"agent/pkg/embed/embedtest"
)

// The benchmarks run the full bge-small shape (12 layers, hidden 384) with
// random weights, generated on first use into testdata/models (git-ignored).

func bgeSmall(tb testing.TB) *Embedder {
	tb.Helper()
	dir := filepath.Join(repoRoot(tb), "testdata", "models", "bge-small-random")
	if err := embedtest.EnsureBGESmall(dir); err != nil {
		tb.Fatal(err)
	}
	return newTestEmbedder(tb, Config{ModelDir: dir, Threads: 2})
}

const benchSentence = "Please remind the team that the quarterly budget review moves to Thursday afternoon."

func BenchmarkEmbedOne(b *testing.B) { benchOne(b, bgeSmall(b)) }

// benchOne embeds benchSentence alone, again and again, after three
// untimed runs (as scripts/ref/bench.mjs does for onnxruntime-node: the
// first runs of a new session plan its memory and are slower).
func benchOne(b *testing.B, e *Embedder) {
	ctx := context.Background()
	texts := []string{benchSentence}
	for range 3 {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/sentence")
}

func BenchmarkEmbedBatch32(b *testing.B) {
	e := bgeSmall(b)
	ctx := context.Background()
	texts := make([]string, 32)
	for i := range texts {
		texts[i] = fmt.Sprintf("Item %d: %s", i, benchSentence)
	}
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*len(texts)), "ms/sentence")
}
