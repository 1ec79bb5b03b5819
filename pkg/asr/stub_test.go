//go:build !whisper

package asr

import (
	"context"
	"errors"
	"strings"
	"testing"

	"agent/pkg/asr/asrtest"
)

func TestStubNew(t *testing.T) {
	r, err := New(Config{ModelPath: "models/ggml-base.bin", Language: "auto"}, nil)
	if r != nil || !errors.Is(err, ErrNotBuilt) {
		t.Fatalf("New() = %v, %v; want nil, ErrNotBuilt", r, err)
	}
	if !strings.Contains(err.Error(), "make build") {
		t.Errorf("error %q does not say how to get whisper.cpp", err)
	}
	var nilRec *Recognizer
	if _, err := nilRec.Transcribe(context.Background(), []float32{0}); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("Transcribe() error = %v, want ErrNotBuilt", err)
	}
	if nilRec.Multilingual() || nilRec.Close() != nil {
		t.Error("stub Multilingual/Close")
	}
}

// TestNativeRecognizer stands for the whisper-tagged tests in a build
// without the tag: skipped normally, a failure where native code is required.
func TestNativeRecognizer(t *testing.T) {
	asrtest.Unavailable(t, "whisper.cpp recognizer", errors.New("built without -tags whisper and the cgo flags that `make test` sets"))
}
