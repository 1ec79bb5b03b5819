//go:build cgo

package embed

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/onnxrt"

	ort "github.com/yalue/onnxruntime_go"
)

// cgoOnly turns e's runner off: its runs happen in the calling goroutine,
// as they do when the runner cannot start.
func cgoOnly(t *testing.T, e *Embedder) {
	t.Helper()
	if e.session.thread == nil {
		t.Fatal("the embedder has no runner thread")
	}
	if err := e.session.thread.Close(); err != nil {
		t.Fatal(err)
	}
	e.session.thread = nil
}

// TestThreadRunMatchesCgo: a run on the runner's thread gives what the
// same session gives in a cgo call, batched or alone.
func TestThreadRunMatchesCgo(t *testing.T) {
	onThread := newTestEmbedder(t, Config{})
	inCall := newTestEmbedder(t, Config{})
	cgoOnly(t, inCall)
	texts := corpus()
	ctx, cancel := context.WithCancel(context.Background()) // a context that can end: the run-options path
	defer cancel()
	for _, c := range []context.Context{context.Background(), ctx} {
		got, err := onThread.Embed(c, texts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := inCall.Embed(c, texts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			for j := range want[i] {
				if d := math.Abs(float64(got[i][j] - want[i][j])); d > 1e-5 {
					t.Fatalf("text %d dim %d: thread %v, cgo %v", i, j, got[i][j], want[i][j])
				}
			}
		}
	}
	if n := onThread.live.Load(); n != 0 {
		t.Errorf("%d native values alive", n)
	}
}

// TestThreadRunTerminated: cancelling a run in flight on the thread ends
// it with the context's error, and the session then works as before.
func TestThreadRunTerminated(t *testing.T) {
	e := newTestEmbedder(t, Config{})
	before, err := e.Embed(context.Background(), []string{"after the storm"})
	if err != nil {
		t.Fatal(err)
	}
	big := slices.Repeat([]string{strings.Repeat("many tokens here ", 200)}, 256)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Embed(ctx, big)
		done <- err
	}()
	// Cancel once a batch is on the thread: runMu is held for the run.
	for e.runMu.TryLock() {
		e.runMu.Unlock()
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Embed cancelled in a run: %v", err)
	}
	after, err := e.Embed(context.Background(), []string{"after the storm"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before[0], after[0]) {
		t.Error("the session gives another vector after a terminated run")
	}
	if n := e.live.Load(); n != 0 {
		t.Errorf("%d native values alive", n)
	}
}

// TestThreadRunnerContract: wrong arguments are refused without a run,
// Close waits for runs in flight, and a closed runner refuses runs.
func TestThreadRunnerContract(t *testing.T) {
	e := newTestEmbedder(t, Config{})
	r, err := onnxrt.NewThreadRunner(e.session.DynamicAdvancedSession)
	if err != nil {
		t.Fatal(err)
	}
	n := len(e.inputs)
	ins, out := runnerInputs(t, e)
	seq := out.GetShape()[1]
	if err := r.Run(ins[:n-1], []ort.Value{out}, nil); err == nil {
		t.Error("Run with an input missing: no error")
	}
	if err := r.Run(ins, []ort.Value{nil}, nil); err == nil {
		t.Error("Run with an output left to allocate: no error")
	}
	bad, err := ort.NewEmptyTensor[float32](ort.NewShape(1, seq-1, int64(e.dim)))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Destroy()
	if err := r.Run(ins, []ort.Value{bad}, nil); err == nil || !strings.Contains(err.Error(), "onnxrt: run:") {
		t.Errorf("Run into an output of the wrong shape: %v, want ONNX Runtime's error", err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				if err := r.Run(ins, []ort.Value{out}, nil); err != nil && !errors.Is(err, onnxrt.ErrRunnerClosed) {
					t.Errorf("Run: %v", err)
				}
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := r.Run(ins, []ort.Value{out}, nil); !errors.Is(err, onnxrt.ErrRunnerClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if _, err := onnxrt.NewThreadRunner(nil); err == nil {
		t.Error("NewThreadRunner(nil): no error")
	}
}

// BenchmarkEmbedOneInCall is BenchmarkEmbedOne with the run in a cgo call
// from the calling goroutine instead of on the runner's thread: what the
// runner saves.
func BenchmarkEmbedOneInCall(b *testing.B) {
	e := bgeSmall(b)
	if err := e.session.thread.Close(); err != nil {
		b.Fatal(err)
	}
	e.session.thread = nil
	benchOne(b, e)
}

// runnerInputs builds the session's inputs for "hello world" and an output of
// the right shape; everything is destroyed at the end of the test.
func runnerInputs(t *testing.T, e *Embedder) (ins []ort.Value, out *ort.Tensor[float32]) {
	t.Helper()
	ids, err := e.tok.Encode("hello world", 16)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(ids))
	for _, name := range e.inputs {
		data := make([]int64, n)
		for i := range data {
			switch name {
			case "input_ids":
				data[i] = int64(ids[i])
			case "attention_mask":
				data[i] = 1
			}
		}
		v, err := ort.NewTensor(ort.NewShape(1, n), data)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Destroy() })
		ins = append(ins, v)
	}
	out, err = ort.NewEmptyTensor[float32](ort.NewShape(1, n, int64(e.dim)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Destroy() })
	return ins, out
}
