//go:build cgo

package onnxrt_test

import (
	"errors"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"agent/pkg/onnxrt"
	"agent/pkg/onnxrt/onnxrttest"
)

func TestAppendProvider(t *testing.T) {
	if err := onnxrt.CheckProvider("npu"); err == nil {
		t.Error("CheckProvider(npu) accepted")
	}
	for _, p := range []string{"", "cpu", "cuda", "tensorrt"} {
		if err := onnxrt.CheckProvider(p); err != nil {
			t.Errorf("CheckProvider(%q): %v", p, err)
		}
	}
	lib := onnxrttest.Library(t)
	if _, _, err := onnxrt.Load([]string{lib}); err != nil {
		onnxrttest.RequireNative(t, "ONNX Runtime ("+err.Error()+")", "`make deps`")
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer opts.Destroy()
	if err := onnxrt.AppendProvider(opts, onnxrt.Provider{Name: "cpu"}); err != nil {
		t.Errorf("cpu: %v", err)
	}
	// The library here is ONNX Runtime's CPU build: no provider libraries.
	for _, p := range []string{"cuda", "tensorrt"} {
		err := onnxrt.AppendProvider(opts, onnxrt.Provider{Name: p, CacheDir: t.TempDir()})
		if !errors.Is(err, onnxrt.ErrProviderUnavailable) || !strings.Contains(err.Error(), lib) {
			t.Errorf("%s on the CPU build: %v; want ErrProviderUnavailable naming %s", p, err, lib)
		}
	}
}
