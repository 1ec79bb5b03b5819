//go:build whisper

package asr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/asr/asrtest"
)

// speechText is about three seconds of espeak-ng speech.
const speechText = "Please schedule a meeting with the design team tomorrow at ten."

// speech3s is speechText as exactly three seconds of 16 kHz samples.
func speech3s(tb testing.TB) []float32 {
	tb.Helper()
	s := asrtest.SpeechOrSkip(tb, speechText)
	out := make([]float32, 3*SampleRate)
	copy(out, s)
	return out
}

// repeat returns d of audio made by looping s.
func repeat(s []float32, d time.Duration) []float32 {
	out := make([]float32, int(d/time.Millisecond)*SampleRate/1000)
	for i := range out {
		out[i] = s[i%len(s)]
	}
	return out
}

func newRecognizer(tb testing.TB, multilingual bool, lang string) *Recognizer {
	tb.Helper()
	r, err := New(Config{ModelPath: asrtest.TinyModel(tb, multilingual), Language: lang, Threads: asrtest.Threads}, nil)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

func TestNewLoadsModels(t *testing.T) {
	for _, multi := range []bool{false, true} {
		r := newRecognizer(t, multi, "auto")
		if r.Multilingual() != multi {
			t.Errorf("Multilingual() = %v for the multilingual=%v model", r.Multilingual(), multi)
		}
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	tiny := asrtest.TinyModel(t, false)
	multi := asrtest.TinyModel(t, true)
	missing := filepath.Join(dir, "ggml-base.bin")

	badMagic := filepath.Join(dir, "magic.bin")
	head := copyPrefix(t, tiny, badMagic, 1<<20)
	copy(head, "GGUF")
	if err := os.WriteFile(badMagic, head, 0o644); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.bin")
	copyPrefix(t, tiny, truncated, asrtest.TinyModelSize(false)-4096)

	tests := []struct {
		name string
		cfg  Config
		err  error
		want []string
	}{
		{"missing", Config{ModelPath: missing}, ErrModelMissing, []string{missing, "scripts/fetch-models.sh", "make models"}},
		{"no path", Config{}, ErrModelMissing, []string{"fetch-models.sh"}},
		{"wrong magic", Config{ModelPath: badMagic}, ErrModelInvalid, []string{badMagic, "bad magic"}},
		{"truncated", Config{ModelPath: truncated}, ErrModelInvalid, []string{truncated, "truncated"}},
		{"directory", Config{ModelPath: dir}, ErrModelInvalid, []string{dir}},
		{"english-only model, chinese", Config{ModelPath: tiny, Language: "zh"}, ErrUnsupportedLanguage, []string{"English-only"}},
		{"unknown language", Config{ModelPath: multi, Language: "xx"}, ErrUnsupportedLanguage, []string{`"xx"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.cfg, nil)
			if r != nil || !errors.Is(err, tt.err) {
				t.Fatalf("New = %v, %v; want nil, %v", r, err, tt.err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := New(Config{ModelPath: tiny, Threads: -2}, nil); err == nil {
		t.Error("New(threads -2) succeeded")
	}
}

// copyPrefix writes the first n bytes of src to dst and returns them.
func copyPrefix(tb testing.TB, src, dst string, n int64) []byte {
	tb.Helper()
	f, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(f, b); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestTranscribeSpeech(t *testing.T) {
	audio := speech3s(t)
	tests := []struct {
		name     string
		multi    bool
		lang     string
		wantLang string // "" = any detected code
	}{
		{"tiny.en", false, "auto", "en"},
		{"tiny.en, en", false, "en", "en"},
		{"tiny, auto", true, "auto", ""},
		{"tiny, zh", true, "zh", "zh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecognizer(t, tt.multi, tt.lang)
			res, err := r.Transcribe(context.Background(), audio)
			if err != nil {
				t.Fatalf("Transcribe: %v", err)
			}
			checkResult(t, res, 3*time.Second)
			if tt.wantLang != "" && res.Language != tt.wantLang {
				t.Errorf("Language = %q, want %q", res.Language, tt.wantLang)
			}
			if res.Language == "" {
				t.Error("Language is empty")
			}
			t.Logf("%s: %v for %v of audio (random weights: the text means nothing): %.60q",
				tt.name, res.Elapsed, res.AudioDuration, res.Text)
		})
	}
}

// checkResult checks what a random model's result can be held to.
func checkResult(t *testing.T, res Result, audio time.Duration) {
	t.Helper()
	if res.AudioDuration != audio {
		t.Errorf("AudioDuration = %v, want %v", res.AudioDuration, audio)
	}
	if res.Elapsed <= 0 {
		t.Errorf("Elapsed = %v", res.Elapsed)
	}
	var joined []string
	for i, s := range res.Segments {
		if s.Start < 0 || s.End < s.Start || s.End > audio {
			t.Errorf("segment %d spans %v..%v, outside 0..%v", i, s.Start, s.End, audio)
		}
		if s.Text == "" || s.Text != strings.TrimSpace(s.Text) {
			t.Errorf("segment %d text %q is empty or untrimmed", i, s.Text)
		}
		joined = append(joined, s.Text)
	}
	if want := strings.Join(joined, " "); res.Text != want {
		t.Errorf("Text %q is not the segments joined (%q)", res.Text, want)
	}
}

func TestTranscribeLengths(t *testing.T) {
	speech := asrtest.SpeechOrSkip(t, speechText)
	r := newRecognizer(t, false, "en")
	for _, d := range []time.Duration{50 * time.Millisecond, 700 * time.Millisecond, 12 * time.Second, 40 * time.Second} {
		if testing.Short() && d > 12*time.Second {
			continue
		}
		res, err := r.Transcribe(context.Background(), repeat(speech, d))
		if err != nil {
			t.Fatalf("Transcribe(%v): %v", d, err)
		}
		checkResult(t, res, d)
		t.Logf("%v of audio: %v, %d segments", d, res.Elapsed, len(res.Segments))
	}
}

// TestTranscribeIsolated: a call's result does not depend on earlier calls
// of other lengths (encoder context and decoder state are per call), nor on
// an aborted call.
func TestTranscribeIsolated(t *testing.T) {
	audio := speech3s(t)
	speech := asrtest.SpeechOrSkip(t, speechText)
	for _, multi := range []bool{false, true} {
		r := newRecognizer(t, multi, "auto")
		first, err := r.Transcribe(context.Background(), audio)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Transcribe(context.Background(), repeat(speech, 20*time.Second)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err = r.Transcribe(ctx, repeat(speech, 25*time.Second))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Transcribe past its deadline: %v, want DeadlineExceeded", err)
		}
		again, err := r.Transcribe(context.Background(), audio)
		if err != nil {
			t.Fatal(err)
		}
		// Texts are not compared: the temperature fallback that random
		// weights always reach samples from decoder 0's RNG, which
		// whisper.cpp seeds once per state, so it differs call to call.
		if again.Language != first.Language || again.AudioDuration != first.AudioDuration || (first.Text == "") != (again.Text == "") {
			t.Errorf("multilingual=%v: same audio gave %q (%s), then %q (%s) after other calls",
				multi, first.Text, first.Language, again.Text, again.Language)
		}
	}
}

func TestTranscribeBadAudio(t *testing.T) {
	r := newRecognizer(t, false, "en")
	nan := make([]float32, SampleRate)
	nan[100] = float32(math.NaN())
	inf := make([]float32, SampleRate)
	inf[5] = float32(math.Inf(-1))
	for name, in := range map[string][]float32{
		"empty":         nil,
		"over MaxAudio": make([]float32, int(MaxAudio/time.Second)*SampleRate+1),
		"NaN":           nan,
		"-Inf":          inf,
	} {
		if _, err := r.Transcribe(context.Background(), in); !errors.Is(err, ErrBadAudio) {
			t.Errorf("%s: Transcribe error = %v, want ErrBadAudio", name, err)
		}
	}
}

func TestTranscribeContext(t *testing.T) {
	speech := asrtest.SpeechOrSkip(t, speechText)
	r := newRecognizer(t, true, "auto")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Transcribe(ctx, speech); !errors.Is(err, context.Canceled) {
		t.Errorf("Transcribe(cancelled ctx) = %v, want context.Canceled", err)
	}

	// Cancelled while whisper.cpp runs: 25 s of audio takes seconds.
	ctx, cancel = context.WithCancel(context.Background())
	timer := time.AfterFunc(150*time.Millisecond, cancel)
	defer timer.Stop()
	start := time.Now()
	_, err := r.Transcribe(ctx, repeat(speech, 25*time.Second))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Transcribe cancelled mid-way = %v, want context.Canceled", err)
	}
	t.Logf("cancelled call returned %v after the start (cancel at 150ms)", time.Since(start))

	// Still usable afterwards.
	if _, err := r.Transcribe(context.Background(), speech); err != nil {
		t.Fatalf("Transcribe after a cancelled call: %v", err)
	}
}

func TestTranscribeConcurrent(t *testing.T) {
	audio := speech3s(t)
	r := newRecognizer(t, false, "en")
	want, err := r.Transcribe(context.Background(), audio)
	if err != nil {
		t.Fatal(err)
	}
	const workers = 4
	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				res, err := r.Transcribe(context.Background(), audio)
				if err != nil {
					errs <- err
					return
				}
				// Texts are not compared: with random weights greedy decoding
				// fails and whisper.cpp's temperature fallback samples from
				// the state's RNG, which advances from call to call.
				if res.AudioDuration != want.AudioDuration || res.Language != want.Language {
					errs <- fmt.Errorf("concurrent call gave %v/%s, want %v/%s", res.AudioDuration, res.Language, want.AudioDuration, want.Language)
				}
			}
		}()
	}
	// A caller whose context ends while it waits for its turn gives up.
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		if _, err := r.Transcribe(ctx, audio); !errors.Is(err, context.DeadlineExceeded) {
			errs <- errors.New("waiting caller past its deadline: " + errString(err))
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func TestClose(t *testing.T) {
	speech := asrtest.SpeechOrSkip(t, speechText)
	r, err := New(Config{ModelPath: asrtest.TinyModel(t, false), Threads: asrtest.Threads}, nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		_, err := r.Transcribe(context.Background(), repeat(speech, 25*time.Second))
		done <- err
	}()
	<-started
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The running call was aborted (or had not started, or had finished).
	if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
		t.Errorf("Transcribe during Close = %v, want nil or ErrClosed", err)
	}
	if _, err := r.Transcribe(context.Background(), speech); !errors.Is(err, ErrClosed) {
		t.Errorf("Transcribe after Close = %v, want ErrClosed", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// recorder is a slog.Handler that keeps messages.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recorder) WithGroup(string) slog.Handler            { return h }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	if r.Level != slog.LevelDebug {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.msgs = append(h.msgs, "NOT DEBUG: "+r.Message)
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}

func TestWhisperLogRouted(t *testing.T) {
	h := &recorder{}
	r, err := New(Config{ModelPath: asrtest.TinyModel(t, false)}, slog.New(h))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	var sawLoad bool
	for _, m := range h.msgs {
		if strings.HasPrefix(m, "NOT DEBUG") {
			t.Errorf("logged above debug: %s", m)
		}
		if strings.Contains(m, "whisper_model_load") {
			sawLoad = true
		}
	}
	if !sawLoad {
		t.Errorf("whisper.cpp's load log did not reach slog; got %d messages", len(h.msgs))
	}
}

func TestGGMLBlockMatchesGGML(t *testing.T) {
	for ttype := int32(0); ttype < 42; ttype++ {
		elems, size, ok := ggmlBlock(ttype)
		if !ok {
			continue
		}
		gElems, gSize := ggmlTypeBlock(ttype)
		if elems != gElems || size != gSize {
			t.Errorf("type %d: ggmlBlock = %d elements in %d bytes, ggml says %d in %d", ttype, elems, size, gElems, gSize)
		}
	}
}

// BenchmarkTranscribe3s: three seconds of espeak-ng speech through the
// random tiny.en model on two threads. rtf is wall time over audio time.
// Random weights decode to the token budget with a fallback pass, so this
// is the worst case for a tiny model, not a typical utterance.
func BenchmarkTranscribe3s(b *testing.B) {
	audio := speech3s(b)
	r, err := New(Config{ModelPath: asrtest.TinyModel(b, false), Language: "en", Threads: 2}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Transcribe(context.Background(), audio); err != nil { // warm up
		b.Fatal(err)
	}
	var elapsed, audioDur time.Duration
	for b.Loop() {
		res, err := r.Transcribe(context.Background(), audio)
		if err != nil {
			b.Fatal(err)
		}
		elapsed += res.Elapsed
		audioDur += res.AudioDuration
	}
	b.ReportMetric(elapsed.Seconds()/audioDur.Seconds(), "rtf")
}

// waitIdle polls until n workers of r are idle (a call has taken or given
// back its worker).
func waitIdle(t *testing.T, r *Recognizer, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(r.idle) != n {
		if time.Now().After(deadline) {
			t.Fatalf("idle workers stayed %d, want %d", len(r.idle), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWorkersSizedByBudget(t *testing.T) {
	model := asrtest.TinyModel(t, false)
	auto, err := New(Config{ModelPath: model, Threads: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer auto.Close()
	size := auto.StateBytes()
	// tiny's caches and compute buffers: tens of MB, whatever the build.
	if size < 5<<20 || size > 400<<20 {
		t.Fatalf("StateBytes = %d, not a plausible size for tiny", size)
	}
	want := max(1, min(maxAutoWorkers, runtime.NumCPU(), int(DefaultMemoryBudget/size)))
	if auto.Workers() != want {
		t.Errorf("automatic Workers with 1 thread = %d, want %d (one per core, within the budget)", auto.Workers(), want)
	}
	t.Logf("tiny: %d workers of %.1f MB", auto.Workers(), float64(size)/1e6)

	tight, err := New(Config{ModelPath: model, Threads: 1, MemoryBudget: size + size/2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tight.Close()
	if tight.Workers() != 1 {
		t.Errorf("Workers with a budget of 1.5 states = %d, want 1", tight.Workers())
	}
	whole, err := New(Config{ModelPath: model, Threads: runtime.NumCPU()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	if whole.Workers() != 1 {
		t.Errorf("Workers with threads = NumCPU: %d, want 1", whole.Workers())
	}
	fixed, err := New(Config{ModelPath: model, Threads: 1, Workers: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fixed.Close()
	if fixed.Workers() != 3 {
		t.Errorf("Workers with workers = 3: %d", fixed.Workers())
	}
	if _, err := New(Config{ModelPath: model, Workers: 17}, nil); err == nil {
		t.Error("workers = 17 accepted")
	}
}

// poolRig is a recogniser with the given threads and workers, and 8 s of
// speech: a full-budget call on it takes about a second.
func poolRig(t *testing.T, threads, workers int) (*Recognizer, []float32) {
	t.Helper()
	speech := asrtest.SpeechOrSkip(t, speechText)
	r, err := New(Config{ModelPath: asrtest.TinyModel(t, false), Threads: threads, Workers: workers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, repeat(speech, 8*time.Second)
}

// inBackground runs call(long) and, once it holds its worker (idle
// workers left), returns its result.
func inBackground(t *testing.T, r *Recognizer, idle int, call func(context.Context, []float32) (Result, error), long []float32) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), long)
		done <- err
	}()
	waitIdle(t, r, idle)
	return done
}

// TestCPUGate: two workers whose threads together outnumber the cores do
// not run at once (ggml's spinning threads would convoy): while one call
// holds the CPU, a partial finds it busy although a worker is idle.
func TestCPUGate(t *testing.T) {
	r, speech := poolRig(t, runtime.NumCPU(), 2)
	long := inBackground(t, r, 1, r.Transcribe, speech)
	if _, err := r.TranscribePartial(context.Background(), speech3s(t)); !errors.Is(err, ErrBusy) {
		t.Errorf("partial while the CPU is taken = %v, want ErrBusy", err)
	}
	// A second full call waits for the CPU, then runs.
	if _, err := r.Transcribe(context.Background(), speech3s(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-long; err != nil {
		t.Fatal(err)
	}
}

func TestTwoSpeakersDoNotQueue(t *testing.T) {
	r, speech := poolRig(t, 1, 2)
	long := inBackground(t, r, 1, r.Transcribe, speech)
	// The second speaker gets the other worker while the first one runs.
	if _, err := r.Transcribe(context.Background(), speech3s(t)); err != nil {
		t.Fatalf("second speaker: %v", err)
	}
	select {
	case err := <-long:
		// With two cores the second call must not have waited for the
		// first (about a second of work against its ~0.3 s).
		if runtime.NumCPU() >= 2 {
			t.Errorf("the 8 s call (%v) ended before the 3 s one that started after it: the second speaker queued", err)
		}
		return
	default: // the 3 s call finished while the 8 s one still ran
	}
	if err := <-long; err != nil {
		t.Fatal(err)
	}
}

func TestPartialNeverWaits(t *testing.T) {
	r, speech := poolRig(t, asrtest.Threads, 1)
	res, err := r.TranscribePartial(context.Background(), speech3s(t))
	if err != nil || res.AudioDuration != 3*time.Second {
		t.Fatalf("partial on an idle recognizer = %+v, %v", res, err)
	}
	long := inBackground(t, r, 0, r.Transcribe, speech)
	start := time.Now()
	if _, err := r.TranscribePartial(context.Background(), speech3s(t)); !errors.Is(err, ErrBusy) {
		t.Fatalf("partial while the only worker is busy = %v, want ErrBusy", err)
	}
	t.Logf("busy partial answered in %v", time.Since(start))
	if err := <-long; err != nil {
		t.Fatal(err)
	}
}

func TestFullPreemptsPartial(t *testing.T) {
	r, speech := poolRig(t, asrtest.Threads, 1)
	partial := inBackground(t, r, 0, r.TranscribePartial, speech)
	start := time.Now()
	res, err := r.Transcribe(context.Background(), speech3s(t))
	if err != nil {
		t.Fatalf("full transcription behind a partial: %v", err)
	}
	perr := <-partial
	if !errors.Is(perr, ErrPreempted) {
		t.Fatalf("the partial ended with %v, want ErrPreempted", perr)
	}
	t.Logf("full call behind a preempted partial took %v (its own work %v)", time.Since(start), res.Elapsed)
	// The worker is clean afterwards: partials and full calls still run.
	if _, err := r.TranscribePartial(context.Background(), speech3s(t)); err != nil {
		t.Fatalf("partial after a preemption: %v", err)
	}
}

func TestStateLineMB(t *testing.T) {
	for line, want := range map[string]float64{
		"whisper_init_state: kv self size  =    3.15 MB":           3.15,
		"whisper_init_state: compute buffer (decode) =   98.14 MB": 98.14,
		"whisper_model_load: model size    =   75.00 MB":           0,
		"whisper_init_state: kv self size  =   nan MB":             0,
		"whisper_init_state: something":                            0,
	} {
		if got := stateLineMB(line); math.Abs(got-want) > 1e-9 && !(math.IsNaN(got) && want == 0) {
			t.Errorf("stateLineMB(%q) = %v, want %v", line, got, want)
		}
	}
}
