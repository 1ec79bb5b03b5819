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
#include <ggml-backend.h>

// asr_gpu_name is the description of the GPU whisper.cpp would use (the
// first GPU or integrated GPU of ggml's backends), or NULL without one.
static const char *asr_gpu_name(void) {
	for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
		ggml_backend_dev_t dev = ggml_backend_dev_get(i);
		enum ggml_backend_dev_type t = ggml_backend_dev_type(dev);
		if (t == GGML_BACKEND_DEVICE_TYPE_GPU || t == GGML_BACKEND_DEVICE_TYPE_IGPU) {
			return ggml_backend_dev_description(dev);
		}
	}
	return NULL;
}

extern void asrGoLog(int level, char *text);

static void asr_log(enum ggml_log_level level, const char *text, void *user_data) {
	(void)user_data;
	asrGoLog((int)level, (char *)text);
}

static void asr_route_log(void) { whisper_log_set(asr_log, NULL); }

static bool asr_refuse_encoder(struct whisper_context *ctx, struct whisper_state *state, void *flag) {
	(void)ctx; (void)state; (void)flag;
	return false;
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"agent/pkg/cthread"

	"golang.org/x/sync/semaphore"
)

// Recognizer transcribes speech with one loaded whisper.cpp model. It is
// safe for concurrent use: the model's weights are shared by a pool of
// decoding states (workers), one transcription per worker at a time; more
// callers than workers wait in turn or until their context ends. Partial
// transcriptions (TranscribePartial) only take an idle worker and are
// preempted by a full one that would otherwise wait.
type Recognizer struct {
	logger       *slog.Logger
	threads      int
	maxTokens    int // Config.MaxTokens
	multilingual bool
	autoLang     bool // multilingual model, language detected per call
	modelCtx     int  // the model's full audio context (1500)
	device       string
	deviceErr    error // why Config.GPU is not honoured; nil when it is
	stateBytes   int64 // one worker's buffers, as whisper.cpp reported them

	// C resources, freed by Close.
	ctx   *C.struct_whisper_context
	lang  *C.char // params.language: "auto" or an ISO code; nil on English-only models (whisper's default "en")
	all   []*worker
	clean runtime.Cleanup

	idle chan *worker // workers not transcribing
	// cpu holds max(NumCPU, threads) tokens; a transcription runs holding
	// threads of them. ggml's threads spin while they wait for each other:
	// more of them than cores, and two transcriptions take forty times as
	// long as one after the other (measured: 86 s against 2.7 s for four
	// 3 s calls, two workers of two threads on two cores).
	cpu       *semaphore.Weighted
	done      chan struct{} // closed by Close: waiters stop waiting
	closed    atomic.Bool
	closeOnce sync.Once

	mu       sync.Mutex
	partials map[*worker]bool // workers running a partial; true once preempted
	waiting  int              // full transcriptions waiting for a worker
}

// worker is one decoding state with its abort flag.
type worker struct {
	state   *C.struct_whisper_state
	abort   *C.int32_t      // see asr_should_abort (thread.go)
	lastCtx int             // audio_ctx recorded in state by the last call; -1 unknown (owned by the holder)
	thread  *cthread.Worker // runs whisper_full (thread.go); nil: the calling goroutine does
	job     unsafe.Pointer  // the thread's C arguments (an asr_job)
}

