package vad

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/embed/embedtest"
	"agent/pkg/onnxrt"
)

const (
	english = "The quick brown fox jumps over the lazy dog. Please turn on the lights in the kitchen."
	chinese = "今天天气很好，我们去公园散步吧。请帮我打开客厅的灯。"
)

// utterance is lead seconds of silence, speech, then trail seconds of
// silence, with the speech's sample range.
type utterance struct {
	x          []float32
	start, end int // speech is x[start:end]
}

func newUtterance(sp []float32, lead, trail float64) utterance {
	x := concat(silence(lead), sp, silence(trail))
	start := int(lead * SampleRate)
	return utterance{x: x, start: start, end: start + len(sp)}
}

// regions splits window probabilities into those wholly before the speech,
// wholly inside it, and starting at least 200 ms after it.
func (u utterance) regions(p []float32) (lead, speech, trail []float32) {
	for i, v := range p {
		a, b := i*WindowSamples, (i+1)*WindowSamples
		switch {
		case b <= u.start:
			lead = append(lead, v)
		case a >= u.start && b <= u.end:
			speech = append(speech, v)
		case a >= u.end+SampleRate/5:
			trail = append(trail, v)
		}
	}
	return lead, speech, trail
}

func maxOf(p []float32) float32 {
	var m float32
	for _, v := range p {
		m = max(m, v)
	}
	return m
}

// TestSpeechProbabilities: speech windows score high, the silence around
// them low, in English and in Mandarin.
func TestSpeechProbabilities(t *testing.T) {
	m := model(t)
	for _, c := range []struct{ voice, text string }{{"en", english}, {"cmn", chinese}} {
		t.Run(c.voice, func(t *testing.T) {
			u := newUtterance(speech(t, c.voice, c.text), 0.5, 1)
			lead, sp, trail := u.regions(probs(t, m, u.x))
			mean, above := stats(sp)
			t.Logf("speech: %d windows, mean %.3f, %.0f%% >= 0.5; silence max: leading %.3f, trailing %.3f",
				len(sp), mean, 100*above, maxOf(lead), maxOf(trail))
			// Measured: en mean 0.86 / 88% >= 0.5 (espeak leaves a 0.35 s
			// pause between the sentences), cmn 0.93 / 94%; silence <= 0.02.
			if mean < 0.7 || above < 0.7 {
				t.Errorf("speech scored mean %.3f, %.0f%% of windows >= 0.5; want both >= 0.7", mean, 100*above)
			}
			if len(lead) < 10 || len(trail) < 20 {
				t.Fatalf("too few silent windows: %d leading, %d trailing", len(lead), len(trail))
			}
			if maxOf(lead) > 0.1 || maxOf(trail) > 0.1 {
				t.Errorf("silence scored up to %.3f (leading) / %.3f (trailing); want <= 0.1", maxOf(lead), maxOf(trail))
			}
		})
	}
}

// TestNotSpeech is why Silero and not an energy gate: loud white noise and
// a loud steady tone, each with far more energy than the speech, score low
// and never make an utterance.
func TestNotSpeech(t *testing.T) {
	m := model(t)
	for _, c := range []struct {
		name string
		x    []float32
	}{
		{"white noise rms 0.3", noise(3, 0.3, 1)},
		{"white noise rms 0.05", noise(3, 0.05, 2)},
		{"tone 440 Hz amp 0.5", tone(3, 440, 0.5)},
		{"tone 1 kHz amp 0.5", tone(3, 1000, 0.5)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := probs(t, m, c.x)
			mean, above := stats(p)
			t.Logf("mean %.3f, max %.3f, %.0f%% >= 0.5", mean, maxOf(p), 100*above)
			// Measured: means 0.002-0.026, maxima 0.11-0.13 (the first
			// windows, before the state settles).
			if mean > 0.1 || maxOf(p) > 0.35 {
				t.Errorf("scored mean %.3f, max %.3f; want <= 0.1 and <= 0.35", mean, maxOf(p))
			}
			d := newDetector(t, m, Config{})
			ended := feedAll(t, d, c.x, 320)
			if ended >= 0 || d.Heard() {
				t.Errorf("detector: ended at %d, heard %v; want neither", ended, d.Heard())
			}
		})
	}
}

// TestSpeechInNoise: speech over steady noise is still found.
func TestSpeechInNoise(t *testing.T) {
	m := model(t)
	sp := speech(t, "en", english)
	n := noise(float64(len(sp))/SampleRate, 0.05, 4)
	for i := range sp {
		sp[i] += n[i]
	}
	mean, above := stats(probs(t, m, sp))
	t.Logf("speech + noise (rms 0.05): mean %.3f, %.0f%% >= 0.5", mean, 100*above)
	if mean < 0.6 || above < 0.6 {
		t.Errorf("mean %.3f, %.0f%% >= 0.5; want both >= 0.6", mean, 100*above)
	}
}

