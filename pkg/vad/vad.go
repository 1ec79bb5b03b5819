// Package vad detects voice activity with the Silero VAD v5 model
// (silero_vad_v5.onnx) run by ONNX Runtime through
// github.com/yalue/onnxruntime_go, sharing the process-wide runtime that
// agent/pkg/onnxrt loads (for agent/pkg/embed too).
//
// A Model is loaded once and shared; each audio stream (one per voice
// connection) gets its own Stream, which carries the model's recurrent state
// and the last 64 samples of context between 32 ms windows. A Detector wraps
// a Stream and turns its per-window speech probabilities into an
// end-of-utterance decision for 16 kHz float32 audio of any chunking.
//
// Samples are mono float32 in [-1, 1] at 16 kHz. Non-finite samples (NaN,
// ±Inf) are rejected with ErrNonFinite before anything is consumed: one of
// them would poison the recurrent state for the rest of the stream, and
// decoded PCM never contains them, so they mean a bug upstream.
package vad

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

const (
	// SampleRate is the only rate the package accepts.
	SampleRate = 16000
	// WindowSamples is the length of one window at SampleRate (32 ms).
	WindowSamples = 512
	// ContextSamples is how many samples of the previous window the model
	// sees in front of each window.
	ContextSamples = 64
	// WindowDuration is the playing time of one window.
	WindowDuration = WindowSamples * time.Second / SampleRate
	// ModelFile is the model's file name in the models directory.
	ModelFile = "silero_vad_v5.onnx"

	stateSize = 2 * 1 * 128 // state and stateN: [2, batch=1, 128]
)

var (
	// ErrModelMissing means the model file does not exist; the wrapping
	// error names the path and the fix.
	ErrModelMissing = errors.New("silero VAD model missing; fetch it with `scripts/fetch-models.sh vad` (or `scripts/deps.sh vad` on a build machine)")
	// ErrInvalidModel means the file is not a Silero VAD v5 model ONNX
	// Runtime can run.
	ErrInvalidModel = errors.New("not a Silero VAD v5 model")
	// ErrWindowSize is returned by Stream.Prob for a chunk that is not
	// exactly WindowSamples long.
	ErrWindowSize = fmt.Errorf("chunk is not one window of %d samples", WindowSamples)
	// ErrNonFinite is returned for audio containing NaN or ±Inf.
	ErrNonFinite = errors.New("audio contains NaN or Inf samples")
	// ErrClosed is returned after Model.Close.
	ErrClosed = errors.New("vad: model closed")
)

// Model is a loaded Silero VAD model. It is safe for concurrent use: any
// number of Streams, in any goroutines, run on one Model (ONNX Runtime
// allows concurrent runs of one session; every run gets its own input and
// output tensors).
type Model struct {
	session *session
	mu      sync.RWMutex // runs hold it shared, Close exclusively
	closed  bool
}

// Close releases the model. Runs in progress finish first; later ones fail
// with ErrClosed. Closing twice is harmless.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.session.Destroy()
}

// Stream is the per-stream side of a Model: the recurrent state and the
// context carried from one window to the next. A Stream is not safe for
// concurrent use; give each audio stream its own.
//
// Its buffers are separate allocations free of Go pointers, as cgo requires
// of memory handed to C (the tensors wrap them without copying).
type Stream struct {
	m      *Model
	input  []float32 // context, then the window
	state  []float32 // fed as "state"
	stateN []float32 // receives "stateN"; swapped with state
	out    []float32 // receives "output"
}

// NewStream starts a stream with fresh state and silent context.
func (m *Model) NewStream() *Stream {
	return &Stream{
		m:      m,
		input:  make([]float32, ContextSamples+WindowSamples),
		state:  make([]float32, stateSize),
		stateN: make([]float32, stateSize),
		out:    make([]float32, 1),
	}
}

// Reset forgets the state and context, as if the stream were new.
func (s *Stream) Reset() {
	clear(s.input)
	clear(s.state)
}

