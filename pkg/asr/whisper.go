//go:build whisper

package asr

/*
// The static libraries come from scripts/deps.sh (whisper.cpp 1.9.1, ggml
// without OpenMP); the build supplies their location:
//   CGO_CFLAGS=-I.deps/whisper/linux-$GOARCH/include
//   CGO_LDFLAGS=-L.deps/whisper/linux-$GOARCH/lib
// A ggml built with OpenMP also needs -fopenmp in CGO_LDFLAGS. Static
// archives resolve in order: whisper, then ggml, ggml-cpu, ggml-base.
#cgo LDFLAGS: -lwhisper -lggml -lggml-cpu -lggml-base -lstdc++ -lm -lpthread
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <whisper.h>

extern void asrGoLog(int level, char *text);

static void asr_log(enum ggml_log_level level, const char *text, void *user_data) {
	(void)user_data;
	asrGoLog((int)level, (char *)text);
}

static void asr_route_log(void) { whisper_log_set(asr_log, NULL); }

// The abort flag is C memory that Go sets (atomically) when the caller's
// context ends or the recogniser closes; whisper.cpp polls it before the
// encoder and after each encoder/decoder graph.
static bool asr_should_abort(void *flag) {
	return __atomic_load_n((int32_t *)flag, __ATOMIC_RELAXED) != 0;
}

static bool asr_encoder_begin(struct whisper_context *ctx, struct whisper_state *state, void *flag) {
	(void)ctx; (void)state;
	return !asr_should_abort(flag);
}

static bool asr_refuse_encoder(struct whisper_context *ctx, struct whisper_state *state, void *flag) {
	(void)ctx; (void)state; (void)flag;
	return false;
}

static int asr_full(struct whisper_context *ctx, struct whisper_state *state,
		struct whisper_full_params params, const float *samples, int n, int32_t *flag) {
	params.abort_callback = asr_should_abort;
	params.abort_callback_user_data = flag;
	params.encoder_begin_callback = asr_encoder_begin;
	params.encoder_begin_callback_user_data = flag;
	return whisper_full_with_state(ctx, state, params, samples, n);
}

// asr_set_audio_ctx makes whisper_full record audio_ctx in the state and
// stop before encoding: whisper's language auto-detection runs with the
// audio_ctx of the previous call on that state, so this sets it first.
static int asr_set_audio_ctx(struct whisper_context *ctx, struct whisper_state *state,
		struct whisper_full_params params, const float *samples, int n) {
	params.language = "en";
	params.detect_language = false;
	params.encoder_begin_callback = asr_refuse_encoder;
	params.encoder_begin_callback_user_data = NULL;
	return whisper_full_with_state(ctx, state, params, samples, n);
}
*/
import "C"

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Recognizer transcribes speech with one loaded whisper.cpp model. It is
// safe for concurrent use: transcriptions run one at a time on the model's
// single decoding state (the box has few cores and each call already uses
// Threads of them), later callers wait in turn or until their context ends.
type Recognizer struct {
	logger       *slog.Logger
	threads      int
	maxTokens    int // Config.MaxTokens
	multilingual bool
	autoLang     bool // multilingual model, language detected per call
	modelCtx     int  // the model's full audio context (1500)

	// C resources, freed by Close.
	ctx   *C.struct_whisper_context
	state *C.struct_whisper_state
	lang  *C.char    // params.language: "auto" or an ISO code; nil on English-only models (whisper's default "en")
	abort *C.int32_t // see asr_should_abort
	clean runtime.Cleanup

	sem       chan struct{} // one slot: the state's owner
	done      chan struct{} // closed by Close: waiters stop waiting
	closed    atomic.Bool
	closeOnce sync.Once
	lastCtx   int // audio_ctx recorded in state by the last call; -1 unknown (guarded by sem)
}