func newDetector(t testing.TB, m *Model, cfg Config) *Detector {
	t.Helper()
	d, err := m.NewDetector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// feedAll feeds x in chunks of n samples and returns how many samples had
// been fed when Feed first reported the end, or -1.
func feedAll(t testing.TB, d *Detector, x []float32, n int) int {
	t.Helper()
	for i := 0; i < len(x); i += n {
		j := min(i+n, len(x))
		ended, err := d.Feed(x[i:j])
		if err != nil {
			t.Fatalf("Feed at sample %d: %v", i, err)
		}
		if ended {
			return j
		}
	}
	return -1
}

func ms(samples int) time.Duration { return time.Duration(samples) * time.Second / SampleRate }

// TestDetectorEndOfUtterance: an utterance followed by silence ends about
// Silence after the speech, not at the pause between its sentences, and
// Heard turns true only after MinSpeech of it.
func TestDetectorEndOfUtterance(t *testing.T) {
	m := model(t)
	for _, c := range []struct{ voice, text string }{{"en", english}, {"cmn", chinese}} {
		t.Run(c.voice, func(t *testing.T) {
			u := newUtterance(speech(t, c.voice, c.text), 0.5, 1.5)
			d := newDetector(t, m, Config{})
			cfg := d.Config()
			heardAt, endedAt := -1, -1
			const chunk = 320 // 20 ms, as a voice connection delivers it
			for i := 0; i < len(u.x) && endedAt < 0; i += chunk {
				j := min(i+chunk, len(u.x))
				ended, err := d.Feed(u.x[i:j])
				if err != nil {
					t.Fatal(err)
				}
				if d.Heard() && heardAt < 0 {
					heardAt = j
				}
				if ended {
					endedAt = j
				}
			}
			if heardAt < 0 || endedAt < 0 {
				t.Fatalf("heard at %d, ended at %d; want both", heardAt, endedAt)
			}
			t.Logf("heard %v after the speech began; ended %v after it stopped",
				ms(heardAt-u.start), ms(endedAt-u.end))
			if got := ms(heardAt - u.start); got < cfg.MinSpeech || got > cfg.MinSpeech+200*time.Millisecond {
				t.Errorf("heard %v after the speech began; want %v to %v", got, cfg.MinSpeech, cfg.MinSpeech+200*time.Millisecond)
			}
			if got := ms(endedAt - u.end); got < cfg.Silence-100*time.Millisecond || got > cfg.Silence+200*time.Millisecond {
				t.Errorf("ended %v after the speech; want about %v", got, cfg.Silence)
			}
		})
	}
}

// TestDetectorShortBurst: a word shorter than MinSpeech is not an
// utterance, and is forgotten after the silence; with the default
// MinSpeech the same word is one.
func TestDetectorShortBurst(t *testing.T) {
	m := model(t)
	u := newUtterance(speech(t, "en", "Yes."), 0.5, 2) // about 0.32 s of speech
	d := newDetector(t, m, Config{MinSpeech: time.Second})
	if ended := feedAll(t, d, u.x, 1000); ended >= 0 || d.Heard() || d.Speaking() {
		t.Errorf("MinSpeech 1s: ended at %d, heard %v, speaking %v; want none", ended, d.Heard(), d.Speaking())
	}
	d = newDetector(t, m, Config{})
	if ended := feedAll(t, d, u.x, 1000); ended < 0 || !d.Heard() {
		t.Errorf("defaults: ended at %d, heard %v; want both", ended, d.Heard())
	}
}

// TestDetectorNeverEnds: with a negative Silence only the caller ends an
// utterance.
func TestDetectorNeverEnds(t *testing.T) {
	m := model(t)
	u := newUtterance(speech(t, "en", "Turn on the lights."), 0.2, 3)
	d := newDetector(t, m, Config{Silence: -1})
	if ended := feedAll(t, d, u.x, 4096); ended >= 0 || !d.Heard() || d.Speaking() {
		t.Errorf("ended at %d, heard %v, speaking %v; want heard only", ended, d.Heard(), d.Speaking())
	}
}

// TestDetectorSilence: silence, digital or a quiet noise floor, never
// counts as speech.
func TestDetectorSilence(t *testing.T) {
	m := model(t)
	for name, x := range map[string][]float32{"zeros": silence(5), "noise floor": noise(5, 0.001, 5)} {
		d := newDetector(t, m, Config{})
		if ended := feedAll(t, d, x, 333); ended >= 0 || d.Heard() {
			t.Errorf("%s: ended at %d, heard %v; want neither", name, ended, d.Heard())
		}
	}
}

// TestDetectorReset: after an utterance ends, Feed keeps saying so until
// Reset; after Reset the detector behaves exactly like a new one.
func TestDetectorReset(t *testing.T) {
	m := model(t)
	first := newUtterance(speech(t, "en", english), 0.3, 1)
	second := newUtterance(speech(t, "cmn", chinese), 0.3, 1)
	d := newDetector(t, m, Config{})
	if ended := feedAll(t, d, first.x, 512); ended < 0 {
		t.Fatal("first utterance did not end")
	}
	if ended, err := d.Feed(silence(0.1)); !ended || err != nil {
		t.Errorf("Feed after the end = %v, %v; want true, nil", ended, err)
	}
	// Leave a partial window behind too: Reset must drop it.
	if _, err := d.Feed(make([]float32, 100)); err != nil {
		t.Fatal(err)
	}
	d.Reset()
	if d.Heard() || d.Speaking() {
		t.Error("Reset kept Heard or Speaking")
	}
	got := feedAll(t, d, second.x, 700)
	want := feedAll(t, newDetector(t, m, Config{}), second.x, 700)
	if got < 0 || got != want || !d.Heard() {
		t.Errorf("after Reset the second utterance ended at %d (heard %v); a new detector ends at %d", got, d.Heard(), want)
	}
}

// TestStreamReset: a reset stream gives exactly a new stream's
// probabilities.
func TestStreamReset(t *testing.T) {
	m := model(t)
	x := speech(t, "en", "Turn on the lights.")
	s := m.NewStream()
	for i := 0; i+WindowSamples <= len(x); i += WindowSamples {
		if _, err := s.Prob(x[i : i+WindowSamples]); err != nil {
			t.Fatal(err)
		}
	}
	s.Reset()
	want := probs(t, m, x)
	for i, w := range want {
		got, err := s.Prob(x[i*WindowSamples : (i+1)*WindowSamples])
		if err != nil || got != w {
			t.Fatalf("window %d after Reset: %v, %v; a new stream gives %v", i, got, err, w)
		}
	}
}

func TestWindowSize(t *testing.T) {
	s := model(t).NewStream()
	for _, n := range []int{0, 1, WindowSamples - 1, WindowSamples + 1, ContextSamples + WindowSamples, 1536} {
		if _, err := s.Prob(make([]float32, n)); !errors.Is(err, ErrWindowSize) {
			t.Errorf("Prob(%d samples) = %v; want ErrWindowSize", n, err)
		}
	}
	if _, err := s.Prob(nil); !errors.Is(err, ErrWindowSize) {
		t.Errorf("Prob(nil) = %v; want ErrWindowSize", err)
	}
}

// TestNonFinite: NaN and ±Inf are rejected, and the rejected call leaves
// the stream or detector as if it had not been made.
func TestNonFinite(t *testing.T) {
	m := model(t)
	x := speech(t, "en", "Turn on the lights.")
	x = x[:len(x)/WindowSamples*WindowSamples]
	want := probs(t, m, x)
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		s := m.NewStream()
		for i, w := range want {
			win := x[i*WindowSamples : (i+1)*WindowSamples]
			if i == 3 {
				poisoned := append([]float32(nil), win...)
				poisoned[100] = bad
				if _, err := s.Prob(poisoned); !errors.Is(err, ErrNonFinite) {
					t.Fatalf("Prob with %v = %v; want ErrNonFinite", bad, err)
				}
			}
			if got, err := s.Prob(win); err != nil || got != w {
				t.Fatalf("%v: window %d: %v, %v; want %v", bad, i, got, err, w)
			}
		}

		u := newUtterance(x, 0.2, 1)
		d := newDetector(t, m, Config{})
		half := len(u.x) / 2000 * 1000 // on the 1000-sample grid both detectors below are fed on
		if _, err := d.Feed(u.x[:half]); err != nil {
			t.Fatal(err)
		}
		poisoned := append([]float32(nil), u.x[half:half+1000]...)
		poisoned[999] = bad
		if ended, err := d.Feed(poisoned); ended || !errors.Is(err, ErrNonFinite) {
			t.Fatalf("Feed with %v = %v, %v; want false, ErrNonFinite", bad, ended, err)
		}
		got := half + feedAll(t, d, u.x[half:], 1000)
		wantEnd := feedAll(t, newDetector(t, m, Config{}), u.x, 1000)
		if wantEnd < 0 || got != wantEnd {
			t.Errorf("%v: after the rejected Feed the utterance ended at %d; an undisturbed detector at %d", bad, got, wantEnd)
		}
	}
}

