package voice

import (
	"math/rand/v2"
	"testing"
	"time"
)

// trimSilence on chosen spans.

type fixedSpan struct {
	start, end, fed time.Duration
	ok              bool
}

func (f *fixedSpan) feed([]byte) bool { return false }
func (f *fixedSpan) heard() bool      { return f.ok }
func (f *fixedSpan) reset()           {}
func (f *fixedSpan) speechSpan() (time.Duration, time.Duration, time.Duration, bool) {
	return f.start, f.end, f.fed, f.ok
}

// No panic, even offsets, the speech always inside, at any rate and size.
func TestTrimOffsets(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 2))
	for _, rate := range []int{1, 7, 8000, 11025, 16000, 22050, 44100, 48000, 96000} {
		for range 20000 {
			samples := r.IntN(3*rate/2 + 3)
			pcm := make([]byte, 2*samples)
			have := time.Duration(samples) * time.Second / time.Duration(rate)
			span := &fixedSpan{ok: true, fed: have + time.Duration(r.IntN(129)-64)*time.Millisecond}
			span.start = time.Duration(r.Int64N(int64(have) + 1))
			span.end = span.start + time.Duration(r.Int64N(int64(have-span.start)+1))
			span.start -= span.start % (time.Second / 16000)
			c := &conn{s: &Server{}, rate: rate, vad: span}
			out := c.trimSilence(pcm)
			from := cap(pcm) - cap(out)
			if from%2 != 0 || len(out)%2 != 0 || from < 0 || from+len(out) > len(pcm) {
				t.Fatalf("rate %d: pcm %d, span %+v: from %d len %d", rate, len(pcm), span, from, len(out))
			}
			sb := int(int64(span.start)*int64(rate)/int64(time.Second)) * 2
			eb := min(len(pcm), int(int64(span.end)*int64(rate)/int64(time.Second))*2)
			if sb < from || eb > from+len(out) {
				t.Fatalf("rate %d: speech bytes %d..%d outside the kept %d..%d", rate, sb, eb, from, from+len(out))
			}
		}
	}
}
