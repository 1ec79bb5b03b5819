//go:build !cgo

package vad

import (
	"errors"
	"fmt"
	"os"

	"agent/pkg/onnxrt"
)

// Without cgo there is no ONNX Runtime: Load fails with
// onnxrt.ErrRuntimeMissing (after reporting a missing model file, which is
// the first thing to fix either way).

var errNoCgo = errors.New("this binary was built without cgo (CGO_ENABLED=0), which ONNX Runtime needs")

type session struct{}

func (*session) Destroy() error { return nil }

// Load always fails in a build without cgo.
func Load(modelPath string, ortLibPaths []string, threads int) (*Model, error) {
	if modelPath == "" {
		return nil, fmt.Errorf("vad: no model path configured: %w", ErrModelMissing)
	}
	if _, err := os.Stat(modelPath); err != nil {
		return nil, fmt.Errorf("vad: %s not found: %w", modelPath, ErrModelMissing)
	}
	return nil, fmt.Errorf("vad: %w: %w", onnxrt.ErrRuntimeMissing, errNoCgo)
}

func (m *Model) run(input, state, stateN, out []float32) error {
	return fmt.Errorf("vad: %w: %w", onnxrt.ErrRuntimeMissing, errNoCgo)
}