// Prob returns the probability that the window chunk (exactly
// WindowSamples samples at 16 kHz, following the previous window of this
// stream) contains speech. On error the stream is unchanged.
func (s *Stream) Prob(chunk []float32) (float32, error) {
	if len(chunk) != WindowSamples {
		return 0, fmt.Errorf("vad: %w (got %d)", ErrWindowSize, len(chunk))
	}
	if !finite(chunk) {
		return 0, fmt.Errorf("vad: %w", ErrNonFinite)
	}
	copy(s.input[ContextSamples:], chunk)
	// The run reads input and state and writes stateN and out only, so a
	// failed one leaves the context (input[:ContextSamples]) and state as
	// they were.
	if err := s.m.run(s.input, s.state, s.stateN, s.out); err != nil {
		return 0, err
	}
	p := s.out[0]
	if math.IsNaN(float64(p)) || p < 0 || p > 1 {
		return 0, fmt.Errorf("vad: model returned probability %v", p)
	}
	s.state, s.stateN = s.stateN, s.state
	copy(s.input[:ContextSamples], chunk[WindowSamples-ContextSamples:])
	return p, nil
}

func finite(x []float32) bool {
	for _, v := range x {
		// v-v is NaN for NaN and ±Inf, 0 otherwise.
		if v-v != 0 {
			return false
		}
	}
	return true
}

// Config tunes a Detector. Zero values take the defaults.
type Config struct {
	// Threshold is the probability at or above which a window is speech
	// (default 0.5).
	Threshold float32
	// NegThreshold is the probability below which a window counts as
	// silence once speech has started (default Threshold-0.15, at least
	// 0.01). Windows in between continue whatever came before them.
	NegThreshold float32
	// MinSpeech is how much speech an utterance needs before Heard reports
	// it and before silence can end it (default 200 ms; negative: one
	// window is enough).
	MinSpeech time.Duration
	// Silence is the trailing silence that ends an utterance (default
	// 700 ms; negative: never end by silence, the caller decides).
	Silence time.Duration
}

const (
	defaultThreshold = 0.5
	defaultMinSpeech = 200 * time.Millisecond
	defaultSilence   = 700 * time.Millisecond
)

func (c Config) withDefaults() (Config, error) {
	if c.Threshold == 0 {
		c.Threshold = defaultThreshold
	}
	if c.NegThreshold == 0 {
		c.NegThreshold = max(c.Threshold-0.15, 0.01)
	}
	if c.MinSpeech == 0 {
		c.MinSpeech = defaultMinSpeech
	}
	if c.Silence == 0 {
		c.Silence = defaultSilence
	}
	if !(c.Threshold > 0 && c.Threshold < 1) {
		return c, fmt.Errorf("vad: Threshold %v outside (0, 1)", c.Threshold)
	}
	if !(c.NegThreshold > 0 && c.NegThreshold <= c.Threshold) {
		return c, fmt.Errorf("vad: NegThreshold %v outside (0, Threshold %v]", c.NegThreshold, c.Threshold)
	}
	return c, nil
}

// samples converts a duration to a whole number of samples at SampleRate
// (a sample is exactly 62.5 µs, so this cannot overflow).
func samples(d time.Duration) int64 {
	return int64(d / (time.Second / SampleRate))
}

// Detector finds the end of one utterance at a time in 16 kHz audio, with
// the hysteresis of Silero's reference VADIterator: speech starts at a
// window with probability >= Threshold; once started, trailing silence is
// counted from the first window below NegThreshold and cancelled by the
// next window at or above Threshold. An utterance ends when, after at least
// MinSpeech of speech, the trailing silence reaches Silence. A burst of
// speech shorter than MinSpeech followed by that much silence (700 ms when
// Silence is negative) is forgotten, so coughs and clicks never add up.
//
// Time is measured in whole windows (32 ms). A Detector is not safe for
// concurrent use.
type Detector struct {
	s   *Stream
	cfg Config

	minSpeech, silenceEnd, gap int64 // in samples; silenceEnd < 0: never

	pending   []float32 // a partial window, len < WindowSamples
	triggered bool      // inside speech (possibly in its trailing silence)
	voiced    int64     // speech samples in the current run of speech
	silence   int64     // trailing silence samples, 0 while speaking
	heard     bool
	ended     bool
	// Where the speech is, in samples since Reset: pos counts the samples
	// of the windows analysed; start is where the current run of speech
	// began (-1: none), end where its last speech window ended.
	pos, start, end int64
}

