package voice

import (
	"math"
	"time"
)

// VADConfig tunes the energy-based end-of-utterance detector. An utterance
// ends by voice activity when at least MinSpeech of speech has been heard
// and is followed by Silence without speech.
type VADConfig struct {
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

// vad classifies 20 ms frames of 16-bit PCM by energy. It works at the
// stream's own sample rate (energy needs no resampling).
type vad struct {
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

func newVAD(cfg VADConfig, rate int) *vad {
	cfg = cfg.withDefaults()
	frames := func(d time.Duration) int { return max(1, int((d+vadFrame-1)/vadFrame)) }
	v := &vad{cfg: cfg, frameLen: max(1, int(int64(rate)*int64(vadFrame)/int64(time.Second))), minSpeech: frames(cfg.MinSpeech)}
	if cfg.Silence > 0 {
		v.endAfter = frames(cfg.Silence)
	}
	v.floor = cfg.Level / 3
	return v
}

// feed analyses PCM16 LE bytes (an even count) and reports whether the
// utterance has ended: enough speech followed by enough silence.
func (v *vad) feed(pcm []byte) (ended bool) {
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
func (v *vad) heard() bool { return v.speech >= v.minSpeech }

// reset starts a new utterance; the noise floor is kept.
func (v *vad) reset() {
	v.sum, v.n, v.speech, v.silence = 0, 0, 0, 0
}
