package vad

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"agent/pkg/audio"
	"agent/pkg/nativetest"
	"agent/pkg/onnxrt"
	"agent/pkg/vad/vadtest"
)

var (
	requireNative = vadtest.RequireNative
	ortLibrary    = vadtest.ORTLibrary
	modelPath     = vadtest.ModelPath
)

// shared is the Model most tests use, loaded once for the test binary
// (TestMain closes it).
var shared struct {
	once  sync.Once
	model *Model
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.model != nil {
		shared.model.Close()
	}
	os.Exit(code)
}

// model returns the shared Model.
func model(t testing.TB) *Model {
	t.Helper()
	lib, path := ortLibrary(t), modelPath(t)
	shared.once.Do(func() { shared.model, shared.err = Load(path, []string{lib}, 1) })
	if errors.Is(shared.err, onnxrt.ErrRuntimeMissing) {
		requireNative(t, "ONNX Runtime ("+shared.err.Error()+")", "`make deps` (and cgo)")
	}
	if shared.err != nil {
		t.Fatalf("Load: %v", shared.err)
	}
	return shared.model
}

// speech synthesises text with espeak-ng in the given voice and returns
// it at 16 kHz with espeak's leading and trailing silence trimmed.
func speech(t testing.TB, voice, text string) []float32 {
	t.Helper()
	bin := nativetest.EspeakNG(t)
	wav := filepath.Join(t.TempDir(), "speech.wav")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-v", voice, "-w", wav, text)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("espeak-ng: %v\n%s", err, stderr.String())
	}
	f, err := os.Open(wav)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pcm, rate, channels, err := audio.ReadWAV(f)
	if err != nil {
		t.Fatal(err)
	}
	s := audio.Resample(audio.Mono(pcm, channels), rate, SampleRate)
	first, last := -1, -1
	for i, v := range s {
		if math.Abs(float64(v)) > 0.01 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 || last-first < SampleRate/10 {
		t.Fatalf("espeak-ng -v %s produced no usable speech (%d samples)", voice, len(s))
	}
	return s[first : last+1]
}

// silence is d seconds of digital silence.
func silence(sec float64) []float32 { return make([]float32, int(sec*SampleRate)) }

// noise is sec seconds of uniform white noise with the given RMS level.
func noise(sec, level float64, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, int(sec*SampleRate))
	a := level * math.Sqrt(3) // uniform in [-a, a] has RMS a/√3
	for i := range out {
		out[i] = float32((2*r.Float64() - 1) * a)
	}
	return out
}

// tone is sec seconds of a sine at hz with peak amplitude amp.
func tone(sec, hz, amp float64) []float32 {
	out := make([]float32, int(sec*SampleRate))
	for i := range out {
		out[i] = float32(amp * math.Sin(2*math.Pi*hz*float64(i)/SampleRate))
	}
	return out
}

// concat joins pieces of audio.
func concat(parts ...[]float32) []float32 {
	var out []float32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// probs runs a fresh stream over every whole window of x.
func probs(t testing.TB, m *Model, x []float32) []float32 {
	t.Helper()
	s := m.NewStream()
	var out []float32
	for i := 0; i+WindowSamples <= len(x); i += WindowSamples {
		p, err := s.Prob(x[i : i+WindowSamples])
		if err != nil {
			t.Fatalf("Prob at window %d: %v", i/WindowSamples, err)
		}
		out = append(out, p)
	}
	return out
}

// stats summarises probabilities: mean, and the fraction at or above 0.5.
func stats(p []float32) (mean, above float64) {
	for _, v := range p {
		mean += float64(v)
		if v >= 0.5 {
			above++
		}
	}
	n := float64(max(len(p), 1))
	return mean / n, above / n
}
