package voice

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/asr"
	"agent/pkg/asr/asrtest"
	"agent/pkg/audio"
	"agent/pkg/conversation"
	"agent/pkg/nativetest"
	"agent/pkg/vad"
	"agent/pkg/vad/vadtest"
)

// partialsOn is a Config.Defaults with partial transcripts on.
func partialsOn() Defaults { return Defaults{Partials: true} }

// partialASR is a fakeASR that also transcribes partially: it answers
// "partial N" (N = the seconds of audio given), or waits for ctx when
// block is set.
type partialASR struct {
	fakeASR
	pmu       sync.Mutex
	partials  []int // seconds of audio of each partial call
	block     bool
	cancelled int
	busy      bool
}

func (p *partialASR) TranscribePartial(ctx context.Context, s []float32) (asr.Result, error) {
	secs := len(s) / asr.SampleRate
	p.pmu.Lock()
	p.partials = append(p.partials, secs)
	block, busy := p.block, p.busy
	p.pmu.Unlock()
	if busy {
		return asr.Result{}, asr.ErrBusy
	}
	if block {
		<-ctx.Done()
		p.pmu.Lock()
		p.cancelled++
		p.pmu.Unlock()
		return asr.Result{}, ctx.Err()
	}
	return asr.Result{Text: "partial " + strings.Repeat("x", secs)}, nil
}

func (p *partialASR) counts() (calls, cancelled int) {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	return len(p.partials), p.cancelled
}

// waitStarted waits until a partial transcription has been asked for.
func (p *partialASR) waitStarted(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if calls, _ := p.counts(); calls > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no partial transcription started")
		}
		time.Sleep(time.Millisecond)
	}
}

// streamPaced sends b in 100 ms frames, waiting for the server to read
// each (a partial needs the audio to arrive over time, as from a mic).
func (c *client) streamPaced(b []byte, rate int, each func()) {
	step := rate / 10 * 2
	for i := 0; i < len(b); i += step {
		c.pcm(b[i:min(len(b), i+step)], step)
		if each != nil {
			each()
		}
	}
}