// New loads the model and creates its workers (Config.Workers, or as many
// as the CPU and Config.MemoryBudget allow). A missing file gives
// ErrModelMissing, a file that is not a whisper.cpp ggml model
// ErrModelInvalid (checked before whisper.cpp sees it), a language the
// model cannot do ErrUnsupportedLanguage. A nil logger discards.
// whisper.cpp's own log goes to the logger at debug level.
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
	device, deviceErr := "cpu", error(nil)
	if cfg.GPU {
		if name := C.asr_gpu_name(); name != nil {
			device = "gpu: " + C.GoString(name)
		} else {
			deviceErr = ErrNoGPU
			logger.Warn("asr.gpu is set but whisper.cpp has no GPU; transcribing on the CPU", "err", deviceErr)
		}
	}
	cparams.use_gpu = C.bool(cfg.GPU && deviceErr == nil)
	cpath := C.CString(cfg.ModelPath)
	defer C.free(unsafe.Pointer(cpath))
	wctx := C.whisper_init_from_file_with_params_no_state(cpath, cparams)
	if wctx == nil {
		return nil, fmt.Errorf("asr: model %s: whisper.cpp could not load it (debug log has its reason): %w", cfg.ModelPath, ErrModelInvalid)
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
		device:       device,
		deviceErr:    deviceErr,
		done:         make(chan struct{}),
		partials:     map[*worker]bool{},
		cpu:          semaphore.NewWeighted(int64(max(runtime.NumCPU(), threads))),
	}
	first, size := newWorker(wctx)
	if first == nil {
		C.whisper_free(wctx)
		return nil, fmt.Errorf("asr: model %s: whisper.cpp could not allocate its decoding state (out of memory?)", cfg.ModelPath)
	}
	r.stateBytes = size
	r.all = append(r.all, first)
	n := workerCount(cfg, threads, size)
	for len(r.all) < n {
		w, _ := newWorker(wctx)
		if w == nil {
			logger.Warn("whisper: fewer speech workers than planned (out of memory?)", "planned", n, "have", len(r.all))
			break
		}
		r.all = append(r.all, w)
	}
	r.idle = make(chan *worker, len(r.all))
	for _, w := range r.all {
		r.idle <- w
	}
	if r.multilingual {
		r.lang = C.CString(lang)
		r.autoLang = lang == "auto"
	}
	// Free the native memory should a caller drop the recogniser unclosed.
	r.clean = runtime.AddCleanup(r, freeNative, nativeRes{wctx, r.lang, r.all})
	logger.Debug("whisper model loaded", "path", cfg.ModelPath, "type", info.Type,
		"multilingual", r.multilingual, "language", lang, "threads", threads, "device", device,
		"workers", len(r.all), "state_mib", size>>20)
	return r, nil
}

// Device is where the model runs ("cpu" or "gpu: NAME"), and why
// Config.GPU is not honoured (nil when it is or was not asked for).
func (r *Recognizer) Device() (string, error) { return r.device, r.deviceErr }

// workerCount is Config.Workers, or the automatic choice: one per Threads
// of CPU (more would only wait for the CPU), at most maxAutoWorkers, and no
// more than the memory budget holds.
func workerCount(cfg Config, threads int, stateBytes int64) int {
	if cfg.Workers > 0 {
		return cfg.Workers
	}
	n := min(maxAutoWorkers, max(1, runtime.NumCPU()/max(1, threads)))
	budget := cfg.MemoryBudget
	if budget <= 0 {
		budget = DefaultMemoryBudget
	}
	if stateBytes > 0 {
		n = min(n, int(budget/stateBytes))
	}
	return max(1, n)
}

// newWorker allocates a decoding state and returns it with its size as
// whisper.cpp logs it (0 when the log could not be read).
func newWorker(wctx *C.struct_whisper_context) (*worker, int64) {
	var state *C.struct_whisper_state
	size := captureStateSize(func() { state = C.whisper_init_state(wctx) })
	if state == nil {
		return nil, 0
	}
	w := &worker{
		state:   state,
		abort:   (*C.int32_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int32_t(0))))),
		lastCtx: -1,
	}
	w.startThread()
	return w, size
}

type nativeRes struct {
	ctx     *C.struct_whisper_context
	lang    *C.char
	workers []*worker
}

func freeNative(n nativeRes) {
	for _, w := range n.workers {
		w.stopThread()
		C.whisper_free_state(w.state)
		C.free(unsafe.Pointer(w.abort))
	}
	C.whisper_free(n.ctx)
	C.free(unsafe.Pointer(n.lang)) // free(NULL) is fine
}

// Multilingual reports whether the model knows languages other than English
// (and so whether Config.Language other than "auto"/"en" can work).
func (r *Recognizer) Multilingual() bool { return r.multilingual }

// Workers is the number of transcriptions that can run at once.
func (r *Recognizer) Workers() int { return len(r.all) }

// StateBytes is the memory of one worker's buffers as whisper.cpp reports
// it (key/value caches and compute buffers; the weights are shared).
func (r *Recognizer) StateBytes() int64 { return r.stateBytes }