// New loads the model. A missing file gives ErrModelMissing, a file that is
// not a whisper.cpp ggml model ErrModelInvalid (checked before whisper.cpp
// sees it), a language the model cannot do ErrUnsupportedLanguage. A nil
// logger discards. whisper.cpp's own log goes to the logger at debug level.
func New(cfg Config, logger *slog.Logger) (*Recognizer, error) {
	discard := logger == nil
	if discard {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	info, err := CheckModel(cfg.ModelPath)
	if err != nil {
		return nil, err
	}
	lang := normalizeLanguage(cfg.Language)
	if !info.Multilingual && lang != "auto" && lang != "en" {
		return nil, fmt.Errorf("asr: model %s is English-only; language %q needs a multilingual model (or set the language to \"en\" or \"auto\"): %w",
			cfg.ModelPath, lang, ErrUnsupportedLanguage)
	}
	if info.Multilingual && lang != "auto" {
		cl := C.CString(lang)
		id := C.whisper_lang_id(cl)
		C.free(unsafe.Pointer(cl))
		if id < 0 {
			return nil, fmt.Errorf("asr: language %q: %w", lang, ErrUnsupportedLanguage)
		}
	}
	routeWhisperLog(logger, !discard)

	cparams := C.whisper_context_default_params()
	// Flash attention pads the audio context to a multiple of 256 with
	// unmasked keys that keep whatever an earlier call left there; with the
	// per-call audio_ctx below that mixes calls. The plain path uses exactly
	// audio_ctx keys.
	cparams.flash_attn = false
	cpath := C.CString(cfg.ModelPath)
	defer C.free(unsafe.Pointer(cpath))
	wctx := C.whisper_init_from_file_with_params_no_state(cpath, cparams)
	if wctx == nil {
		return nil, fmt.Errorf("asr: model %s: whisper.cpp could not load it (debug log has its reason): %w", cfg.ModelPath, ErrModelInvalid)
	}
	state := C.whisper_init_state(wctx)
	if state == nil {
		C.whisper_free(wctx)
		return nil, fmt.Errorf("asr: model %s: whisper.cpp could not allocate its decoding state (out of memory?)", cfg.ModelPath)
	}
	threads := cfg.Threads
	if threads == 0 {
		threads = defaultThreads()
	}
	r := &Recognizer{
		logger:       logger,
		threads:      threads,
		maxTokens:    cfg.MaxTokens,
		multilingual: C.whisper_is_multilingual(wctx) != 0,
		modelCtx:     int(C.whisper_model_n_audio_ctx(wctx)),
		ctx:          wctx,
		state:        state,
		abort:        (*C.int32_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int32_t(0))))),
		sem:          make(chan struct{}, 1),
		done:         make(chan struct{}),
		lastCtx:      -1,
	}
	if r.multilingual {
		r.lang = C.CString(lang)
		r.autoLang = lang == "auto"
	}
	// Free the native memory should a caller drop the recogniser unclosed.
	r.clean = runtime.AddCleanup(r, freeNative, nativeRes{wctx, state, r.lang, r.abort})
	logger.Debug("whisper model loaded", "path", cfg.ModelPath, "type", info.Type,
		"multilingual", r.multilingual, "language", lang, "threads", threads)
	return r, nil
}

type nativeRes struct {
	ctx   *C.struct_whisper_context
	state *C.struct_whisper_state
	lang  *C.char
	abort *C.int32_t
}

func freeNative(n nativeRes) {
	C.whisper_free_state(n.state)
	C.whisper_free(n.ctx)
	C.free(unsafe.Pointer(n.lang)) // free(NULL) is fine
	C.free(unsafe.Pointer(n.abort))
}

// Multilingual reports whether the model knows languages other than English
// (and so whether Config.Language other than "auto"/"en" can work).
func (r *Recognizer) Multilingual() bool { return r.multilingual }

