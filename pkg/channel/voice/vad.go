package voice

import (
	"log/slog"
	"math"
	"time"

	"agent/pkg/audio"
	"agent/pkg/vad"
)

// detector finds the end of an utterance in a connection's PCM16 LE stream
// (an even number of bytes per call, at the hello's rate).
type detector interface {
	// feed analyses more audio and reports whether the utterance ended
	// (enough speech followed by enough silence).
	feed(pcm []byte) (ended bool)
	// heard reports whether the utterance so far holds speech.
	heard() bool
	// reset starts a new utterance.
	reset()
	// speechSpan is where the utterance's speech lies since reset, and how
	// much audio was analysed; ok false when the detector cannot tell
	// (the energy detector).
	speechSpan() (start, end, fed time.Duration, ok bool)
}

// VADConfig tunes end-of-utterance detection. An utterance ends by voice
// activity when at least MinSpeech of speech has been heard and is
// followed by Silence without speech. With a Silero model, speech is what
// the model says is speech (noise, music and tones are not); without one,
// an energy detector decides by loudness.
type VADConfig struct {
	// Silero returns the Silero VAD model, or nil to use the energy
	// detector. Each connection takes it at its hello.
	Silero func() *vad.Model
	// Level is the lowest RMS level (full scale 1.0) that counts as
	// speech; a steady background raises the bar above it (3x the noise
	// floor). Default 0.01 (-40 dBFS).
	Level float64
	// Silence is the trailing silence that ends an utterance. Default
	// 700 ms. Negative disables ending by voice activity (only `end`
	// does).
	Silence time.Duration
	// MinSpeech is the speech needed before silence can end an
	// utterance (a click or a cough does not). Default 200 ms.
	MinSpeech time.Duration
}

func (c VADConfig) withDefaults() VADConfig {
	if c.Level <= 0 {
		c.Level = 0.01
	}
	if c.Silence == 0 {
		c.Silence = 700 * time.Millisecond
	}
	if c.MinSpeech <= 0 {
		c.MinSpeech = 200 * time.Millisecond
	}
	return c
}

// vadFrame is the analysis frame.
const vadFrame = 20 * time.Millisecond

// newDetector returns the connection's detector: Silero when a model is
// loaded, else the energy detector.
func newDetector(cfg VADConfig, rate int, logger *slog.Logger) detector {
	cfg = cfg.withDefaults()
	if cfg.Silero != nil {
		if m := cfg.Silero(); m != nil {
			d, err := m.NewDetector(vad.Config{MinSpeech: cfg.MinSpeech, Silence: cfg.Silence})
			if err == nil {
				return &sileroVAD{d: d, rate: rate, cfg: cfg, logger: logger}
			}
			logger.Warn("silero VAD unusable, using the energy detector", "err", err)
		}
	}
	return newVAD(cfg, rate)
}

// sileroVAD adapts a Silero detector (16 kHz float32) to the stream. A
// model failure (it was closed on reload) hands the rest of the connection
// to the energy detector.
type sileroVAD struct {
	d        *vad.Detector
	rate     int
	cfg      VADConfig
	logger   *slog.Logger
	fallback *energyVAD
}

func (s *sileroVAD) feed(pcm []byte) bool {
	if s.fallback != nil {
		return s.fallback.feed(pcm)
	}
	x, err := audio.PCM16ToFloat32(pcm)
	if err != nil { // odd length: the connection keeps frames even
		return false
	}
	if s.rate != vad.SampleRate {
		x = audio.Resample(x, s.rate, vad.SampleRate)
	}
	ended, err := s.d.Feed(x)
	if err != nil {
		s.logger.Warn("silero VAD failed, using the energy detector for this connection", "err", err)
		s.fallback = newVAD(s.cfg, s.rate)
		return s.fallback.feed(pcm)
	}
	return ended
}

func (s *sileroVAD) heard() bool {
	if s.fallback != nil {
		return s.fallback.heard()
	}
	return s.d.Heard()
}

func (s *sileroVAD) speechSpan() (start, end, fed time.Duration, ok bool) {
	if s.fallback != nil {
		return 0, 0, 0, false
	}
	a, b, n := s.d.Speech()
	at := func(x int64) time.Duration { return time.Duration(x) * time.Second / vad.SampleRate }
	return at(a), at(b), at(n), a >= 0
}

func (s *sileroVAD) reset() {
	s.d.Reset()
	if s.fallback != nil {
		s.fallback.reset()
	}
}

// energyVAD classifies 20 ms frames of 16-bit PCM by energy. It works at
// the stream's own sample rate (energy needs no resampling).
type energyVAD struct {
	cfg       VADConfig
	frameLen  int     // samples per frame
	sum       float64 // sum of squares of the partial frame
	n         int     // samples in the partial frame
	floor     float64 // slow estimate of the background level (RMS)
	speech    int     // speech frames heard in this utterance
	silence   int     // frames since the last speech frame
	minSpeech int     // frames
	endAfter  int     // frames of trailing silence; 0: never
}

func newVAD(cfg VADConfig, rate int) *energyVAD {
	cfg = cfg.withDefaults()
	frames := func(d time.Duration) int { return max(1, int((d+vadFrame-1)/vadFrame)) }
	v := &energyVAD{cfg: cfg, frameLen: max(1, int(int64(rate)*int64(vadFrame)/int64(time.Second))), minSpeech: frames(cfg.MinSpeech)}
	if cfg.Silence > 0 {
		v.endAfter = frames(cfg.Silence)
	}
	v.floor = cfg.Level / 3
	return v
}

// feed analyses PCM16 LE bytes (an even count) and reports whether the
// utterance has ended: enough speech followed by enough silence.
func (v *energyVAD) feed(pcm []byte) (ended bool) {
	for i := 0; i+1 < len(pcm); i += 2 {
		s := float64(int16(uint16(pcm[i])|uint16(pcm[i+1])<<8)) / 32768
		v.sum += s * s
		v.n++
		if v.n < v.frameLen {
			continue
		}
		rms := math.Sqrt(v.sum / float64(v.n))
		v.sum, v.n = 0, 0
		if rms >= max(v.cfg.Level, 3*v.floor) {
			v.speech++
			v.silence = 0
		} else {
			v.silence++
			v.floor = 0.95*v.floor + 0.05*rms
		}
		if v.endAfter > 0 && v.speech >= v.minSpeech && v.silence >= v.endAfter {
			ended = true
		}
	}
	return ended
}

// heard reports whether the utterance so far holds any speech.
func (v *energyVAD) heard() bool { return v.speech >= v.minSpeech }

// speechSpan: loudness does not say where speech is (nothing is cut).
func (v *energyVAD) speechSpan() (start, end, fed time.Duration, ok bool) { return 0, 0, 0, false }

// reset starts a new utterance; the noise floor is kept.
func (v *energyVAD) reset() {
	v.sum, v.n, v.speech, v.silence = 0, 0, 0, 0
}
