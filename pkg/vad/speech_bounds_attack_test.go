package vad

import (
	"testing"
	"time"
)

// The Detector's speech bounds driven by chosen probabilities
// (no model: step is what Feed calls per window).

func boundsDetector(t *testing.T, cfg Config) *Detector {
	t.Helper()
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	d := &Detector{s: (&Model{}).NewStream(), cfg: cfg, minSpeech: max(samples(cfg.MinSpeech), 0), silenceEnd: samples(cfg.Silence), start: -1}
	if cfg.Silence < 0 {
		d.silenceEnd = -1
	}
	d.gap = d.silenceEnd
	if d.gap < 0 {
		d.gap = samples(defaultSilence)
	}
	return d
}

func feedProb(d *Detector, p float32, n int) {
	for range n {
		d.step(p)
	}
}

func sampleTime(x int64) time.Duration { return time.Duration(x) * time.Second / SampleRate }

// A short word (160 ms above the threshold: "No.", "Stop.") then a pause
// of 704 ms, then the request: the word is forgotten as a burst, start
// moves to the request, and the voice channel trims everything before
// start-200ms: the word never reaches whisper. Before trimming it did.
func TestShortWordBeforePauseIsTrimmed(t *testing.T) {
	d := boundsDetector(t, Config{})
	feedProb(d, 0.9, 5)   // "No." 160 ms
	feedProb(d, 0.05, 22) // 704 ms pause
	feedProb(d, 0.9, 30)  // the request
	feedProb(d, 0.05, 22) // ends it
	start, end, fed := d.Speech()
	if !d.ended {
		t.Fatal("not ended")
	}
	t.Logf("speech %v..%v of %v fed", sampleTime(start), sampleTime(end), sampleTime(fed))
	if sampleTime(start)-200*time.Millisecond > 160*time.Millisecond {
		t.Errorf("speech starts at %v: with the 200 ms pad the first word (0..160 ms, prob 0.9) is cut off", sampleTime(start))
	}
}

// Speech that dips below NegThreshold for one window and goes on between
// the thresholds (a soft, trailing word) counts as silence; the `end`
// frame ends the utterance before 700 ms, and Speech's end is the last
// window at or above Threshold: the trim keeps 200 ms of a 480 ms tail.
func TestSoftTailAfterDip(t *testing.T) {
	d := boundsDetector(t, Config{})
	feedProb(d, 0.9, 20)  // 640 ms
	feedProb(d, 0.2, 1)   // a dip (a stop consonant)
	feedProb(d, 0.45, 15) // 480 ms of soft speech, then the client's `end`
	_, end, fed := d.Speech()
	t.Logf("end %v of %v fed", sampleTime(end), sampleTime(fed))
	if sampleTime(fed)-sampleTime(end) > 200*time.Millisecond {
		t.Errorf("%v of audio classified 0.45 (above NegThreshold) after the end: the trim cuts %v of it", sampleTime(fed)-sampleTime(end), sampleTime(fed)-sampleTime(end)-200*time.Millisecond)
	}
}

// Speech in the very first window, and Speech on tiny or empty input.
func TestBoundsEdges(t *testing.T) {
	d := boundsDetector(t, Config{})
	if s, e, f := d.Speech(); s != -1 || e != -1 || f != 0 {
		t.Errorf("fresh: %d %d %d", s, e, f)
	}
	feedProb(d, 0.9, 7)
	if s, e, _ := d.Speech(); s != 0 || e != 7*WindowSamples {
		t.Errorf("speech from the first window: %d..%d", s, e)
	}
	d.Reset()
	if s, e, f := d.Speech(); s != -1 || e != -1 || f != 0 {
		t.Errorf("after Reset: %d %d %d", s, e, f)
	}
}
