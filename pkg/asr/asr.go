// Package asr is local speech recognition with whisper.cpp.
//
// The recogniser needs cgo and the whisper.cpp static libraries and is
// compiled only with the build tag "whisper" (make build sets it, with
// CGO_CFLAGS/CGO_LDFLAGS pointing at .deps/whisper). Without the tag, New
// returns an error wrapping ErrNotBuilt; the rest (configuration, results,
// CheckModel) is pure Go and works in every build.
//
// Transcription is tuned for short voice utterances on a few CPU cores: the
// encoder only computes the part of whisper's 30 s window the audio covers
// (audio_ctx), decoding has no timestamps, one segment per window, a token
// budget proportional to the audio and at most one temperature-fallback
// pass. A Recognizer runs up to Config.Workers calls at once on shared
// weights; partial transcriptions of an utterance still being spoken run
// only on idle workers and yield to full ones.
//
// Model files are whisper.cpp's ggml format (ggml-tiny.bin, ggml-base.en.bin,
// ...). scripts/fetch-models.sh fetches them; tests use random-weight models
// from package asrtest, which must never be shipped.
package asr

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"
)

// SampleRate is the only input rate: 16 kHz mono float32 in [-1, 1].
const SampleRate = 16000

// MaxAudio is the longest utterance Transcribe accepts.
const MaxAudio = 60 * time.Second

// maxSamples is MaxAudio at SampleRate.
const maxSamples = int(MaxAudio / time.Second * SampleRate)

// Config selects the model and how it runs.
type Config struct {
	// ModelPath is the ggml model file (for example models/ggml-base.bin).
	ModelPath string
	// Language is "auto" (detect; multilingual models only) or an ISO 639-1
	// code such as "en" or "zh". Empty means "auto". English-only (.en)
	// models accept only "auto" and "en".
	Language string
	// Threads is the number of CPU threads per transcription; 0 picks
	// min(NumCPU, 4).
	Threads int
	// MaxTokens caps the tokens decoded per 30 s window below the budget
	// derived from the audio's length (0: no extra cap). Tests on
	// random-weight models, whose text is meaningless and never ends on its
	// own, set it low to keep decoding short.
	MaxTokens int
	// Workers is the number of decoding states (the weights are shared);
	// 0 picks one per Threads of CPU (two on a six-core Orin with 3
	// threads, one on two cores), bounded by MemoryBudget. Whatever the
	// count, transcriptions run at once only as far as the CPU has
	// Threads free for each: ggml's spinning threads must not outnumber
	// the cores.
	Workers int
	// MemoryBudget bounds the automatic Workers: the decoding states'
	// memory (whisper.cpp reports each state's size) may not exceed it.
	// 0 means DefaultMemoryBudget.
	MemoryBudget int64
	// GPU runs the model on the first GPU of whisper.cpp's backends. Only
	// a whisper.cpp built with CUDA (scripts/deps.sh whisper-cuda, the
	// "cuda" build tag) has one; without it New logs a warning and the
	// CPU does the work (Recognizer.Device says so).
	GPU bool
}

// ErrNoGPU is Recognizer.Device's reason when Config.GPU asked for a GPU
// and whisper.cpp has none.
var ErrNoGPU = errors.New("this whisper.cpp has no GPU backend: build it with CUDA (scripts/deps.sh whisper-cuda, then make build-cuda) on a machine with the CUDA toolkit")

// DefaultMemoryBudget is Config.MemoryBudget when zero: the decoding
// states' share of the box's 2 GB. whisper.cpp sizes a state's buffers for
// the worst case (a full 30 s window): about 193 MB for tiny, of which
// about 20 MB are resident after a 3 s utterance and about 120 MB after a
// 25 s one. The budget holds two tiny states, one of base or larger.
const DefaultMemoryBudget = 400 << 20

// maxAutoWorkers caps the automatic worker count.
const maxAutoWorkers = 4

// Result is one transcription.
type Result struct {
	Text          string        // the whole transcript, trimmed
	Language      string        // the language used or detected (ISO code)
	Segments      []Segment     // in time order
	AudioDuration time.Duration // length of the input audio
	Elapsed       time.Duration // wall time spent in Transcribe
}

// Segment is a timed piece of the transcript: one per 30 s decoding window
// that holds speech (no timestamps are decoded, for speed).
type Segment struct {
	Start, End time.Duration
	Text       string
}

// Sentinel errors, for errors.Is.
var (
	// ErrModelMissing: the model file does not exist. The wrapping error
	// names the path.
	ErrModelMissing = errors.New("model file not found: fetch it with scripts/fetch-models.sh (make models)")
	// ErrModelInvalid: the file is not a usable whisper.cpp ggml model
	// (wrong magic, truncated, corrupt).
	ErrModelInvalid = errors.New("not a valid whisper.cpp ggml model (re-fetch it with scripts/fetch-models.sh)")
	// ErrNotBuilt: this binary was built without whisper.cpp.
	ErrNotBuilt = errors.New("speech recognition unavailable: this binary was built without whisper.cpp (build with `make build`, which sets -tags whisper)")
	// ErrBadAudio: Transcribe's input is empty, longer than MaxAudio or not
	// finite.
	ErrBadAudio = errors.New("bad audio")
	// ErrUnsupportedLanguage: Config.Language is unknown to whisper, or the
	// model is English-only and another language was asked for.
	ErrUnsupportedLanguage = errors.New("unsupported language")
	// ErrClosed: the recogniser was closed.
	ErrClosed = errors.New("recognizer closed")
	// ErrBusy: TranscribePartial found no idle worker (partials never
	// wait).
	ErrBusy = errors.New("all speech workers are busy")
	// ErrPreempted: a partial transcription gave its worker to a full one.
	ErrPreempted = errors.New("partial transcription preempted")
)

