package voice

import (
	"testing"
	"time"

	"agent/pkg/asr"
	"agent/pkg/asr/asrtest"
	"agent/pkg/audio"
)

// TestSilenceTrimmedBeforeRecognition: Silero's speech bounds cut the
// second of silence before the words and the trailing silence that ended
// the utterance, keeping a pad around the speech, at 16 and 48 kHz. The
// energy detector cuts nothing.
func TestSilenceTrimmedBeforeRecognition(t *testing.T) {
	speech := asrtest.SpeechOrSkip(t, "Please turn on the kitchen light.")
	spoken := time.Duration(len(speech)) * time.Second / 16000
	for _, rate := range []int{16000, 48000} {
		rec := &fakeASR{text: "the kitchen light"}
		cfg := fakeConfig(rec, &fakeConv{})
		cfg.VAD = sileroConfig(t)
		srv, hs := newServer(t, cfg)
		c := dial(t, hs)
		c.ready(map[string]any{"sample_rate": rate})
		in := speech
		if rate != 16000 {
			in = audio.Resample(speech, 16000, rate)
		}
		sent := append(append(silence(time.Second, rate), in...), silence(1500*time.Millisecond, rate)...)
		c.pcm(toPCM16(sent), rate/50*2)
		if f := c.expect("transcript"); !f.Final {
			t.Fatalf("%d Hz: %+v", rate, f)
		}
		c.replies()
		rec.mu.Lock()
		got := time.Duration(len(rec.calls[0])) * time.Second / asr.SampleRate
		rec.mu.Unlock()
		t.Logf("%d Hz: %v of speech, %v sent until the end, %v recognised", rate, spoken, time.Duration(len(sent))*time.Second/time.Duration(rate), got)
		// The speech and its pads (the espeak audio has its own quiet
		// edges, which Silero may leave out).
		if got > spoken+2*speechPad+100*time.Millisecond || got < spoken-300*time.Millisecond {
			t.Errorf("%d Hz: %v recognised for %v of speech; want about the speech and %v pads", rate, got, spoken, speechPad)
		}
		if srv.Stats().TrimmedBytes == 0 {
			t.Errorf("%d Hz: nothing counted as trimmed", rate)
		}
	}

	rec := &fakeASR{text: "x"}
	_, ehs := newServer(t, fakeConfig(rec, &fakeConv{}))
	e := dial(t, ehs)
	e.ready(nil)
	sent := append(append(silence(time.Second, 16000), speech...), silence(300*time.Millisecond, 16000)...)
	e.pcm(toPCM16(sent), 640)
	e.end()
	e.expect("transcript")
	e.replies()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.calls[0]) != len(sent) {
		t.Errorf("the energy detector's utterance was cut: %d of %d samples", len(rec.calls[0]), len(sent))
	}
}
