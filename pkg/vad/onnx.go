//go:build cgo

package vad

// Everything that touches ONNX Runtime (through github.com/yalue/onnxruntime_go,
// which needs cgo) lives in this file; onnx_stub.go stands in for it when
// cgo is off.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"agent/pkg/onnxrt"

	ort "github.com/yalue/onnxruntime_go"
)

// DynamicAdvancedSession takes its tensors per Run, so concurrent Runs of
// one session (which ONNX Runtime allows) never share a buffer.
type session = ort.DynamicAdvancedSession

// Load loads the Silero VAD v5 model at modelPath, initialising ONNX
// Runtime from the first loadable of ortLibPaths (nil: onnxrt.Candidates'
// defaults; a runtime already loaded, by agent/pkg/embed for instance, is
// reused, see onnxrt.Load). threads is ONNX Runtime's intra-op thread
// count per run (<= 0: 1, which suits a model this small). Errors wrap
// ErrModelMissing, ErrInvalidModel or onnxrt.ErrRuntimeMissing.
func Load(modelPath string, ortLibPaths []string, threads int) (*Model, error) {
	if threads <= 0 {
		threads = 1
	}
	if err := checkFile(modelPath); err != nil {
		return nil, err
	}
	if _, _, err := onnxrt.Load(ortLibPaths); err != nil {
		return nil, fmt.Errorf("vad: %w", err)
	}
	if err := checkSignature(modelPath); err != nil {
		return nil, err
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("vad: session options: %w", err)
	}
	defer opts.Destroy()
	if err := onnxrt.ConfigureSession(opts, threads); err != nil {
		return nil, fmt.Errorf("vad: session options: %w", err)
	}
	s, err := ort.NewDynamicAdvancedSession(modelPath,
		[]string{"input", "state", "sr"}, []string{"output", "stateN"}, opts)
	if err != nil {
		return nil, fmt.Errorf("vad: load %s: %w: %w", modelPath, ErrInvalidModel, err)
	}
	m := &Model{session: s}
	// One window of silence proves the model runs and its outputs have the
	// shapes run expects.
	if _, err := m.NewStream().Prob(make([]float32, WindowSamples)); err != nil {
		m.Close()
		return nil, fmt.Errorf("vad: probe %s: %w: %w", modelPath, ErrInvalidModel, err)
	}
	return m, nil
}

// checkFile reports a missing model file as ErrModelMissing.
func checkFile(modelPath string) error {
	if modelPath == "" {
		return fmt.Errorf("vad: no model path configured: %w", ErrModelMissing)
	}
	if _, err := os.Stat(modelPath); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("vad: %s not found: %w", modelPath, ErrModelMissing)
		}
		return fmt.Errorf("vad: %w", err)
	}
	return nil
}

// checkSignature verifies the model's inputs and outputs: input float32
// [batch, samples], state float32 [2, batch, 128], sr int64 scalar; output
// float32 [batch, 1], stateN float32 (rank 3).
func checkSignature(modelPath string) error {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return fmt.Errorf("vad: session options: %w", err)
	}
	defer opts.Destroy()
	if err := opts.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
		return fmt.Errorf("vad: session options: %w", err)
	}
	ins, outs, err := ort.GetInputOutputInfoWithOptions(modelPath, opts)
	if err != nil {
		return fmt.Errorf("vad: read %s: %w: %w", modelPath, ErrInvalidModel, err)
	}
	type want struct {
		elem ort.TensorElementDataType
		rank int
	}
	check := func(kind string, infos []ort.InputOutputInfo, wants map[string]want) error {
		found := map[string]bool{}
		for _, i := range infos {
			w, ok := wants[i.Name]
			if !ok {
				if kind == "input" {
					return fmt.Errorf("unexpected input %q", i.Name)
				}
				continue // an extra output is never fetched
			}
			if i.OrtValueType != ort.ONNXTypeTensor || i.DataType != w.elem || len(i.Dimensions) != w.rank {
				return fmt.Errorf("%s %s, want a rank-%d tensor of %v", kind, i, w.rank, w.elem)
			}
			found[i.Name] = true
		}
		for name := range wants {
			if !found[name] {
				return fmt.Errorf("no %s %q", kind, name)
			}
		}
		return nil
	}
	const f32, i64 ort.TensorElementDataType = ort.TensorElementDataTypeFloat, ort.TensorElementDataTypeInt64
	err = check("input", ins, map[string]want{"input": {f32, 2}, "state": {f32, 3}, "sr": {i64, 0}})
	if err == nil {
		err = check("output", outs, map[string]want{"output": {f32, 2}, "stateN": {f32, 3}})
	}
	if err != nil {
		return fmt.Errorf("vad: %s: %w: %w", modelPath, ErrInvalidModel, err)
	}
	return nil
}

// run feeds input ([1, len(input)]), state ([2, 1, 128]) and the sample
// rate, and writes the speech probability into out[0] and the next state
// into stateN. The tensors wrap the Go slices (no copies) and live for this
// call only, so the Stream owns no native memory.
func (m *Model) run(input, state, stateN, out []float32) (err error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	var values []ort.Value
	defer func() {
		for _, v := range values {
			v.Destroy()
		}
	}()
	tensor := func(data []float32, shape ...int64) ort.Value {
		if err != nil {
			return nil
		}
		var t *ort.Tensor[float32]
		t, err = ort.NewTensor(ort.NewShape(shape...), data)
		if err != nil {
			return nil
		}
		values = append(values, t)
		return t
	}
	in := tensor(input, 1, int64(len(input)))
	st := tensor(state, 2, 1, 128)
	o := tensor(out, 1, 1)
	stN := tensor(stateN, 2, 1, 128)
	if err != nil {
		return fmt.Errorf("vad: tensor: %w", err)
	}
	sr, err := ort.NewScalar(int64(SampleRate))
	if err != nil {
		return fmt.Errorf("vad: tensor: %w", err)
	}
	values = append(values, sr)
	if err := m.session.Run([]ort.Value{in, st, sr}, []ort.Value{o, stN}); err != nil {
		return fmt.Errorf("vad: inference: %w", err)
	}
	return nil
}
