//go:build !cgo

package onnxrt

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Without cgo there is no ONNX Runtime: Load fails with ErrRuntimeMissing.

var errNoCgo = errors.New("this binary was built without cgo (CGO_ENABLED=0), which ONNX Runtime needs")

// Load always fails in a build without cgo.
func Load(paths []string) (version string, path string, err error) {
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
	return "", "", fmt.Errorf("onnxrt: %w (tried %s)", ErrRuntimeMissing, strings.Join(tried, "; "))
}

// AppendProvider fails for every GPU provider in a build without cgo.
func AppendProvider(_ any, p Provider) error {
	if err := CheckProvider(p.Name); err != nil || p.IsCPU() {
		return err
	}
	return fmt.Errorf("onnxrt: %s: %w: %w", p.Name, ErrProviderUnavailable, errNoCgo)
}
