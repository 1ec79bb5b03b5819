package vad

import (
	"testing"
	"time"
)

// Measured on the shared 2-core x86-64 build machine (AMD Turin VM,
// go test -bench . -run '^$', one intra-op thread): BenchmarkProb
// 97-109 µs per 32 ms window, a real-time factor of about 0.003 (some 300
// times faster than real time, on one core); BenchmarkDetector3s about
// 9.0 ms per 3 s of audio (real-time factor 0.003). Not yet measured on the
// arm64 target. The "rtf" metric is processing time / audio time.

// BenchmarkProb is the cost of one 32 ms window on one stream.
func BenchmarkProb(b *testing.B) {
	m := model(b)
	x := speech(b, "en", english)
	s := m.NewStream()
	n := len(x) / WindowSamples
	for i := 0; b.Loop(); i++ {
		w := i % n
		if _, err := s.Prob(x[w*WindowSamples : (w+1)*WindowSamples]); err != nil {
			b.Fatal(err)
		}
	}
	reportRTF(b, WindowDuration)
}

// BenchmarkDetector3s runs a Detector over 3 s of speech and silence, fed
// in 20 ms chunks as a voice connection delivers it.
func BenchmarkDetector3s(b *testing.B) {
	m := model(b)
	x := concat(speech(b, "en", "Turn on the lights in the kitchen."), silence(3))[:3*SampleRate]
	d, err := m.NewDetector(Config{Silence: -1})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		d.Reset()
		for i := 0; i < len(x); i += 320 {
			if _, err := d.Feed(x[i : i+320]); err != nil {
				b.Fatal(err)
			}
		}
	}
	reportRTF(b, 3*time.Second)
}

// reportRTF adds the real-time factor (processing time / audio time) for
// audio of length dur per operation.
func reportRTF(b *testing.B, dur time.Duration) {
	perOp := float64(b.Elapsed()) / float64(b.N)
	b.ReportMetric(perOp/float64(dur), "rtf")
}