// NewDetector returns a Detector on a new Stream of m.
func (m *Model) NewDetector(cfg Config) (*Detector, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Detector{
		s:          m.NewStream(),
		cfg:        cfg,
		minSpeech:  max(samples(cfg.MinSpeech), 0),
		silenceEnd: samples(cfg.Silence),
		pending:    make([]float32, 0, WindowSamples),
		start:      -1,
	}
	if cfg.Silence < 0 {
		d.silenceEnd = -1
	}
	d.gap = d.silenceEnd
	if d.gap < 0 {
		d.gap = samples(defaultSilence)
	}
	return d, nil
}

// Config returns the configuration in effect, defaults filled in.
func (d *Detector) Config() Config { return d.cfg }

// Feed processes samples (16 kHz, any length; a partial window waits for
// the next call) and reports whether the utterance has ended. Once it has,
// Feed keeps returning true and ignores its input until Reset; samples
// after the end within the same call are dropped. Non-finite input fails
// the whole call with ErrNonFinite before anything is consumed; a model
// error (ErrClosed) loses the window it happened in.
func (d *Detector) Feed(samples []float32) (ended bool, err error) {
	if d.ended {
		return true, nil
	}
	if !finite(samples) {
		return false, fmt.Errorf("vad: %w", ErrNonFinite)
	}
	for len(samples) > 0 {
		n := copy(d.pending[len(d.pending):WindowSamples], samples)
		d.pending = d.pending[:len(d.pending)+n]
		samples = samples[n:]
		if len(d.pending) < WindowSamples {
			break
		}
		p, err := d.s.Prob(d.pending)
		if err != nil {
			// Only a closed or broken model gets here; the window is lost.
			d.pending = d.pending[:0]
			return false, err
		}
		d.pending = d.pending[:0]
		d.step(p)
		if d.ended {
			return true, nil
		}
	}
	return false, nil
}

// step advances the utterance state by one window of probability p.
func (d *Detector) step(p float32) {
	const w = WindowSamples
	d.pos += w
	switch {
	case p >= d.cfg.Threshold:
		if d.start < 0 {
			d.start = d.pos - w
		}
		d.triggered = true
		d.silence = 0
		d.voiced += w
		d.end = d.pos
	case !d.triggered:
		return
	case p < d.cfg.NegThreshold:
		d.silence += w
	case d.silence > 0:
		// Soft speech after a dip: silence for ending the utterance (as
		// Silero's reference counts it), but speech for where it ends.
		d.silence += w
		d.end = d.pos
	default: // between the thresholds, continuing speech
		d.voiced += w
		d.end = d.pos
	}
	if d.voiced >= d.minSpeech {
		d.heard = true
	}
	switch {
	case d.silence == 0:
	case d.heard && d.silenceEnd >= 0 && d.silence >= d.silenceEnd:
		d.ended = true
	case !d.heard && d.silence >= d.gap:
		// The burst is forgotten for ending the utterance, not for where
		// its speech starts: start stays at the first speech window, so
		// that a short word before a pause is not cut off.
		d.triggered, d.voiced, d.silence = false, 0, 0
	}
}

// Speech is where this utterance's speech is, in samples at SampleRate
// since Reset: from its first speech window (a short burst before a
// pause included) to the end of its last window above NegThreshold (start -1 while none is heard), and
// how many samples were fed, so that a caller can check the audio it
// kept is the audio analysed before cutting silence off it.
func (d *Detector) Speech() (start, end, fed int64) {
	fed = d.pos + int64(len(d.pending))
	if !d.heard {
		return -1, -1, fed
	}
	return d.start, d.end, fed
}

// Heard reports whether this utterance has had at least MinSpeech of
// speech.
func (d *Detector) Heard() bool { return d.heard }

// Speaking reports whether speech is going on now: started, and not yet
// followed by a window below NegThreshold.
func (d *Detector) Speaking() bool { return d.triggered && d.silence == 0 }

// Reset starts a new utterance: it forgets what was heard, the partial
// window and the model's state and context. The audio after an utterance
// usually does not continue it (the caller stops listening while it
// answers), so nothing of the old audio is carried into the new one. The
// configuration and buffers are kept.
func (d *Detector) Reset() {
	d.s.Reset()
	d.pending = d.pending[:0]
	d.triggered, d.heard, d.ended = false, false, false
	d.voiced, d.silence = 0, 0
	d.pos, d.start, d.end = 0, -1, 0
}