func TestPartialTranscripts(t *testing.T) {
	rec := &partialASR{fakeASR: fakeASR{text: "final words"}}
	cfg := fakeConfig(rec, &fakeConv{})
	cfg.Defaults = partialsOn
	srv, hs := newServer(t, cfg)
	c := dial(t, hs)
	c.ready(nil)
	c.streamPaced(toPCM16(tone(5*time.Second, 16000, 300, 0.3)), 16000, func() { time.Sleep(5 * time.Millisecond) })
	// Partials arrive while speaking, growing; then the final one. (One
	// per second of audio while none is in flight: at least two of the
	// four chances, however slow the machine.)
	var partials []string
	for {
		f, err := c.read(10 * time.Second)
		if err != nil {
			t.Fatalf("waiting for partials: %v", err)
		}
		if f.Type != "transcript" {
			t.Fatalf("unexpected %+v", f)
		}
		if f.Final {
			t.Fatalf("a final transcript before end: %+v", f)
		}
		partials = append(partials, f.Text)
		if len(partials) == 2 {
			break
		}
	}
	for i := 1; i < len(partials); i++ {
		if len(partials[i]) <= len(partials[i-1]) {
			t.Errorf("partials do not grow: %q", partials)
		}
	}
	c.end()
	// Any partial still queued may come first, never after the final.
	for {
		f := c.expect("transcript")
		if f.Final {
			if f.Text != "final words" {
				t.Errorf("final transcript %q", f.Text)
			}
			break
		}
	}
	c.replies()
	if calls, _ := rec.counts(); calls < 2 {
		t.Errorf("%d partial calls", calls)
	}
	if st := srv.Stats(); st.Partials < 2 || st.Utterances != 1 || st.Connections != 1 || st.Silero != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestPartialsOffAndUnsupported(t *testing.T) {
	rec := &partialASR{fakeASR: fakeASR{text: "final words"}}
	cfg := fakeConfig(rec, &fakeConv{})
	cfg.Defaults = partialsOn
	_, hs := newServer(t, cfg)
	c := dial(t, hs)
	c.ready(map[string]any{"partials": false})
	c.streamPaced(toPCM16(tone(2500*time.Millisecond, 16000, 300, 0.3)), 16000, func() { time.Sleep(2 * time.Millisecond) })
	c.end()
	if f := c.expect("transcript"); !f.Final {
		t.Fatalf("partial sent to a client that said partials:false: %+v", f)
	}
	c.replies()
	if calls, _ := rec.counts(); calls != 0 {
		t.Errorf("%d partial transcriptions for a client that turned them off", calls)
	}

	// A recogniser without TranscribePartial: no partials, no harm.
	plain := &fakeASR{text: "plain"}
	cfg2 := fakeConfig(plain, &fakeConv{})
	cfg2.Defaults = partialsOn
	_, hs2 := newServer(t, cfg2)
	c2 := dial(t, hs2)
	c2.ready(nil)
	c2.streamPaced(toPCM16(tone(2500*time.Millisecond, 16000, 300, 0.3)), 16000, nil)
	c2.end()
	if f := c2.expect("transcript"); !f.Final || f.Text != "plain" {
		t.Fatalf("transcript %+v", f)
	}
}

func TestPartialCancelledAtEnd(t *testing.T) {
	rec := &partialASR{fakeASR: fakeASR{text: "final words"}, block: true}
	cfg := fakeConfig(rec, &fakeConv{})
	cfg.Defaults = partialsOn
	_, hs := newServer(t, cfg)
	c := dial(t, hs)
	c.ready(nil)
	c.streamPaced(toPCM16(tone(1500*time.Millisecond, 16000, 300, 0.3)), 16000, nil)
	rec.waitStarted(t)
	c.end()
	if f := c.expect("transcript"); !f.Final || f.Text != "final words" {
		t.Fatalf("after end: %+v, want the final transcript (the partial in flight must not delay or precede it)", f)
	}
	c.replies()
	if _, cancelled := rec.counts(); cancelled != 1 {
		t.Errorf("%d partials cancelled, want 1", cancelled)
	}

	// cancel drops a partial in flight too.
	rec.pmu.Lock()
	rec.partials = nil
	rec.pmu.Unlock()
	c.streamPaced(toPCM16(tone(1500*time.Millisecond, 16000, 300, 0.3)), 16000, nil)
	rec.waitStarted(t)
	c.send(map[string]string{"type": "cancel"})
	c.send(map[string]string{"type": "text", "text": "ping"})
	if _, final := c.replies(); final != "you said: ping" {
		t.Errorf("reply after cancel %q", final)
	}
	if _, cancelled := rec.counts(); cancelled != 2 {
		t.Errorf("%d partials cancelled, want 2", cancelled)
	}
}

func TestSpokenRepliesByConfig(t *testing.T) {
	needEspeak(t)
	_, hs := newServer(t, Config{Turns: conversation.Turns(&fakeConv{}, nil, nil), Defaults: func() Defaults { return Defaults{TTS: true, TTSVoice: "en-us"} }})
	c := dial(t, hs)
	c.ready(nil) // no "tts": the configured default speaks
	c.send(map[string]string{"type": "text", "text": "lights on"})
	c.replies()
	a := c.audioHeader()
	checkWAV(t, c.wav(a.Bytes), a.SampleRate)

	off := dial(t, hs)
	off.ready(map[string]any{"tts": false, "user": "bob"})
	off.send(map[string]string{"type": "text", "text": "lights off"})
	off.replies()
	off.send(map[string]string{"type": "text", "text": "again"})
	if _, final := off.replies(); final != "you said: again" { // an audio frame in between fails here
		t.Errorf("final %q", final)
	}
}

// admitter is a Config.Admit that records what it was asked.
type admitter struct {
	mu    sync.Mutex
	asked [][]string
	a     Admission
	err   error
}

func (a *admitter) admit(_ context.Context, principals []string) (Admission, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, principals)
	return a.a, a.err
}

func TestDMPolicy(t *testing.T) {
	cases := []struct {
		name string
		a    Admission
		err  error
		code string // "" = ready
		msg  string
	}{
		{"allowed", Admission{Allowed: true}, nil, "", ""},
		{"pairing", Admission{Code: "ABCD2345"}, nil, CodeNotPaired, "agentctl pair approve ABCD2345"},
		{"refused", Admission{}, nil, CodeForbidden, "dm_policy"},
		{"store error", Admission{}, errors.New("database is locked"), CodeInternal, "try again"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			adm := &admitter{a: tc.a, err: tc.err}
			cfg := fakeConfig(&fakeASR{}, &fakeConv{})
			cfg.Admit = adm.admit
			_, hs := newServer(t, cfg)
			c := dial(t, hs)
			f := c.hello(map[string]any{"device": "kitchen-panel", "user": "alice"})
			if tc.code == "" {
				if f.Type != "ready" {
					t.Fatalf("%+v, want ready", f)
				}
			} else {
				if f.Type != "error" || f.Code != tc.code || !f.Fatal || !strings.Contains(f.Message, tc.msg) {
					t.Fatalf("%+v, want fatal %s mentioning %q", f, tc.code, tc.msg)
				}
				if code := c.closed(); code != 1008 && code != 1011 { // policy violation, internal error
					t.Errorf("close code %d", code)
				}
				if strings.Contains(f.Message, "database") {
					t.Errorf("internal error leaked to the client: %q", f.Message)
				}
			}
			if len(adm.asked) != 1 || strings.Join(adm.asked[0], ",") != "voice:kitchen-panel,voice:alice" {
				t.Errorf("Admit asked %q", adm.asked)
			}
		})
	}
}

