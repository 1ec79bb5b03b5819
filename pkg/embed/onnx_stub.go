//go:build !cgo

package embed

import (
	"context"
	"errors"
	"fmt"

	"agent/pkg/onnxrt"
)

// Without cgo there is no ONNX Runtime: New fails with
// onnxrt.ErrRuntimeMissing; the tokenizer works as usual.

var errNoCgo = errors.New("this binary was built without cgo (CGO_ENABLED=0), which ONNX Runtime needs")

type session struct{}

func (*session) Destroy() error { return nil }

func (e *Embedder) openSession(string, onnxrt.Provider) error {
	return fmt.Errorf("embed: %w: %w", onnxrt.ErrRuntimeMissing, errNoCgo)
}

func ortSignature(string) (ins, outs []tensorSig, err error) { return nil, nil, errNoCgo }

func (e *Embedder) infer(context.Context, [][]int) (hidden []float32, mask []int64, s, h int, err error) {
	return nil, nil, 0, 0, fmt.Errorf("embed: %w: %w", onnxrt.ErrRuntimeMissing, errNoCgo)
}
