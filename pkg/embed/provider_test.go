package embed

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"agent/pkg/onnxrt"
)

// A GPU provider the ONNX Runtime library cannot give (this machine's is a
// CPU build, as a Jetson's is until an onnxruntime-gpu replaces it) must
// not cost the office its memory: the model runs on the CPU, the same
// vectors come out, and Provider says why.
func TestProviderFallsBackToCPU(t *testing.T) {
	cpu := newTestEmbedder(t, Config{})
	want, err := cpu.Embed(context.Background(), []string{"the printer on floor 3"})
	if err != nil {
		t.Fatal(err)
	}
	if name, fb := cpu.Provider(); name != onnxrt.ProviderCPU || fb != nil {
		t.Fatalf("default Provider() = %q, %v; want cpu, nil", name, fb)
	}
	for _, p := range []string{onnxrt.ProviderCUDA, onnxrt.ProviderTensorRT} {
		e := newTestEmbedder(t, Config{Provider: onnxrt.Provider{Name: p, CacheDir: t.TempDir()}})
		name, fb := e.Provider()
		if name != onnxrt.ProviderCPU || !errors.Is(fb, onnxrt.ErrProviderUnavailable) {
			t.Fatalf("%s: Provider() = %q, %v; want cpu and ErrProviderUnavailable", p, name, fb)
		}
		if !strings.Contains(fb.Error(), p) {
			t.Errorf("%s: the reason does not name the provider: %v", p, fb)
		}
		got, err := e.Embed(context.Background(), []string{"the printer on floor 3"})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[0], want[0]) {
			t.Errorf("%s: the CPU fallback embeds differently", p)
		}
	}
}

func TestProviderUnknown(t *testing.T) {
	_, err := New(Config{ModelDir: t.TempDir(), Provider: onnxrt.Provider{Name: "npu"}}, nil)
	if err == nil || !strings.Contains(err.Error(), `unknown execution provider "npu"`) {
		t.Fatalf("New with provider npu: %v", err)
	}
}