// Transcribe converts speech to text. samples are 16 kHz mono float32 in
// [-1, 1]; empty input, more than MaxAudio, or NaN/Inf give ErrBadAudio.
// It waits for a free worker (preempting a partial transcription if one
// holds it). When ctx ends the call returns with ctx's error as soon as
// whisper.cpp reaches its next check: before and after each encoder pass
// and after each decoder step (a full-window encoder pass, the longest
// stretch without a check, takes about half a second for tiny on two x86
// cores).
func (r *Recognizer) Transcribe(ctx context.Context, samples []float32) (Result, error) {
	start := time.Now()
	if err := checkAudio(samples); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("asr: transcribe: %w", err)
	}
	w, err := r.acquire(ctx)
	if err != nil {
		return Result{}, err
	}
	defer r.release(w)
	return r.run(ctx, w, samples, false, start)
}

// TranscribePartial transcribes the audio of an utterance still being
// spoken, for a live preview: it runs only on an idle worker (else it
// returns ErrBusy at once), decodes a smaller token budget, and is aborted
// with ErrPreempted when a full transcription needs its worker.
func (r *Recognizer) TranscribePartial(ctx context.Context, samples []float32) (Result, error) {
	start := time.Now()
	if err := checkAudio(samples); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("asr: partial: %w", err)
	}
	var w *worker
	r.mu.Lock()
	if r.waiting == 0 { // never ahead of a full transcription
		select {
		case w = <-r.idle:
			if r.cpu.TryAcquire(int64(r.threads)) {
				r.partials[w] = false
			} else {
				r.idle <- w
				w = nil
			}
		default:
		}
	}
	r.mu.Unlock()
	if w == nil {
		if r.closed.Load() {
			return Result{}, fmt.Errorf("asr: partial: %w", ErrClosed)
		}
		return Result{}, fmt.Errorf("asr: partial: %w", ErrBusy)
	}
	res, err := r.run(ctx, w, samples, true, start)
	r.mu.Lock()
	preempted := r.partials[w]
	delete(r.partials, w)
	r.mu.Unlock()
	r.release(w)
	if preempted && ctx.Err() == nil && !r.closed.Load() {
		return Result{}, fmt.Errorf("asr: partial: %w", ErrPreempted)
	}
	return res, err
}

// acquire takes an idle worker and CPU for a full transcription, or waits
// for them; when it has to wait, a partial transcription holding them is
// told to stop.
func (r *Recognizer) acquire(ctx context.Context) (*worker, error) {
	var w *worker
	select {
	case w = <-r.idle:
		if r.cpu.TryAcquire(int64(r.threads)) {
			return w, nil
		}
	default:
	}
	r.mu.Lock()
	r.waiting++
	for pw, preempted := range r.partials {
		if !preempted {
			r.partials[pw] = true
			atomic.StoreInt32((*int32)(unsafe.Pointer(pw.abort)), 1)
			break
		}
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.waiting--
		r.mu.Unlock()
	}()
	if w == nil {
		select {
		case w = <-r.idle:
		case <-r.done:
			return nil, fmt.Errorf("asr: transcribe: %w", ErrClosed)
		case <-ctx.Done():
			return nil, fmt.Errorf("asr: transcribe: waiting for the recognizer: %w", ctx.Err())
		}
	}
	if err := r.cpu.Acquire(ctx, int64(r.threads)); err != nil {
		r.idle <- w
		return nil, fmt.Errorf("asr: transcribe: waiting for the CPU: %w", err)
	}
	return w, nil
}

func (r *Recognizer) release(w *worker) {
	r.cpu.Release(int64(r.threads))
	r.idle <- w
}