// sileroConfig is a VADConfig on the real Silero model.
func sileroConfig(t *testing.T) VADConfig {
	m, err := vad.Load(vadtest.ModelPath(t), []string{vadtest.ORTLibrary(t)}, 1)
	if err != nil {
		t.Fatalf("vad.Load: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return VADConfig{Silero: func() *vad.Model { return m }}
}

// TestSileroEndsSpeechNotNoise: with Silero, espeak speech followed by
// silence ends the utterance by itself (at 16 kHz and at 48 kHz), while
// loud noise — which the energy detector takes for speech — is not
// speech: it never ends an utterance and, ended by hand, is not
// recognised.
func TestSileroEndsSpeechNotNoise(t *testing.T) {
	speech := asrtest.SpeechOrSkip(t, "Please turn on the kitchen light.")
	for _, rate := range []int{16000, 48000} {
		rec := &fakeASR{text: "the kitchen light"}
		cfg := fakeConfig(rec, &fakeConv{})
		cfg.VAD = sileroConfig(t)
		_, hs := newServer(t, cfg)
		c := dial(t, hs)
		c.ready(map[string]any{"sample_rate": rate})
		in := speech
		if rate != 16000 {
			in = audio.Resample(speech, 16000, rate)
		}
		c.pcm(toPCM16(append(append(silence(300*time.Millisecond, rate), in...), silence(1500*time.Millisecond, rate)...)), rate/50*2)
		if f := c.expect("transcript"); !f.Final || f.Text != "the kitchen light" {
			t.Fatalf("%d Hz: %+v; want the utterance ended by Silero without an end frame", rate, f)
		}
		c.replies()
	}

	rec := &fakeASR{text: "noise"}
	cfg := fakeConfig(rec, &fakeConv{})
	cfg.VAD = sileroConfig(t)
	cfg.VAD.Level = 0.01
	_, hs := newServer(t, cfg)
	c := dial(t, hs)
	c.ready(nil)
	c.pcm(toPCM16(append(noise(3*time.Second, 16000, 0.3, 7), silence(1500*time.Millisecond, 16000)...)), 640)
	c.end()
	if f := c.expect("transcript"); !f.Final || f.Text != "" {
		t.Fatalf("noise: %+v; want an empty final transcript (nothing heard)", f)
	}
	if n := rec.numCalls(); n != 0 {
		t.Errorf("noise went to the recogniser %d times", n)
	}

	// The energy detector, by contrast, hears the noise.
	erec := &fakeASR{text: "noise"}
	_, ehs := newServer(t, fakeConfig(erec, &fakeConv{}))
	e := dial(t, ehs)
	e.ready(nil)
	e.pcm(toPCM16(noise(3*time.Second, 16000, 0.3, 7)), 640)
	e.end()
	if f := e.expect("transcript"); f.Text != "noise" {
		t.Fatalf("energy detector on noise: %+v", f)
	}
}

// TestEncodedUtterances: a hello with "format" sends compressed audio (a
// browser's Opus/WebM here), decoded by ffmpeg at end.
func TestEncodedUtterances(t *testing.T) {
	nativetest.FFmpeg(t)
	dir := t.TempDir()
	var wav bytes.Buffer
	audio.WriteWAV(&wav, tone(2*time.Second, 48000, 300, 0.3), 48000, 1)
	os.WriteFile(filepath.Join(dir, "in.wav"), wav.Bytes(), 0o644)
	out := filepath.Join(dir, "out.webm")
	if b, err := exec.Command("ffmpeg", "-nostdin", "-loglevel", "error", "-i", filepath.Join(dir, "in.wav"), "-c:a", "libopus", out).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v %s", err, b)
	}
	webm, _ := os.ReadFile(out)

	rec := &fakeASR{text: "from the browser"}
	cfg := fakeConfig(rec, &fakeConv{})
	cfg.Limits.MaxEncoded = 64 << 10
	_, hs := newServer(t, cfg)
	c := dial(t, hs)
	c.ready(map[string]any{"format": "webm"})
	c.pcm(webm, 1000) // any chunking, odd sizes included
	c.end()
	if f := c.expect("transcript"); !f.Final || f.Text != "from the browser" {
		t.Fatalf("transcript %+v", f)
	}
	c.replies()
	if d := audio.Duration(len(rec.calls[0]), asr.SampleRate); d < 1900*time.Millisecond || d > 2200*time.Millisecond {
		t.Errorf("decoded %v of audio, want about 2 s", d)
	}
	// Garbage: bad_audio, the connection stays.
	c.pcm([]byte("not a webm file at all, just text"), 7)
	c.end()
	if f := c.expect("error", CodeBadAudio); f.Fatal {
		t.Fatalf("%+v", f)
	}
	// Too much: too_long, then the next utterance works again.
	c.pcm(bytes.Repeat([]byte{1}, 70<<10), 16<<10)
	c.expect("error", CodeTooLong)
	c.end()
	c.pcm(webm, 4096)
	c.end()
	if f := c.expect("transcript"); f.Text != "from the browser" {
		t.Fatalf("after too_long: %+v", f)
	}
	c.replies()
	// An unknown format is refused at hello.
	if f := dial(t, hs).hello(map[string]any{"format": "midi"}); f.Code != CodeBadHello || !f.Fatal {
		t.Errorf("format midi: %+v", f)
	}
}