// TestConcurrentStreams runs many streams on one Model at once (run with
// -race); each must get exactly what it gets alone.
func TestConcurrentStreams(t *testing.T) {
	m := model(t)
	inputs := [][]float32{
		newUtterance(speech(t, "en", english), 0.3, 1).x,
		newUtterance(speech(t, "cmn", chinese), 0.3, 1).x,
	}
	var want [][]float32
	var wantEnd []int
	for _, x := range inputs {
		want = append(want, probs(t, m, x))
		// Fed window by window, the end is the deciding window's last sample.
		wantEnd = append(wantEnd, feedAll(t, newDetector(t, m, Config{}), x, WindowSamples))
	}
	const streams = 8
	var wg sync.WaitGroup
	errs := make(chan string, 2*streams)
	for g := range streams {
		wg.Go(func() {
			x, w := inputs[g%2], want[g%2]
			s := m.NewStream()
			for i, wp := range w {
				p, err := s.Prob(x[i*WindowSamples : (i+1)*WindowSamples])
				if err != nil || p != wp {
					errs <- fmt.Sprintf("stream: window %d: got %v, %v; want %v", i, p, err, wp)
					return
				}
			}
			d, err := m.NewDetector(Config{})
			if err != nil {
				errs <- err.Error()
				return
			}
			chunk := 160 * (1 + g) // different chunkings end at the same window
			for i := 0; i < len(x); i += chunk {
				j := min(i+chunk, len(x))
				ended, err := d.Feed(x[i:j])
				if err != nil {
					errs <- err.Error()
					return
				}
				if ended {
					// The end is reported in the chunk holding the deciding
					// window's last sample.
					if w := wantEnd[g%2]; w < 0 || i >= w || j < w {
						errs <- fmt.Sprintf("detector with chunk %d ended in [%d, %d); want the chunk holding sample %d", chunk, i, j, w-1)
					}
					return
				}
			}
			errs <- fmt.Sprintf("detector with chunk %d never ended", chunk)
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestCloseWhileRunning: Close waits for runs in progress; later runs fail
// with ErrClosed; nothing crashes.
func TestCloseWhileRunning(t *testing.T) {
	model(t) // skips when the runtime is missing
	m, err := Load(modelPath(t), []string{ortLibrary(t)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := noise(1, 0.1, 9)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s := m.NewStream()
			for i := 0; ; i = (i + WindowSamples) % (len(x) - WindowSamples) {
				if _, err := s.Prob(x[i : i+WindowSamples]); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("Prob: %v; want ErrClosed", err)
					}
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	d, err := m.NewDetector(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Feed(make([]float32, WindowSamples)); !errors.Is(err, ErrClosed) {
		t.Errorf("Feed after Close = %v; want ErrClosed", err)
	}
}

func TestLoadErrors(t *testing.T) {
	model(t) // the runtime must load for the model checks to be reached
	lib := []string{ortLibrary(t)}
	dir := t.TempDir()
	missing := filepath.Join(dir, ModelFile)
	for _, p := range []string{missing, ""} {
		_, err := Load(p, lib, 1)
		if !errors.Is(err, ErrModelMissing) || !strings.Contains(err.Error(), "scripts/fetch-models.sh") {
			t.Errorf("Load(%q) = %v; want ErrModelMissing naming scripts/fetch-models.sh", p, err)
		}
	}

	garbage := filepath.Join(dir, "garbage.onnx")
	if err := os.WriteFile(garbage, []byte("this is not an ONNX model"), 0o644); err != nil {
		t.Fatal(err)
	}
	bert := filepath.Join(dir, "bert.onnx") // a valid ONNX model, but not Silero's
	shape := embedtest.Shape{Vocab: 16, Hidden: 8, Layers: 1, Heads: 1, FF: 8, MaxPos: 8, TypeVocab: 1}
	if err := embedtest.WriteModel(bert, shape, 1); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{garbage, bert, dir} {
		if _, err := Load(p, lib, 1); !errors.Is(err, ErrInvalidModel) {
			t.Errorf("Load(%s) = %v; want ErrInvalidModel", filepath.Base(p), err)
		} else {
			t.Logf("%s: %v", filepath.Base(p), err)
		}
	}
}

// TestRuntimeMissing loads with a library path that does not exist, in a
// child process (the runtime is process-wide and the other tests load it).
func TestRuntimeMissing(t *testing.T) {
	if os.Getenv("VAD_TEST_CHILD") == "1" {
		model := filepath.Join(t.TempDir(), ModelFile)
		if err := os.WriteFile(model, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(model, []string{filepath.Join(t.TempDir(), onnxrt.LibraryName)}, 1)
		if !errors.Is(err, onnxrt.ErrRuntimeMissing) {
			t.Fatalf("Load = %v; want onnxrt.ErrRuntimeMissing", err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRuntimeMissing$", "-test.count=1")
	cmd.Env = append(os.Environ(), "VAD_TEST_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func TestConfig(t *testing.T) {
	m := model(t)
	d := newDetector(t, m, Config{})
	want := Config{Threshold: 0.5, NegThreshold: 0.35, MinSpeech: 200 * time.Millisecond, Silence: 700 * time.Millisecond}
	if got := d.Config(); math.Abs(float64(got.NegThreshold-want.NegThreshold)) > 1e-6 || got.Threshold != want.Threshold ||
		got.MinSpeech != want.MinSpeech || got.Silence != want.Silence {
		t.Errorf("defaults = %+v; want %+v", got, want)
	}
	if got := newDetector(t, m, Config{Threshold: 0.1}).Config().NegThreshold; got != 0.01 {
		t.Errorf("NegThreshold for Threshold 0.1 = %v; want 0.01", got)
	}
	for _, c := range []Config{{Threshold: 1}, {Threshold: -0.5}, {Threshold: float32(math.NaN())},
		{Threshold: 0.5, NegThreshold: 0.6}, {NegThreshold: -0.1}} {
		if _, err := m.NewDetector(c); err == nil {
			t.Errorf("NewDetector(%+v) accepted", c)
		}
	}
}

// FuzzDetectorFeed: any PCM (as a client could send it), in any chunking,
// never fails, panics or leaves the model's output range; Heard and the
// end only ever go from false to true within an utterance.
func FuzzDetectorFeed(f *testing.F) {
	f.Add([]byte{0, 0, 255, 127, 0, 128}, uint16(7))
	f.Add(bytes.Repeat([]byte{0x10, 0x40}, 4000), uint16(333))
	m := model(f)
	f.Fuzz(func(t *testing.T, pcm []byte, chunk uint16) {
		d, err := m.NewDetector(Config{})
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float32, len(pcm)/2)
		for i := range x {
			x[i] = float32(int16(uint16(pcm[2*i])|uint16(pcm[2*i+1])<<8)) / 32768
		}
		step := int(chunk%2048) + 1
		heard, ended := false, false
		for i := 0; i < len(x); i += step {
			e, err := d.Feed(x[i:min(len(x), i+step)])
			if err != nil {
				t.Fatalf("Feed: %v", err)
			}
			if (heard && !d.Heard()) || (ended && !e) {
				t.Fatal("Heard or the end went back to false within an utterance")
			}
			heard, ended = d.Heard(), e
		}
	})
}

// TestDetectorSpeechBounds: where the speech is, from the detector's own
// windows, so that the silence around it can be cut before whisper.
func TestDetectorSpeechBounds(t *testing.T) {
	m := model(t)
	for _, c := range []struct{ voice, text string }{{"en", english}, {"cmn", chinese}} {
		t.Run(c.voice, func(t *testing.T) {
			u := newUtterance(speech(t, c.voice, c.text), 1.2, 1.5)
			d := newDetector(t, m, Config{})
			if s, e, fed := d.Speech(); s != -1 || e != -1 || fed != 0 {
				t.Fatalf("before audio: %d %d %d", s, e, fed)
			}
			const chunk = 320
			for i := 0; i < len(u.x); i += chunk {
				if ended, err := d.Feed(u.x[i:min(i+chunk, len(u.x))]); err != nil || ended {
					break
				}
			}
			start, end, fed := d.Speech()
			t.Logf("speech %v-%v, detected %v-%v", ms(u.start), ms(u.end), ms(int(start)), ms(int(end)))
			if start < 0 || ms(int(start)-u.start).Abs() > 150*time.Millisecond {
				t.Errorf("speech starts at %v; detected %v", ms(u.start), ms(int(start)))
			}
			if ms(int(end)-u.end).Abs() > 250*time.Millisecond {
				t.Errorf("speech ends at %v; detected %v", ms(u.end), ms(int(end)))
			}
			if fed <= end {
				t.Errorf("fed %d samples, not past the end %d", fed, end)
			}
			d.Reset()
			if s, _, fed := d.Speech(); s != -1 || fed != 0 {
				t.Errorf("after Reset: start %d, fed %d", s, fed)
			}
		})
	}
}
