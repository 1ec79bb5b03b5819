package voice

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/conversation"
	"agent/pkg/nativetest"
)

// audioFrame is the header of a spoken reply.
type audioFrame struct {
	Type       string `json:"type"`
	Format     string `json:"format"`
	SampleRate int    `json:"sample_rate"`
	Bytes      int    `json:"bytes"`
}

func needEspeak(t *testing.T) {
	t.Helper()
	nativetest.EspeakNG(t)
}

// raw reads one frame of either kind.
func (c *client) raw() (int, []byte) {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(time.Minute))
	typ, data, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return typ, data
}

// audioHeader reads the audio frame announcing a spoken reply.
func (c *client) audioHeader() audioFrame {
	c.t.Helper()
	typ, data := c.raw()
	var a audioFrame
	if typ != websocket.TextMessage || json.Unmarshal(data, &a) != nil || a.Type != "audio" {
		c.t.Fatalf("got a %d frame %.200q; want the audio header", typ, data)
	}
	if a.Format != "wav" || a.SampleRate <= 0 || a.Bytes <= 44 {
		c.t.Fatalf("audio header %+v", a)
	}
	return a
}

// wav reads the binary frames of a spoken reply of n bytes.
func (c *client) wav(n int) []byte {
	c.t.Helper()
	var b []byte
	for len(b) < n {
		typ, data := c.raw()
		if typ != websocket.BinaryMessage {
			c.t.Fatalf("after %d of %d audio bytes: a %d frame %.200q", len(b), n, typ, data)
		}
		if len(data) > audioChunk {
			c.t.Fatalf("audio frame of %d bytes; want <= %d", len(data), audioChunk)
		}
		b = append(b, data...)
	}
	if len(b) != n {
		c.t.Fatalf("got %d audio bytes; announced %d", len(b), n)
	}
	return b
}

func checkWAV(t *testing.T, b []byte, rate int) {
	t.Helper()
	if string(b[:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " {
		t.Fatalf("not a WAV: % x", b[:16])
	}
	if got := int(binary.LittleEndian.Uint32(b[4:])); got != len(b)-8 {
		t.Errorf("RIFF size %d; want %d", got, len(b)-8)
	}
	if got := int(binary.LittleEndian.Uint32(b[24:])); got != rate {
		t.Errorf("WAV sample rate %d; announced %d", got, rate)
	}
	if got := binary.LittleEndian.Uint16(b[20:]); got != 1 {
		t.Errorf("WAV format %d; want PCM", got)
	}
	if string(b[36:40]) != "data" || int(binary.LittleEndian.Uint32(b[40:])) != len(b)-44 {
		t.Errorf("data chunk %q of %d bytes; want %d", b[36:40], binary.LittleEndian.Uint32(b[40:]), len(b)-44)
	}
	var loud bool
	for i := 44; i+1 < len(b); i += 2 {
		if v := int16(binary.LittleEndian.Uint16(b[i:])); v > 1000 || v < -1000 {
			loud = true
			break
		}
	}
	if !loud {
		t.Error("the WAV is silent")
	}
}

func TestSpokenReply(t *testing.T) {
	needEspeak(t)
	_, hs := newServer(t, Config{Turns: conversation.Turns(&fakeConv{}, nil, nil)})
	c := dial(t, hs)
	c.ready(map[string]any{"tts": true})
	for _, text := range []string{"turn the kitchen lights on", "and the hall"} {
		c.send(map[string]string{"type": "text", "text": text})
		if _, final := c.replies(); final != "you said: "+text {
			t.Fatalf("final reply %q", final)
		}
		a := c.audioHeader()
		checkWAV(t, c.wav(a.Bytes), a.SampleRate)
	}
	// Chinese through the cmn voice.
	c2 := dial(t, hs)
	c2.ready(map[string]any{"tts": true, "voice": "cmn", "user": "bob"})
	c2.send(map[string]string{"type": "text", "text": "打开厨房的灯"})
	c2.replies()
	a := c2.audioHeader()
	checkWAV(t, c2.wav(a.Bytes), a.SampleRate)
}

func TestSpokenRepliesOff(t *testing.T) {
	_, hs := newServer(t, Config{Turns: conversation.Turns(&fakeConv{}, nil, nil), TTS: TTSConfig{Command: "/nonexistent/espeak-ng"}})
	c := dial(t, hs)
	c.ready(nil) // no tts: never synthesised (the command would fail)
	for range 2 {
		c.send(map[string]string{"type": "text", "text": "hello"})
		c.replies() // a binary frame or an error here fails the test
	}
}

func TestSpokenReplyUnavailable(t *testing.T) {
	_, hs := newServer(t, Config{Turns: conversation.Turns(&fakeConv{}, nil, nil), TTS: TTSConfig{Command: "/nonexistent/espeak-ng"}})
	c := dial(t, hs)
	c.ready(map[string]any{"tts": true})
	for range 2 { // the connection stays usable
		c.send(map[string]string{"type": "text", "text": "hello"})
		c.replies()
		if f := c.expect("error", CodeTTSUnavailable); f.Fatal {
			t.Fatalf("tts_unavailable is fatal: %+v", f)
		}
	}
}

func TestSpokenReplyBadVoice(t *testing.T) {
	needEspeak(t)
	_, hs := newServer(t, Config{Turns: conversation.Turns(&fakeConv{}, nil, nil)})
	c := dial(t, hs)
	if f := c.hello(map[string]any{"tts": true, "voice": "--help"}); f.Code != CodeBadHello || !f.Fatal {
		t.Fatalf("voice --help answered %+v", f)
	}
	c = dial(t, hs)
	c.ready(map[string]any{"tts": true, "voice": "zz"}) // well-formed, unknown to espeak-ng
	c.send(map[string]string{"type": "text", "text": "hello"})
	c.replies()
	c.expect("error", CodeTTSUnavailable)
}

func TestCancelDuringSpokenReply(t *testing.T) {
	needEspeak(t)
	s, hs := newServer(t, Config{Turns: conversation.Turns(&fakeConv{}, nil, nil)})
	streaming := make(chan struct{})
	var held atomic.Bool
	s.chunkHook = func(ctx context.Context, i int) {
		if i == 1 && held.CompareAndSwap(false, true) { // the first reply stops after one frame until cancelled
			close(streaming)
			<-ctx.Done()
		}
	}
	c := dial(t, hs)
	c.ready(map[string]any{"tts": true})
	long := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 6)
	c.send(map[string]string{"type": "text", "text": long})
	c.replies()
	a := c.audioHeader()
	if a.Bytes <= 2*audioChunk {
		t.Fatalf("spoken reply of %d bytes: too short for the test", a.Bytes)
	}
	<-streaming
	c.send(map[string]string{"type": "cancel"})
	c.send(map[string]string{"type": "text", "text": "again"})
	got := 0
	for { // the frame queued before the cancel, then the next turn
		typ, data := c.raw()
		if typ == websocket.TextMessage {
			var f frame
			json.Unmarshal(data, &f)
			if f.Type != "reply" {
				t.Fatalf("after cancel: %s", data)
			}
			if f.Final {
				break
			}
			continue
		}
		got += len(data)
	}
	if got >= a.Bytes {
		t.Fatalf("cancel did not stop the audio: %d of %d bytes sent", got, a.Bytes)
	}
	a2 := c.audioHeader()
	checkWAV(t, c.wav(a2.Bytes), a2.SampleRate)
}
