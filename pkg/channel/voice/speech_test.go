//go:build whisper

package voice

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/gorilla/websocket"

	"agent/pkg/asr"
	"agent/pkg/asr/asrtest"
	"agent/pkg/audio"
	"agent/pkg/conversation"
)

// Speech through the whole channel: espeak-ng English and Mandarin, sent
// as a microphone would (100 ms frames at real-time pace, 48 kHz for one
// of them), ended by the Silero detector, with partial transcripts on.
// With the random-weight test model the words are meaningless: the test
// holds the protocol (partials only before the final, the final, the
// reply) and logs the timing. With TEST_WHISPER_MODEL pointing at a real
// multilingual model it also asserts the words.

var speechCases = []struct {
	name, voice, text string
	rate              int
	words             func(string) bool // on a real model's transcript
}{
	{"english", "en", "Please schedule a meeting with the design team tomorrow.", 16000,
		func(s string) bool {
			return strings.Contains(normalize(s), "meeting") && strings.Contains(normalize(s), "design team")
		}},
	{"chinese", "cmn", "请帮我明天上午十点安排会议。", 48000,
		func(s string) bool {
			return hanCount(s) >= 4 && (strings.Contains(s, "会议") || strings.Contains(s, "會議") || strings.Contains(s, "明天"))
		}},
}

func normalize(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) }), " ")
}

func hanCount(s string) int {
	n := 0
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			n++
		}
	}
	return n
}

// countingPartials wraps a recogniser and counts its partial calls.
type countingPartials struct {
	*asr.Recognizer
	mu            sync.Mutex
	calls, served int
}

func (c *countingPartials) TranscribePartial(ctx context.Context, s []float32) (asr.Result, error) {
	res, err := c.Recognizer.TranscribePartial(ctx, s)
	c.mu.Lock()
	c.calls++
	if err == nil {
		c.served++
	}
	c.mu.Unlock()
	return res, err
}

func TestSpeechEndToEnd(t *testing.T) {
	model, real := asrtest.RealModel(t), true
	if model == "" {
		model, real = asrtest.TinyModel(t, true), false
	}
	cfgASR := asr.Config{ModelPath: model, Language: "auto", Threads: asrtest.Threads, Workers: 2}
	if !real {
		cfgASR.MaxTokens = 8 // random weights never stop on their own
	}
	r, err := asr.New(cfgASR, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec := &countingPartials{Recognizer: r}
	for _, tc := range speechCases {
		t.Run(tc.name, func(t *testing.T) {
			speech := asrtest.SpeechInOrSkip(t, tc.voice, tc.text)
			in := append(append(silence(300*time.Millisecond, 16000), speech...), silence(1200*time.Millisecond, 16000)...)
			if tc.rate != 16000 {
				in = audio.Resample(in, 16000, tc.rate)
			}
			cfg := Config{ASR: func() Recognizer { return rec }, Turns: conversation.Turns(&fakeConv{}, nil, nil), VAD: sileroConfig(t), Defaults: partialsOn}
			_, hs := newServer(t, cfg)
			c := dial(t, hs)
			c.ready(map[string]any{"sample_rate": tc.rate})
			pcm := toPCM16(in)
			step := tc.rate / 10 * 2
			var sentAt atomic.Int64
			go func() {
				for i := 0; i < len(pcm); i += step {
					if c.ws.WriteMessage(websocket.BinaryMessage, pcm[i:min(len(pcm), i+step)]) != nil {
						return
					}
					sentAt.Store(time.Now().UnixNano())
					time.Sleep(100 * time.Millisecond)
				}
			}()
			var partials []string
			var final frame
			for {
				f, err := c.read(60 * time.Second)
				if err != nil {
					t.Fatalf("waiting for the transcript: %v", err)
				}
				if f.Type != "transcript" {
					t.Fatalf("unexpected %+v before the final transcript", f)
				}
				if !f.Final {
					partials = append(partials, f.Text)
					continue
				}
				final = f
				break
			}
			t.Logf("%s: %v of speech, %d partials %q, final %q (%v after the last frame was sent)",
				tc.name, audio.Duration(len(speech), 16000), len(partials), partials, final.Text, time.Since(time.Unix(0, sentAt.Load())).Round(time.Millisecond))
			if final.Text != "" {
				if _, reply := c.replies(); reply != "you said: "+final.Text {
					t.Errorf("reply %q", reply)
				}
			}
			if real && !tc.words(final.Text) {
				t.Errorf("%s with %s: transcript %q does not hold the spoken words (%q)", tc.name, model, final.Text, tc.text)
			}
		})
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.calls == 0 {
		t.Error("no partial transcription was attempted while speech streamed in")
	}
	t.Logf("partial transcriptions: %d attempted, %d completed", rec.calls, rec.served)
}

// TestRecognizerWords checks the words at the recogniser itself, when a
// real model is given (TEST_WHISPER_MODEL); the language is detected.
func TestRecognizerWords(t *testing.T) {
	model := asrtest.RealModel(t)
	if model == "" {
		t.Skip(asrtest.RealModelEnv + " is not set: words are asserted only with a real model (scripts/fetch-models.sh)")
	}
	r, err := asr.New(asr.Config{ModelPath: model, Language: "auto", Threads: asrtest.Threads}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range speechCases {
		res, err := r.Transcribe(context.Background(), asrtest.SpeechInOrSkip(t, tc.voice, tc.text))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %q (language %s, %v)", tc.name, res.Text, res.Language, res.Elapsed)
		if !tc.words(res.Text) {
			t.Errorf("%s: %q does not hold the spoken words (%q)", tc.name, res.Text, tc.text)
		}
		if want := map[string]string{"en": "en", "cmn": "zh"}[tc.voice]; r.Multilingual() && res.Language != want {
			t.Errorf("%s: language %s, want %s", tc.name, res.Language, want)
		}
	}
}