// Transcribe converts speech to text. samples are 16 kHz mono float32 in
// [-1, 1]; empty input, more than MaxAudio, or NaN/Inf give ErrBadAudio.
// When ctx ends the call returns with ctx's error as soon as whisper.cpp
// reaches its next check: before and after each encoder pass and after each
// decoder step (a full-window encoder pass, the longest stretch without a
// check, takes about half a second for tiny on two x86 cores).
func (r *Recognizer) Transcribe(ctx context.Context, samples []float32) (Result, error) {
	start := time.Now()
	if err := checkAudio(samples); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("asr: transcribe: %w", err)
	}
	select {
	case r.sem <- struct{}{}:
	case <-r.done:
		return Result{}, fmt.Errorf("asr: transcribe: %w", ErrClosed)
	case <-ctx.Done():
		return Result{}, fmt.Errorf("asr: transcribe: waiting for the recognizer: %w", ctx.Err())
	}
	defer func() { <-r.sem }()
	flag := (*int32)(unsafe.Pointer(r.abort))
	atomic.StoreInt32(flag, 0)
	if r.closed.Load() { // after the reset: Close sets closed, then the flag
		return Result{}, fmt.Errorf("asr: transcribe: %w", ErrClosed)
	}

	dur := sampleDuration(len(samples))
	input := padShort(samples)
	params := C.whisper_full_default_params(C.WHISPER_SAMPLING_GREEDY)
	params.n_threads = C.int(r.threads)
	params.no_context = true     // utterances are independent
	params.no_timestamps = true  // one segment per window, no timestamp tokens to decode
	params.single_segment = true //
	params.suppress_nst = true   // no "[Music]"/"(laughs)" annotations
	params.print_progress = false
	params.print_realtime = false
	params.print_timestamps = false
	params.print_special = false
	params.audio_ctx = C.int(audioCtx(len(input), r.modelCtx))
	budget := tokenBudget(len(input))
	if r.maxTokens > 0 {
		budget = min(budget, r.maxTokens)
	}
	params.max_tokens = C.int(budget)
	// One fallback pass at temperature 1 when greedy decoding fails, not
	// five (0.2 ... 1.0), as whisper.cpp's voice-command example does: it
	// bounds the latency of a hard utterance to about twice an easy one.
	params.temperature_inc = 1.0
	if r.lang != nil {
		params.language = r.lang
	}

	cSamples := (*C.float)(unsafe.Pointer(&input[0]))
	if r.autoLang && int(params.audio_ctx) != r.lastCtx {
		r.lastCtx = -1
		if C.asr_set_audio_ctx(r.ctx, r.state, params, cSamples, C.int(len(input))) == 0 {
			r.lastCtx = int(params.audio_ctx)
		}
	}

	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		atomic.StoreInt32(flag, 1)
		close(fired)
	})
	rc := C.asr_full(r.ctx, r.state, params, cSamples, C.int(len(input)), r.abort)
	if !stop() {
		<-fired // the store has happened; the flag is reset on the next call
	}
	r.lastCtx = -1
	if rc == 0 {
		r.lastCtx = int(params.audio_ctx)
	}
	switch {
	case ctx.Err() != nil:
		return Result{}, fmt.Errorf("asr: transcribe: %w", ctx.Err())
	case r.closed.Load():
		return Result{}, fmt.Errorf("asr: transcribe: %w", ErrClosed)
	case rc != 0:
		return Result{}, fmt.Errorf("asr: transcribe: whisper_full failed with code %d (debug log has its reason)", int(rc))
	}

	res := Result{Language: "en", AudioDuration: dur}
	if r.multilingual {
		if id := C.whisper_full_lang_id_from_state(r.state); id >= 0 {
			res.Language = C.GoString(C.whisper_lang_str(id))
		}
	}
	var text strings.Builder
	n := int(C.whisper_full_n_segments_from_state(r.state))
	for i := range n {
		// With no timestamps each segment is one 30 s window; whisper.cpp
		// reports its end (the window's or the audio's) but not a usable
		// start (t0 comes from timestamp tokens that were not decoded).
		end := min(centis(C.whisper_full_get_segment_t1_from_state(r.state, C.int(i))), dur)
		seg := Segment{
			Start: windowStart(end),
			End:   end,
			Text:  cleanText(C.GoString(C.whisper_full_get_segment_text_from_state(r.state, C.int(i)))),
		}
		if seg.Text == "" {
			continue
		}
		if text.Len() > 0 {
			text.WriteByte(' ')
		}
		text.WriteString(seg.Text)
		res.Segments = append(res.Segments, seg)
	}
	res.Text = text.String()
	res.Elapsed = time.Since(start)
	r.logger.Debug("transcribed", "audio", dur, "elapsed", res.Elapsed, "audio_ctx", int(params.audio_ctx),
		"language", res.Language, "segments", len(res.Segments))
	return res, nil
}

