//go:build !whisper

package asr

import (
	"context"
	"fmt"
	"log/slog"
)

// Recognizer is unavailable in this build: it was compiled without the
// "whisper" build tag, so there is no whisper.cpp to run.
type Recognizer struct{}

// New returns an error wrapping ErrNotBuilt: this binary was built without
// whisper.cpp. Build with `make build` (it sets -tags whisper and the cgo
// flags for .deps/whisper).
func New(cfg Config, logger *slog.Logger) (*Recognizer, error) {
	return nil, fmt.Errorf("asr: %w", ErrNotBuilt)
}

// Transcribe returns an error wrapping ErrNotBuilt.
func (r *Recognizer) Transcribe(ctx context.Context, samples []float32) (Result, error) {
	return Result{}, fmt.Errorf("asr: %w", ErrNotBuilt)
}

// TranscribePartial returns an error wrapping ErrNotBuilt.
func (r *Recognizer) TranscribePartial(ctx context.Context, samples []float32) (Result, error) {
	return Result{}, fmt.Errorf("asr: %w", ErrNotBuilt)
}

// Workers reports 0.
func (r *Recognizer) Workers() int { return 0 }

// StateBytes reports 0.
func (r *Recognizer) StateBytes() int64 { return 0 }

// Multilingual reports false.
func (r *Recognizer) Multilingual() bool { return false }

// Close does nothing.
func (r *Recognizer) Close() error { return nil }

// Device reports "none".
func (r *Recognizer) Device() (string, error) { return "none", nil }
