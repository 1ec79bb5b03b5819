package localmodels

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"agent/pkg/config"
	"agent/pkg/vad"
	"agent/pkg/vad/vadtest"
)

// TestVADModes: the Silero model loads beside the others; "auto" without
// the file is the energy detector (no component, no degraded health),
// "silero" without it is a reported failure, "energy" never loads it.
func TestVADModes(t *testing.T) {
	lib, model := vadtest.ORTLibrary(t), vadtest.ModelPath(t)
	base := func(mode, path string) *config.Config {
		cfg := config.Default()
		cfg.Embedding.ModelDir = filepath.Join(t.TempDir(), "none")
		cfg.Embedding.OnnxruntimeLib = lib
		cfg.ASR.Model = filepath.Join(t.TempDir(), "none.bin")
		cfg.Voice.VAD, cfg.Voice.VADModel = mode, path
		return cfg
	}
	logger := slog.New(slog.DiscardHandler)
	missing := filepath.Join(t.TempDir(), "silero_vad_v5.onnx")
	for _, tc := range []struct {
		mode, path string
		loaded     bool
		result     bool  // a "vad" entry in the results
		err        error // wanted in it
	}{
		{config.VADAuto, model, true, true, nil},
		{config.VADSilero, model, true, true, nil},
		{config.VADAuto, missing, false, false, nil},
		{config.VADSilero, missing, false, true, vad.ErrModelMissing},
		{config.VADEnergy, model, false, false, nil},
	} {
		var s Set
		res := s.Load(context.Background(), base(tc.mode, tc.path), logger)
		err, ok := res[VAD]
		if ok != tc.result || (tc.err == nil && err != nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("%s %s: results %v; want entry=%v err=%v", tc.mode, filepath.Base(tc.path), res, tc.result, tc.err)
		}
		if (s.VAD() != nil) != tc.loaded {
			t.Errorf("%s %s: VAD() = %v", tc.mode, filepath.Base(tc.path), s.VAD())
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if s.VAD() != nil {
			t.Error("VAD() after Close")
		}
	}
}