// run transcribes on worker w, which the caller holds.
func (r *Recognizer) run(ctx context.Context, w *worker, samples []float32, partial bool, start time.Time) (Result, error) {
	flag := (*int32)(unsafe.Pointer(w.abort))
	r.mu.Lock()
	if !r.partials[w] { // a preemption that raced the acquire stands
		atomic.StoreInt32(flag, 0)
	}
	r.mu.Unlock()
	if r.closed.Load() { // after the reset: Close sets closed, then the flags
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
	if partial {
		params.temperature_inc = 0 // a preview: no fallback pass
	}
	if r.lang != nil {
		params.language = r.lang
	}

	cSamples := (*C.float)(unsafe.Pointer(&input[0]))
	if r.autoLang && int(params.audio_ctx) != w.lastCtx {
		w.lastCtx = -1
		if C.asr_set_audio_ctx(r.ctx, w.state, params, cSamples, C.int(len(input))) == 0 {
			w.lastCtx = int(params.audio_ctx)
		}
	}

	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		atomic.StoreInt32(flag, 1)
		close(fired)
	})
	rc := w.full(r.ctx, params, input)
	if !stop() {
		<-fired // the store has happened; the flag is reset on the next call
	}
	w.lastCtx = -1
	if rc == 0 {
		w.lastCtx = int(params.audio_ctx)
	}
	switch {
	case ctx.Err() != nil:
		return Result{}, fmt.Errorf("asr: transcribe: %w", ctx.Err())
	case r.closed.Load():
		return Result{}, fmt.Errorf("asr: transcribe: %w", ErrClosed)
	case partial && atomic.LoadInt32(flag) != 0:
		return Result{}, fmt.Errorf("asr: partial: %w", ErrPreempted)
	case rc != 0:
		return Result{}, fmt.Errorf("asr: transcribe: whisper_full failed with code %d (debug log has its reason)", int(rc))
	}

	res := Result{Language: "en", AudioDuration: dur}
	if r.multilingual {
		if id := C.whisper_full_lang_id_from_state(w.state); id >= 0 {
			res.Language = C.GoString(C.whisper_lang_str(id))
		}
	}
	var text strings.Builder
	n := int(C.whisper_full_n_segments_from_state(w.state))
	for i := range n {
		// With no timestamps each segment is one 30 s window; whisper.cpp
		// reports its end (the window's or the audio's) but not a usable
		// start (t0 comes from timestamp tokens that were not decoded).
		end := min(centis(C.whisper_full_get_segment_t1_from_state(w.state, C.int(i))), dur)
		seg := Segment{
			Start: windowStart(end),
			End:   end,
			Text:  cleanText(C.GoString(C.whisper_full_get_segment_text_from_state(w.state, C.int(i)))),
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
		"language", res.Language, "segments", len(res.Segments), "partial", partial)
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
		for _, w := range r.all {
			atomic.StoreInt32((*int32)(unsafe.Pointer(w.abort)), 1)
		}
		for range r.all { // wait for the running calls; never released
			<-r.idle
		}
		r.clean.Stop()
		freeNative(nativeRes{r.ctx, r.lang, r.all})
		r.ctx, r.lang, r.all = nil, nil, nil
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
	// capture, while set, receives every complete line (captureStateSize).
	capture func(line string)
	// states serialises captureStateSize.
	states sync.Mutex
}

// captureStateSize runs init (a whisper_init_state call) and returns the
// buffer sizes whisper.cpp logs while allocating the state: its key/value
// caches and compute buffers, in bytes. whisper.cpp has no call that
// reports them.
func captureStateSize(init func()) int64 {
	l := &whisperLog
	l.once.Do(func() { C.asr_route_log() })
	l.states.Lock()
	defer l.states.Unlock()
	var total float64
	l.mu.Lock()
	l.capture = func(line string) { total += stateLineMB(line) }
	l.mu.Unlock()
	init()
	l.mu.Lock()
	l.capture = nil
	l.mu.Unlock()
	return int64(total * 1e6)
}

// stateLineMB reads the size from a whisper_init_state log line such as
// "whisper_init_state: kv self size  =    3.15 MB" (0 for other lines).
func stateLineMB(line string) float64 {
	rest, ok := strings.CutPrefix(line, "whisper_init_state:")
	if !ok || !strings.HasSuffix(rest, " MB") {
		return 0
	}
	_, num, ok := strings.Cut(strings.TrimSuffix(rest, " MB"), "=")
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
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
	if l.capture != nil {
		l.capture(line)
	}
	logger := l.logger.Load()
	if line == "" || logger == nil {
		return
	}
	logger.Debug(line, "source", "whisper.cpp", "whisper_level", ggmlLevel(l.level))
}
