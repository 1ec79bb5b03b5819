//go:build cgo

package embed

// Everything that touches ONNX Runtime (through github.com/yalue/onnxruntime_go,
// which needs cgo) lives in this file; onnx_stub.go stands in for it when
// cgo is off, so the pure-Go parts (Tokenizer) still build and test.

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"agent/pkg/mallocarena"
	"agent/pkg/onnxrt"

	ort "github.com/yalue/onnxruntime_go"
)

// largeRun is the size of a run (batch × tokens) after which the memory
// its buffers took is handed back to the system: a query or a short batch
// of facts stays under it and pays nothing.
const largeRun = 256

// session is the model's ONNX Runtime session and the thread its runs go
// to (onnxrt.ThreadRunner: a run in a cgo call costs a two-core box about
// a millisecond an embedding; nil when the runner cannot start, and runs
// then happen in the calling goroutine).
type session struct {
	*ort.DynamicAdvancedSession
	thread *onnxrt.ThreadRunner
}

func (s *session) Destroy() error {
	if s.thread != nil {
		s.thread.Close()
	}
	return s.DynamicAdvancedSession.Destroy()
}

// openSession creates the ONNX Runtime session on provider p.
func (e *Embedder) openSession(modelPath string, p onnxrt.Provider) error {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return fmt.Errorf("embed: session options: %w", err)
	}
	defer opts.Destroy()
	if err := onnxrt.ConfigureSession(opts, e.cfg.Threads); err != nil {
		return fmt.Errorf("embed: session options: %w", err)
	}
	// ONNX Runtime's memory arena keeps the peak of the largest run for the
	// life of the session: a few batches of long texts (a compressed
	// session's retrieval, a re-embedding) left +86 MB resident on bge-small
	// for good.
	// Without the arena every run mallocs its buffers afresh, and a long
	// batch runs at 60 % of the speed. So the arena stays on through a
	// burst of large runs, and is shrunk once they stop (shrinkWhenIdle).
	// Where the shrink cannot be reached the session runs without an arena
	// and trims after each large run. Measured in TestLongBatchLeavesNoPeak
	// and BenchmarkCompression (README).
	e.arena = !e.cfg.noArena && onnxrt.CanShrinkArena()
	if !e.arena {
		e.log.Warn("embedding: no memory arena (ONNX Runtime's arena shrinkage is not reachable); long texts embed slower")
	}
	if err := opts.SetCpuMemArena(e.arena); err != nil {
		return fmt.Errorf("embed: session options: %w", err)
	}
	if err := onnxrt.AppendProvider(opts, p); err != nil {
		return fmt.Errorf("embed: %w", err)
	}
	sess, err := ort.NewDynamicAdvancedSession(modelPath, e.inputs, []string{e.output}, opts)
	if err != nil {
		return fmt.Errorf("embed: load model %s: %w", modelPath, err)
	}
	e.session = &session{DynamicAdvancedSession: sess}
	if e.session.thread, err = onnxrt.NewThreadRunner(sess); err != nil {
		e.log.Warn("embedding: running the model in the calling goroutine", "err", err)
	}
	return nil
}

// ortSignature asks ONNX Runtime for the model's inputs and outputs (it
// builds a throwaway session).
func ortSignature(modelPath string) (ins, outs []tensorSig, err error) {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, nil, err
	}
	defer opts.Destroy()
	if err := opts.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
		return nil, nil, err
	}
	oins, oouts, err := ort.GetInputOutputInfoWithOptions(modelPath, opts)
	if err != nil {
		return nil, nil, err
	}
	conv := func(infos []ort.InputOutputInfo) []tensorSig {
		var out []tensorSig
		for _, i := range infos {
			out = append(out, tensorSig{
				name:   i.Name,
				tensor: i.OrtValueType == ort.ONNXTypeTensor,
				elem:   int64(i.DataType),
				dims:   slices.Clone(i.Dimensions),
			})
		}
		return out
	}
	return conv(oins), conv(oouts), nil
}

// infer pads one batch and runs the model, returning its output ([b,s,h]
// or [b,h]), the attention mask ([b,s]), s and h. Every native value it
// creates is destroyed before it returns, on every path; the returned
// slices are Go memory.
func (e *Embedder) infer(ctx context.Context, rows [][]int) (hidden []float32, mask []int64, s, h int, err error) {
	return e.inferRun(ctx, rows, false)
}