// ggmlTypeBlock is ggml's own block size, in elements and bytes, of a
// tensor type (the tests hold ggmlBlock's table against it).
func ggmlTypeBlock(ttype int32) (elems, bytes int64) {
	t := C.enum_ggml_type(ttype)
	return int64(C.ggml_blck_size(t)), int64(C.ggml_type_size(t))
}

// centis converts whisper's 10 ms timestamps.
func centis(t C.int64_t) time.Duration { return time.Duration(t) * 10 * time.Millisecond }

// Close aborts a running transcription, waits for it and frees the model.
// Later calls to Transcribe return ErrClosed. Close is idempotent.
func (r *Recognizer) Close() error {
	r.closeOnce.Do(func() {
		r.closed.Store(true)
		close(r.done)
		atomic.StoreInt32((*int32)(unsafe.Pointer(r.abort)), 1)
		r.sem <- struct{}{} // wait for the running call; never released
		r.clean.Stop()
		freeNative(nativeRes{r.ctx, r.state, r.lang, r.abort})
		r.ctx, r.state, r.lang, r.abort = nil, nil, nil, nil
	})
	return nil
}

// whisperLog forwards whisper.cpp's and ggml's log lines to slog at debug
// level (their ERROR lines too: a cancelled call logs one, and New's and
// Transcribe's errors already say what failed). whisper_log_set is
// process-wide, so this state is too: the logger of the most recent New
// that was given one receives the lines; before that they are dropped.
var whisperLog struct {
	once   sync.Once
	logger atomic.Pointer[slog.Logger]
	mu     sync.Mutex
	line   strings.Builder // a line assembled from GGML_LOG_LEVEL_CONT pieces
	level  int
}

// routeWhisperLog installs the hook once; a caller-supplied logger (use)
// becomes the destination, a nil one (doctor checks) leaves it alone.
func routeWhisperLog(logger *slog.Logger, use bool) {
	if use {
		whisperLog.logger.Store(logger)
	}
	whisperLog.once.Do(func() { C.asr_route_log() })
}

// ggmlLevel names a ggml_log_level.
func ggmlLevel(l int) string {
	switch l {
	case C.GGML_LOG_LEVEL_DEBUG:
		return "debug"
	case C.GGML_LOG_LEVEL_INFO:
		return "info"
	case C.GGML_LOG_LEVEL_WARN:
		return "warn"
	case C.GGML_LOG_LEVEL_ERROR:
		return "error"
	}
	return "none"
}

//export asrGoLog
func asrGoLog(level C.int, text *C.char) {
	s := C.GoString(text)
	l := &whisperLog
	l.mu.Lock()
	defer l.mu.Unlock()
	if level != C.GGML_LOG_LEVEL_CONT {
		l.level = int(level)
	}
	l.line.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		return
	}
	line := strings.TrimSpace(l.line.String())
	l.line.Reset()
	logger := l.logger.Load()
	if line == "" || logger == nil {
		return
	}
	logger.Debug(line, "source", "whisper.cpp", "whisper_level", ggmlLevel(l.level))
}