// defaultThreads is Config.Threads when zero.
func defaultThreads() int {
	return min(runtime.NumCPU(), 4)
}

// checkConfig validates what can be checked without the model.
func checkConfig(cfg Config) error {
	if cfg.ModelPath == "" {
		return fmt.Errorf("asr: no model path configured: %w", ErrModelMissing)
	}
	if cfg.Threads < 0 || cfg.Threads > 64 {
		return fmt.Errorf("asr: threads must be between 0 (auto) and 64, not %d", cfg.Threads)
	}
	if cfg.Workers < 0 || cfg.Workers > 16 {
		return fmt.Errorf("asr: workers must be between 0 (auto) and 16, not %d", cfg.Workers)
	}
	if cfg.MemoryBudget < 0 {
		return fmt.Errorf("asr: memory budget must not be negative")
	}
	return nil
}

// checkAudio rejects input Transcribe cannot take.
func checkAudio(samples []float32) error {
	switch {
	case len(samples) == 0:
		return fmt.Errorf("asr: transcribe: no samples: %w", ErrBadAudio)
	case len(samples) > maxSamples:
		return fmt.Errorf("asr: transcribe: %v of audio, the limit is %v: %w",
			sampleDuration(len(samples)), MaxAudio, ErrBadAudio)
	}
	for i, s := range samples {
		if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("asr: transcribe: sample %d is %v: %w", i, s, ErrBadAudio)
		}
	}
	return nil
}

// sampleDuration is the length of n samples at SampleRate.
func sampleDuration(n int) time.Duration {
	return time.Duration(int64(n) * int64(time.Second) / SampleRate)
}

func normalizeLanguage(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return "auto"
	}
	return s
}

// cleanText trims a segment and drops bytes that are not UTF-8 (a window
// boundary can split a multi-byte character between tokens).
func cleanText(s string) string {
	return strings.TrimSpace(strings.ToValidUTF8(s, ""))
}

// minSamples is the shortest input handed to whisper.cpp: it ignores input
// under 100 ms and decodes very short input poorly, so shorter utterances
// are padded with silence to one second.
const minSamples = SampleRate

func padShort(s []float32) []float32 {
	if len(s) >= minSamples {
		return s
	}
	p := make([]float32, minSamples)
	copy(p, s)
	return p
}

// Encoder context shrinking. whisper's encoder always looks at a 30 s
// window: 1500 positions, 50 per second of audio, the rest silence. For a
// short utterance only the positions that cover it (plus a margin, so the
// last word is not clipped) are computed, which cuts the encoder's cost
// roughly in proportion (and the decoder's cross-attention with it).
const (
	ctxPerSecond = 50 // encoder positions per second of audio
	ctxMargin    = 64 // about 1.3 s of trailing context
	ctxRound     = 64 // round up to a multiple of this
)

// audioCtx returns whisper_full_params.audio_ctx for n samples on a model
// whose full context is full: 0 (the full window) for audio that fills most
// of a window, else a smaller context that still covers all of it.
func audioCtx(n, full int) int {
	if n <= 0 || full <= 0 {
		return 0
	}
	need := (n*ctxPerSecond + SampleRate - 1) / SampleRate // ceil
	c := (need + ctxMargin + ctxRound - 1) / ctxRound * ctxRound
	if c >= full {
		return 0
	}
	return c
}

// Decoding budget. With no timestamps and one segment per window, whisper
// decodes until end-of-text or the budget; a confused model (noise, or the
// random test weights) otherwise runs to 220 tokens per window and per
// temperature-fallback pass. Speech rarely exceeds 5 tokens a second in
// English and 8 in Chinese; the budget allows 10 plus a margin, like
// whisper.cpp's voice-command example (which caps at 32).
const (
	tokensPerSecond = 10
	tokensMargin    = 16
	tokensMin       = 32
	tokensMax       = 220 // whisper.cpp's own cap: n_text_ctx/2 - 4
)

// tokenBudget returns whisper_full_params.max_tokens for n samples (the
// budget applies to each 30 s window).
func tokenBudget(n int) int {
	secs := (min(n, 30*SampleRate) + SampleRate - 1) / SampleRate
	return max(tokensMin, min(tokensMax, tokensPerSecond*secs+tokensMargin))
}

// window is whisper's decoding window.
const window = 30 * time.Second

// windowStart is the start of the window a segment ending at end belongs to
// (windows start at multiples of 30 s when no timestamps are decoded).
func windowStart(end time.Duration) time.Duration {
	if end <= 0 {
		return 0
	}
	return (end - 1) / window * window
}
