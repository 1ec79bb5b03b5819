//go:build whisper && !cuda

package asr

import (
	"context"
	"errors"
	"testing"

	"agent/pkg/asr/asrtest"
)

// asr.gpu on a whisper.cpp without a GPU backend (this build; a Jetson's
// until make build-cuda) warns and transcribes on the CPU.
func TestGPUWithoutBackendRunsOnCPU(t *testing.T) {
	r, err := New(Config{ModelPath: asrtest.TinyModel(t, false), Threads: asrtest.Threads, MaxTokens: 4, GPU: true}, nil)
	if err != nil {
		t.Fatalf("New with GPU on a CPU build: %v", err)
	}
	defer r.Close()
	dev, why := r.Device()
	if dev != "cpu" || !errors.Is(why, ErrNoGPU) {
		t.Fatalf("Device() = %q, %v; want cpu, ErrNoGPU", dev, why)
	}
	if _, err := r.Transcribe(context.Background(), make([]float32, SampleRate)); err != nil {
		t.Fatalf("transcribing on the CPU fallback: %v", err)
	}
	plain := newRecognizer(t, false, "auto")
	if dev, why := plain.Device(); dev != "cpu" || why != nil {
		t.Errorf("without asr.gpu Device() = %q, %v; want cpu, nil", dev, why)
	}
}
