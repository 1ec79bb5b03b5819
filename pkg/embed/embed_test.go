package embed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestNewErrors(t *testing.T) {
	fix := fixtureDir(t)
	noModel := t.TempDir()
	copyFile(t, filepath.Join(fix, TokenizerFile), filepath.Join(noModel, TokenizerFile))
	noTok := t.TempDir()
	copyFile(t, filepath.Join(fix, ModelFile), filepath.Join(noTok, ModelFile))

	tests := []struct {
		name     string
		cfg      Config
		sentinel error
		want     []string
	}{
		{"no dir configured", Config{}, ErrModelMissing, []string{"scripts/fetch-models.sh", "make models"}},
		{"empty dir", Config{ModelDir: t.TempDir()}, ErrModelMissing, []string{ModelFile, "scripts/fetch-models.sh"}},
		{"no model", Config{ModelDir: noModel}, ErrModelMissing, []string{filepath.Join(noModel, ModelFile), "scripts/fetch-models.sh"}},
		{"no tokenizer", Config{ModelDir: noTok}, ErrModelMissing, []string{filepath.Join(noTok, TokenizerFile), "make models"}},
		{"bad pooling", Config{ModelDir: fix, Pooling: "max"}, nil, []string{`invalid pooling "max"`}},
		{"max tokens too small", Config{ModelDir: fix, MaxTokens: 2}, nil, []string{"max tokens 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(tt.cfg, nil)
			if err == nil {
				e.Close()
				t.Fatal("New succeeded")
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("error %v is not %v", err, tt.sentinel)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}

	t.Run("corrupt model", func(t *testing.T) {
		lib := needRuntime(t)
		dir := t.TempDir()
		copyFile(t, filepath.Join(fix, TokenizerFile), filepath.Join(dir, TokenizerFile))
		if err := os.WriteFile(filepath.Join(dir, ModelFile), []byte("definitely not protobuf"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := New(Config{ModelDir: dir, LibraryPath: lib}, nil)
		if err == nil || !strings.Contains(err.Error(), "load model") {
			t.Errorf("New with a corrupt model: %v", err)
		}
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEmbed(t *testing.T) {
	e := newTestEmbedder(t, Config{})
	if e.Dim() != 32 {
		t.Fatalf("Dim() = %d, want 32 (the test model's hidden size)", e.Dim())
	}
	ctx := context.Background()

	got, err := e.Embed(ctx, nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("Embed(nil) = %v, %v", got, err)
	}

	texts := []string{"", "   ", "\xff\xfe invalid", "hello world", strings.Repeat("long text ", 2000), "[SEP]"}
	got, err = e.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(got), len(texts))
	}
	for i, v := range got {
		if len(v) != e.Dim() {
			t.Errorf("text %d: %d dims", i, len(v))
		}
		if n := l2(v); math.Abs(n-1) > 1e-5 {
			t.Errorf("text %d: norm %v", i, n)
		}
	}
	// "" and "   " are both [CLS] [SEP].
	if !slices.Equal(got[0], got[1]) {
		t.Error("empty and whitespace-only texts embed differently")
	}
	if slices.Equal(got[0], got[3]) {
		t.Error("empty text and \"hello world\" embed identically")
	}

	mean := newTestEmbedder(t, Config{Pooling: PoolingMean})
	m, err := mean.Embed(ctx, []string{"hello world"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(m[0], got[3]) {
		t.Error("mean and cls pooling agree on a three-token text")
	}
}

func TestEmbedConcurrent(t *testing.T) {
	e := newTestEmbedder(t, Config{BatchSize: 4})
	ctx := context.Background()
	texts := corpus()
	want, err := e.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			// Different subsets make different batches.
			sub := texts[g%3:]
			got, err := e.Embed(ctx, sub)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range sub {
				for k := range got[i] {
					if d := math.Abs(float64(got[i][k] - want[i+g%3][k])); d > 1e-5 {
						t.Errorf("goroutine %d text %d: differs by %g", g, i, d)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if n := e.live.Load(); n != 0 {
		t.Errorf("%d native values alive after concurrent calls", n)
	}
}

func TestEmbedCancelAndClose(t *testing.T) {
	e := newTestEmbedder(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Embed with a cancelled context: %v", err)
	}
	// A context that is cancelled while the batches run.
	ctx, cancel = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := e.Embed(ctx, slices.Repeat([]string{strings.Repeat("many tokens here ", 200)}, 64))
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Embed cancelled midway: %v", err)
		}
	})
	cancel()
	wg.Wait()
	if n := e.live.Load(); n != 0 {
		t.Errorf("%d native values alive after cancelled calls", n)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := e.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Embed after Close: %v", err)
	}
}

func TestPlan(t *testing.T) {
	lens := []int{5, 3, 512, 4, 512, 512, 100, 2}
	ids := make([][]int, len(lens))
	for i, n := range lens {
		ids[i] = make([]int, n)
	}
	got := plan(ids, 3)
	want := [][]int{{7, 1, 3}, {0, 6}, {2, 4}, {5}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("plan = %v, want %v", got, want)
	}
	seen := map[int]bool{}
	for _, b := range got {
		s := 0
		for _, i := range b {
			seen[i] = true
			s = max(s, lens[i])
		}
		if len(b)*s*s > attentionBudget && len(b) > 1 {
			t.Errorf("batch %v over the attention budget", b)
		}
	}
	if len(seen) != len(lens) {
		t.Errorf("plan lost texts: %v", got)
	}
}

// TestNoNativeLeaks runs 1000 calls and checks that every ONNX Runtime
// value we created was destroyed, and that resident memory levels off.
func TestNoNativeLeaks(t *testing.T) {
	e := newTestEmbedder(t, Config{})
	ctx := context.Background()
	texts := []string{"a short sentence", "another, somewhat longer sentence to embed", ""}
	call := func() {
		if _, err := e.Embed(ctx, texts); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		call()
	}
	runtime.GC()
	before := rssBytes(t)
	created := e.lifetime.Load()
	const n = 1000
	for range n {
		call()
	}
	runtime.GC()
	after := rssBytes(t)
	if live := e.live.Load(); live != 0 {
		t.Errorf("%d native values alive after %d calls", live, n)
	}
	// 3 inputs + 1 output per batch, one batch per call.
	if got := e.lifetime.Load() - created; got != 4*n {
		t.Errorf("%d native values created in %d calls, want %d", got, n, 4*n)
	}
	growth := after - before
	t.Logf("RSS %d MiB -> %d MiB over %d calls", before>>20, after>>20, n)
	// The tensor counts above are the precise check for our values; this
	// bound catches growth inside ONNX Runtime (per-shape caches, arena).
	if limit := int64(24 << 20); growth > limit {
		t.Errorf("RSS grew by %d MiB over %d calls", growth>>20, n)
	}
}

func rssBytes(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(data))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}
