//go:build !cgo

package embed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Without cgo there is no ONNX Runtime: New and LoadRuntime fail with
// ErrRuntimeMissing; the tokenizer works as usual.

var errNoCgo = errors.New("this binary was built without cgo (CGO_ENABLED=0), which ONNX Runtime needs")

type session struct{}

func (*session) Destroy() error { return nil }

// LoadRuntime always fails in a build without cgo.
func LoadRuntime(paths []string) (version string, path string, err error) {
	if len(paths) == 0 {
		paths = Candidates("", "")
	}
	var tried []string
	for _, p := range paths {
		if strings.ContainsRune(p, os.PathSeparator) {
			if _, err := os.Stat(p); err != nil {
				tried = append(tried, p+": not found")
				continue
			}
		}
		tried = append(tried, p+": "+errNoCgo.Error())
	}
	return "", "", fmt.Errorf("embed: %w (tried %s)", ErrRuntimeMissing, strings.Join(tried, "; "))
}

func (e *Embedder) openSession(string) error {
	return fmt.Errorf("embed: %w: %w", ErrRuntimeMissing, errNoCgo)
}

func ortSignature(string) (ins, outs []tensorSig, err error) { return nil, nil, errNoCgo }

func (e *Embedder) infer(context.Context, [][]int) (hidden []float32, mask []int64, s, h int, err error) {
	return nil, nil, 0, 0, fmt.Errorf("embed: %w: %w", ErrRuntimeMissing, errNoCgo)
}
