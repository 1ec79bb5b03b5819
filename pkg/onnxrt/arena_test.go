//go:build cgo

package onnxrt_test

import (
	"strings"
	"testing"

	"agent/pkg/onnxrt"
	"agent/pkg/onnxrt/onnxrttest"

	ort "github.com/yalue/onnxruntime_go"
)

// The slot the C API call goes through is AddRunConfigEntry: ONNX
// Runtime's own validation answers (another function in that slot would
// crash or answer otherwise), and run options that are gone are refused
// before any C call.
func TestShrinkArenaAfter(t *testing.T) {
	lib := onnxrttest.Library(t)
	if _, _, err := onnxrt.Load([]string{lib}); err != nil {
		onnxrttest.RequireNative(t, "ONNX Runtime ("+err.Error()+")", "`make deps`")
	}
	if !onnxrt.CanShrinkArena() {
		t.Fatal("C API table not found for the library Load loaded")
	}
	opts, err := ort.NewRunOptions()
	if err != nil {
		t.Fatal(err)
	}
	if err := onnxrt.ShrinkArenaAfter(opts); err != nil {
		t.Fatalf("ShrinkArenaAfter: %v", err)
	}
	err = onnxrt.AddRunConfig(opts, "", "x")
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "key") {
		t.Fatalf("empty key: %v, want ONNX Runtime's complaint about the key", err)
	}
	t.Logf("empty key: %v", err)
	if err := onnxrt.ShrinkArenaAfter(nil); err == nil {
		t.Fatal("nil run options accepted")
	}
	opts.Destroy()
	if err := onnxrt.ShrinkArenaAfter(opts); err == nil || !strings.Contains(err.Error(), "destroyed") {
		t.Fatalf("destroyed run options: %v", err)
	}
}