// inferRun is infer; shrink hands the arena's free memory back when the
// run ends.
func (e *Embedder) inferRun(ctx context.Context, rows [][]int, shrink bool) (hidden []float32, mask []int64, s, h int, err error) {
	b := len(rows)
	for _, r := range rows {
		s = max(s, len(r))
	}
	ids := make([]int64, b*s)
	mask = make([]int64, b*s)
	for i, r := range rows {
		for j := range s {
			if j < len(r) {
				ids[i*s+j] = int64(r[j])
				mask[i*s+j] = 1
			} else {
				ids[i*s+j] = int64(e.tok.padID)
			}
		}
	}
	shape := ort.NewShape(int64(b), int64(s))
	var inputs []ort.Value
	defer func() {
		for _, v := range inputs {
			e.destroy(v)
		}
	}()
	for _, name := range e.inputs {
		data := make([]int64, b*s) // token_type_ids: all zero for one sequence
		switch name {
		case "input_ids":
			data = ids
		case "attention_mask":
			data = mask
		}
		t, err := ort.NewTensor(shape, data)
		if err != nil {
			return nil, nil, 0, 0, fmt.Errorf("embed: input tensor: %w", err)
		}
		e.created()
		inputs = append(inputs, t)
	}

	outputs := []ort.Value{nil} // nil: ONNX Runtime allocates (size unknown)
	if e.dim > 0 {
		outShape := ort.NewShape(int64(b), int64(s), int64(e.dim))
		if e.outRank == 2 {
			outShape = ort.NewShape(int64(b), int64(e.dim))
		}
		t, err := ort.NewEmptyTensor[float32](outShape)
		if err != nil {
			return nil, nil, 0, 0, fmt.Errorf("embed: output tensor: %w", err)
		}
		e.created()
		outputs[0] = t
	}
	defer func() {
		if outputs[0] != nil {
			e.destroy(outputs[0])
		}
	}()

	// ONNX Runtime reads and writes these Go slices while the run is in
	// flight, on another thread when the session has one: pin them.
	var pin runtime.Pinner
	defer pin.Unpin()
	for _, v := range inputs {
		if d := v.(*ort.Tensor[int64]).GetData(); len(d) > 0 {
			pin.Pin(&d[0])
		}
	}
	if t, ok := outputs[0].(*ort.Tensor[float32]); ok && len(t.GetData()) > 0 {
		pin.Pin(&t.GetData()[0])
	}

	e.runMu.Lock()
	err = e.runSession(ctx, inputs, outputs, shrink)
	large := b*s > largeRun
	if large && e.arena {
		e.largeAt = e.cfg.Clock.Now()
		if !e.shrinkArmed {
			e.shrinkArmed = true
			e.idle.Add(1) // Embed holds closeMu shared: Close has not begun waiting
			go e.shrinkWhenIdle()
		}
	}
	e.runMu.Unlock()
	if large && !e.arena {
		mallocarena.Trim()
	}
	if outputs[0] != nil && e.dim == 0 {
		e.created() // allocated by the run
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, 0, 0, fmt.Errorf("embed: %w", ctx.Err())
		}
		return nil, nil, 0, 0, fmt.Errorf("embed: inference: %w", err)
	}
	out, ok := outputs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, nil, 0, 0, fmt.Errorf("embed: model output %s is not a float tensor", e.output)
	}
	got := out.GetShape()
	var want ort.Shape
	if e.outRank == 3 {
		want = ort.NewShape(int64(b), int64(s), got[len(got)-1])
	} else {
		want = ort.NewShape(int64(b), got[len(got)-1])
	}
	if !got.Equals(want) || got[len(got)-1] <= 0 || (e.dim > 0 && got[len(got)-1] != int64(e.dim)) {
		return nil, nil, 0, 0, fmt.Errorf("embed: model output %s has shape %v, want %v", e.output, got, want)
	}
	return out.GetData(), mask, s, int(got[len(got)-1]), nil
}

// runSession runs the session; cancelling ctx terminates the run, and
// shrink shrinks the arena when it ends.
func (e *Embedder) runSession(ctx context.Context, inputs, outputs []ort.Value, shrink bool) error {
	run := e.session.RunWithOptions
	if e.session.thread != nil && outputs[0] != nil {
		run = e.session.thread.Run
	}
	if ctx.Done() == nil && !shrink {
		return run(inputs, outputs, nil)
	}
	opts, err := ort.NewRunOptions()
	if err != nil {
		return err
	}
	e.created()
	defer func() {
		opts.Destroy()
		e.live.Add(-1)
	}()
	if shrink {
		if err := onnxrt.ShrinkArenaAfter(opts); err != nil {
			return err
		}
	}
	var mu sync.Mutex
	finished := false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			opts.Terminate()
		}
	})
	err = run(inputs, outputs, opts)
	stop()
	mu.Lock()
	finished = true
	mu.Unlock()
	return err
}

func (e *Embedder) destroy(v ort.Value) {
	v.Destroy()
	e.live.Add(-1)
}

// shrinkWhenIdle waits until no large run has ended for ArenaIdle, then
// hands the arena's free memory back: a run of two tokens with the shrink
// option (ONNX Runtime shrinks an arena only at the end of a run), and
// malloc_trim for what the arena freed into malloc's heaps. A large run
// during the wait moves the wait on; Close ends it.
func (e *Embedder) shrinkWhenIdle() {
	defer e.idle.Done()
	wait := e.cfg.ArenaIdle
	for {
		t := e.cfg.Clock.NewTimer(wait)
		select {
		case <-e.done:
			t.Stop()
			return
		case <-t.C():
		}
		e.runMu.Lock()
		since := e.cfg.Clock.Now().Sub(e.largeAt)
		if since < e.cfg.ArenaIdle {
			e.runMu.Unlock()
			wait = e.cfg.ArenaIdle - since
			continue
		}
		e.shrinkArmed = false // a large run from here on waits anew
		e.runMu.Unlock()
		break
	}
	e.closeMu.RLock()
	defer e.closeMu.RUnlock()
	if e.closed {
		return
	}
	ids, err := e.tok.Encode("", e.cfg.MaxTokens)
	if err == nil {
		_, _, _, _, err = e.inferRun(context.Background(), [][]int{ids}, true)
	}
	mallocarena.Trim()
	if err != nil {
		// Not retried: the next large run waits anew and tries again.
		e.log.Warn("embedding: shrinking the memory arena failed; it keeps its peak until the next large run", "err", err)
		return
	}
	e.shrinks.Add(1)
}
