package voice

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/asr"
	"agent/pkg/channel"
	"agent/pkg/conversation"
	"agent/pkg/turn"
)

// frame is any server frame.
type frame struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Final    bool   `json:"final"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	Fatal    bool   `json:"fatal"`
	Session  string `json:"session"`
	Protocol string `json:"protocol"`
}

// fakeASR records what it was given and answers Text. When gate is set,
// Transcribe waits for it (or ctx) after signalling started.
type fakeASR struct {
	mu      sync.Mutex
	calls   [][]float32
	text    string
	err     error
	started chan struct{}
	gate    chan struct{}
}

func (f *fakeASR) Transcribe(ctx context.Context, s []float32) (asr.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
	if f.started != nil {
		f.started <- struct{}{}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return asr.Result{}, ctx.Err()
		}
	}
	if f.err != nil {
		return asr.Result{}, f.err
	}
	return asr.Result{Text: f.text, AudioDuration: time.Duration(len(s)) * time.Second / asr.SampleRate}, nil
}

func (f *fakeASR) numCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// fakeConv answers "you said: TEXT", streamed in two fragments. When gate
// is set the turn waits for it (or the job's cancellation through Cancel).
type fakeConv struct {
	mu      sync.Mutex
	turns   []conversation.Inbound
	gate    chan struct{}
	started chan string
	pieces  int // fragments to stream (default 2)
}

func (f *fakeConv) Handle(ctx context.Context, in conversation.Inbound, reply conversation.Reply) (<-chan struct{}, error) {
	f.mu.Lock()
	f.turns = append(f.turns, in)
	f.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if f.started != nil {
			f.started <- in.Text
		}
		if f.gate != nil {
			<-f.gate
		}
		answer := "you said: " + in.Text
		n := f.pieces
		if n == 0 {
			n = 2
		}
		if in.Stream != nil {
			step := max(1, len(answer)/n)
			for i := 0; i < len(answer); i += step {
				in.Stream(answer[i:min(len(answer), i+step)])
			}
		}
		reply(ctx, answer)
	}()
	return done, nil
}

func (f *fakeConv) numTurns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.turns)
}

// newServer starts a voice Server on an httptest server.
func newServer(t testing.TB, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Token == nil {
		cfg.Token = func() string { return "secret" }
	}
	s := New(cfg)
	mux := http.NewServeMux()
	mux.Handle("GET /voice", s)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		hs.Close()
	})
	return s, hs
}

type client struct {
	t  testing.TB
	ws *websocket.Conn
}

func wsURL(hs *httptest.Server) string { return "ws" + strings.TrimPrefix(hs.URL, "http") + "/voice" }

func dial(t testing.TB, hs *httptest.Server) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(wsURL(hs), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

// hello sends a hello (fields override the defaults) and returns the first
// answer.
func (c *client) hello(fields map[string]any) frame {
	c.t.Helper()
	c.sendHello(fields)
	return c.next()
}

// sendHello sends a hello; fields override the defaults (nil deletes).
func (c *client) sendHello(fields map[string]any) {
	c.t.Helper()
	m := map[string]any{"type": "hello", "token": "secret", "device": "test-panel", "user": "alice",
		"profile": "voice", "sample_rate": 16000, "protocol": Protocol}
	for k, v := range fields {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	c.send(m)
}

// ready says hello and expects ready.
func (c *client) ready(fields map[string]any) frame {
	c.t.Helper()
	f := c.hello(fields)
	if f.Type != "ready" || f.Protocol != Protocol || f.Session == "" {
		c.t.Fatalf("hello answered %+v; want ready", f)
	}
	return f
}

func (c *client) send(v any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(v); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) end() { c.send(map[string]string{"type": "end"}) }

// pcm sends b in frames of size bytes.
func (c *client) pcm(b []byte, size int) {
	c.t.Helper()
	for len(b) > 0 {
		n := min(size, len(b))
		if err := c.ws.WriteMessage(websocket.BinaryMessage, b[:n]); err != nil {
			c.t.Fatalf("write audio: %v", err)
		}
		b = b[n:]
	}
}

// next reads one frame; the deadline only guards against a hang (whisper
// under -race on two busy cores can take minutes).
func (c *client) next() frame {
	c.t.Helper()
	f, err := c.read(5 * time.Minute)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return f
}

func (c *client) read(timeout time.Duration) (frame, error) {
	c.ws.SetReadDeadline(time.Now().Add(timeout))
	typ, data, err := c.ws.ReadMessage()
	if err != nil {
		return frame{}, err
	}
	if typ != websocket.TextMessage {
		c.t.Fatalf("server sent a %d frame", typ)
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		c.t.Fatalf("server frame %q: %v", data, err)
	}
	return f, nil
}

// expect reads one frame and checks its type (and code for errors).
func (c *client) expect(typ string, code ...string) frame {
	c.t.Helper()
	f := c.next()
	if f.Type != typ || (len(code) > 0 && f.Code != code[0]) {
		c.t.Fatalf("got %+v; want a %s frame %v", f, typ, code)
	}
	return f
}

// replies reads reply frames up to the final one and returns the pieces
// and the final text.
func (c *client) replies() (pieces []string, final string) {
	c.t.Helper()
	for {
		f := c.expect("reply")
		if f.Final {
			return pieces, f.Text
		}
		pieces = append(pieces, f.Text)
	}
}

// closed waits for the server to close the connection and returns the
// close code (-1 if it just dropped it).
func (c *client) closed() int {
	c.t.Helper()
	for {
		_, err := c.read(30 * time.Second)
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errorsAs(err, &ce) {
			return ce.Code
		}
		if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
			c.t.Fatalf("connection still open: %v", err)
		}
		return -1
	}
}

// toPCM16 encodes samples as PCM s16le.
func toPCM16(s []float32) []byte {
	b := make([]byte, 2*len(s))
	for i, v := range s {
		x := math.Round(float64(v) * 32767)
		binary.LittleEndian.PutUint16(b[2*i:], uint16(int16(max(-32768, min(32767, x)))))
	}
	return b
}

// tone is amp*sin at hz, rate samples a second, for d.
func tone(d time.Duration, rate int, hz, amp float64) []float32 {
	n := int(d.Seconds() * float64(rate))
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(amp * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
	}
	return s
}

func noise(d time.Duration, rate int, amp float64, seed int64) []float32 {
	r := rand.New(rand.NewSource(seed))
	s := make([]float32, int(d.Seconds()*float64(rate)))
	for i := range s {
		s[i] = float32(amp * (2*r.Float64() - 1))
	}
	return s
}

func silence(d time.Duration, rate int) []float32 {
	return make([]float32, int(d.Seconds()*float64(rate)))
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// cancelTurns are turns whose Cancel reports the cancelled message's text.
type cancelTurns struct {
	channel.Turns
	cancelled chan string
}

func (c cancelTurns) Cancel(m turn.Message) { c.cancelled <- m.Text }
