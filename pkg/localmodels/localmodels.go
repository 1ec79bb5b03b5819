// Package localmodels loads the on-device inference models (the sentence
// embedder, the speech recogniser and the Silero voice-activity detector)
// for the daemon, each independently:
// a missing or broken model disables its feature and says why, it never
// stops the daemon.
package localmodels

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"agent/pkg/asr"
	"agent/pkg/config"
	"agent/pkg/embed"
	"agent/pkg/onnxrt"
	"agent/pkg/vad"
)

// Component names, as health checks and metrics show them.
const (
	Embedding = "embedding"
	ASR       = "asr"
	VAD       = "vad"
)

// Set holds the loaded models. Safe for concurrent use.
type Set struct {
	mu       sync.RWMutex
	embedder *embed.Embedder
	asr      *asr.Recognizer
	vad      *vad.Model
}

// Load loads every configured model, concurrently, and reports each one's
// error (nil when ready). It implements daemon.Models.
func (s *Set) Load(ctx context.Context, cfg *config.Config, logger *slog.Logger) map[string]error {
	type result struct {
		name string
		err  error
	}
	var wg sync.WaitGroup
	out := make(chan result, 3)
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		e, err := embed.New(EmbedConfig(cfg), logger.With("model", Embedding))
		if err == nil {
			s.mu.Lock()
			s.embedder = e
			s.mu.Unlock()
			logger.Info("embedding model ready", "dir", cfg.Embedding.ModelDir, "dim", e.Dim(), "took", time.Since(start).Round(time.Millisecond))
		}
		out <- result{Embedding, err}
	}()
	if cfg.Voice.Enabled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			r, err := asr.New(ASRConfig(cfg), logger.With("model", ASR))
			if err == nil {
				s.mu.Lock()
				s.asr = r
				s.mu.Unlock()
				logger.Info("speech model ready", "model", cfg.ASR.Model, "multilingual", r.Multilingual(),
					"workers", r.Workers(), "worker_mb", r.StateBytes()>>20, "took", time.Since(start).Round(time.Millisecond))
			}
			out <- result{ASR, err}
		}()
	}
	if cfg.Voice.Enabled && cfg.Voice.VAD != config.VADEnergy {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := vad.Load(cfg.Voice.VADModel, onnxrt.Candidates(cfg.Embedding.OnnxruntimeLib, onnxrt.ExeDir()), 1)
			switch {
			case err == nil:
				s.mu.Lock()
				s.vad = m
				s.mu.Unlock()
				logger.Info("voice activity model ready (silero)", "model", cfg.Voice.VADModel)
			case cfg.Voice.VAD == config.VADAuto && errors.Is(err, vad.ErrModelMissing):
				// auto without the file: the energy detector, as configured.
				logger.Info("no silero VAD model; utterances end by the energy detector", "model", cfg.Voice.VADModel,
					"fix", "scripts/fetch-models.sh vad")
				return
			}
			out <- result{VAD, err}
		}()
	}
	wg.Wait()
	close(out)
	res := map[string]error{}
	for r := range out {
		res[r.name] = r.err
	}
	return res
}

// EmbedConfig maps the [embedding] section.
func EmbedConfig(cfg *config.Config) embed.Config {
	return embed.Config{
		ModelDir:    cfg.Embedding.ModelDir,
		LibraryPath: cfg.Embedding.OnnxruntimeLib,
		Pooling:     cfg.Embedding.Pooling,
		Threads:     cfg.Embedding.Threads,
		Provider: onnxrt.Provider{Name: cfg.Embedding.Provider,
			CacheDir: filepath.Join(cfg.Agent.StateDir, "tensorrt")},
	}
}

// ASRConfig maps the [asr] section.
func ASRConfig(cfg *config.Config) asr.Config {
	return asr.Config{ModelPath: cfg.ASR.Model, Language: cfg.ASR.Language, Threads: cfg.ASR.Threads,
		Workers: cfg.ASR.Workers, MemoryBudget: int64(cfg.ASR.MemoryMB) << 20, GPU: cfg.ASR.GPU}
}

// Embedder returns the embedder, or nil while unavailable.
func (s *Set) Embedder() *embed.Embedder {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.embedder
}

// Recognizer returns the speech recogniser, or nil while unavailable.
func (s *Set) Recognizer() *asr.Recognizer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.asr
}

// VAD returns the Silero voice-activity model, or nil (the energy detector
// is used).
func (s *Set) VAD() *vad.Model {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.vad
}

// Close releases every model.
func (s *Set) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.embedder != nil {
		errs = append(errs, s.embedder.Close())
		s.embedder = nil
	}
	if s.asr != nil {
		errs = append(errs, s.asr.Close())
		s.asr = nil
	}
	if s.vad != nil {
		errs = append(errs, s.vad.Close())
		s.vad = nil
	}
	return errors.Join(errs...)
}

// EmbeddingID names the embedding model on disk for pkg/memory: it changes
// when model.onnx or tokenizer.json is replaced or the pooling changes, so
// stored vectors of another model are recomputed rather than compared.
func EmbeddingID(cfg *config.Config) string {
	id := "pooling=" + cfg.Embedding.Pooling
	for _, f := range []string{embed.ModelFile, embed.TokenizerFile} {
		fi, err := os.Stat(filepath.Join(cfg.Embedding.ModelDir, f))
		if err != nil {
			id += ";" + f + "=?"
			continue
		}
		id += fmt.Sprintf(";%s=%d@%d", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return id
}
