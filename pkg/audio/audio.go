// Package audio holds what the speech path needs to get samples: pure-Go
// helpers for 16-bit little-endian PCM, WAV files, down-mixing to mono,
// resampling and durations, and Decode for everything else (AMR, speex,
// Opus/WebM, Ogg, MP3, AAC) through ffmpeg. Samples are float32 in [-1, 1].
package audio

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// ErrOddLength reports PCM16 input whose byte length is not a multiple of two.
var ErrOddLength = errors.New("odd number of bytes")

// PCM16ToFloat32 decodes signed 16-bit little-endian PCM into float32
// samples in [-1, 1) (full scale is 32768).
func PCM16ToFloat32(b []byte) ([]float32, error) {
	if len(b)%2 != 0 {
		return nil, fmt.Errorf("audio: decode pcm16: %d bytes: %w", len(b), ErrOddLength)
	}
	out := make([]float32, len(b)/2)
	decodePCM16(out, b)
	return out, nil
}

// decodePCM16 fills dst from b; len(b) must be at least 2*len(dst).
func decodePCM16(dst []float32, b []byte) {
	for i := range dst {
		v := int16(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		dst[i] = float32(v) / 32768
	}
}

// Mono averages interleaved frames of the given channel count into one
// channel. A trailing partial frame is dropped. With channels <= 1 it
// returns samples unchanged.
func Mono(samples []float32, channels int) []float32 {
	if channels <= 1 {
		return samples
	}
	n := len(samples) / channels
	out := make([]float32, n)
	inv := 1 / float32(channels)
	for i := range out {
		var sum float32
		for _, s := range samples[i*channels : (i+1)*channels] {
			sum += s
		}
		out[i] = sum * inv
	}
	return out
}

// Duration is the playing time of n samples (frames) at rate samples per
// second. It is 0 when rate is not positive.
func Duration(n, rate int) time.Duration {
	if rate <= 0 || n <= 0 {
		return 0
	}
	whole, rem := uint64(n)/uint64(rate), uint64(n)%uint64(rate)
	if whole >= math.MaxInt64/uint64(time.Second) {
		return math.MaxInt64
	}
	// rem*1e9 may not fit in 64 bits for huge rates; rem < rate keeps the
	// 128-bit quotient below 1e9.
	hi, lo := bits.Mul64(rem, uint64(time.Second))
	frac, _ := bits.Div64(hi, lo, uint64(rate))
	return time.Duration(whole)*time.Second + time.Duration(frac)
}
