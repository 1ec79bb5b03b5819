package embed

import (
	"context"
	"path/filepath"
	"testing"

	"agent/pkg/embed/embedtest"
)

func bgeSmallInt8(tb testing.TB) *Embedder {
	tb.Helper()
	dir := filepath.Join(repoRoot(tb), "testdata", "models", "bge-small-int8-random")
	if err := embedtest.EnsureBGESmallInt8(dir); err != nil {
		tb.Fatal(err)
	}
	return newTestEmbedder(tb, Config{ModelDir: dir, Threads: 2})
}

// An int8-quantised export (ONNX Runtime's dynamic quantisation:
// DynamicQuantizeLinear, MatMulInteger) loads and runs like the fp32 one;
// its weights being the fp32 test model's quantised, its vectors point
// the same way.
func TestInt8ModelAgreesWithFP32(t *testing.T) {
	if testing.Short() {
		t.Skip("loads two bge-small-shaped models")
	}
	fp := bgeSmall(t)
	q := bgeSmallInt8(t)
	if q.Dim() != fp.Dim() {
		t.Fatalf("int8 dim %d, fp32 %d", q.Dim(), fp.Dim())
	}
	texts := []string{benchSentence, "where is the printer on floor 3", "明天下午三点开会", ""}
	ctx := context.Background()
	a, err := fp.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := q.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		var dot float64
		for j := range a[i] {
			dot += float64(a[i][j]) * float64(b[i][j])
		}
		t.Logf("%q: cosine int8/fp32 %.4f", texts[i], dot)
		if dot < 0.9 || dot > 0.999999 {
			t.Errorf("%q: cosine of the int8 and fp32 vectors %.4f; want close but not equal", texts[i], dot)
		}
	}
}

func BenchmarkEmbedOneInt8(b *testing.B) { benchOne(b, bgeSmallInt8(b)) }
