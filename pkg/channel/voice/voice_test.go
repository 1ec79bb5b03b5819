package voice

import (
	"context"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/asr"
	"agent/pkg/audio"
	"agent/pkg/conversation"
)

func fakeConfig(rec Recognizer, conv conversation.Handler) Config {
	cfg := Config{Turns: conversation.Turns(conv, nil, nil), VAD: VADConfig{Silence: -1}}
	if rec != nil {
		cfg.ASR = func() Recognizer { return rec }
	}
	return cfg
}

func TestUtteranceToStreamedReply(t *testing.T) {
	rec := &fakeASR{text: " turn on the light "}
	conv := &fakeConv{pieces: 3}
	_, hs := newServer(t, fakeConfig(rec, conv))
	c := dial(t, hs)
	r := c.ready(nil)
	if r.Session != "p2p:voice:alice" {
		t.Errorf("session %q; want p2p:voice:alice", r.Session)
	}
	speech := tone(time.Second, 16000, 300, 0.3)
	c.pcm(toPCM16(speech), 640)
	c.end()
	if f := c.expect("transcript"); !f.Final || f.Text != "turn on the light" {
		t.Errorf("transcript %+v; want final \"turn on the light\"", f)
	}
	pieces, final := c.replies()
	want := "you said: turn on the light"
	if final != want || strings.Join(pieces, "") != want || len(pieces) < 2 {
		t.Errorf("reply pieces %q final %q; want streamed pieces of %q then it whole", pieces, final, want)
	}
	got := conv.turns[0]
	if got.Channel != Channel || got.Profile != ProfileVoice || got.Sender != "alice" || got.Text != "turn on the light" {
		t.Errorf("inbound %+v", got)
	}
	if n := len(rec.calls[0]); n != len(speech) {
		t.Errorf("recogniser got %d samples; want %d", n, len(speech))
	}
}

func TestTextTurnHardwareProfile(t *testing.T) {
	conv := &fakeConv{}
	_, hs := newServer(t, fakeConfig(nil, conv))
	c := dial(t, hs)
	if r := c.ready(map[string]any{"profile": "hardware", "user": nil, "device": "button-box"}); r.Session != "p2p:voice:button-box" {
		t.Errorf("session %q", r.Session)
	}
	c.send(map[string]string{"type": "text", "text": "button 1 pressed"})
	if _, final := c.replies(); final != "you said: button 1 pressed" {
		t.Errorf("final %q", final)
	}
	if in := conv.turns[0]; in.Profile != ProfileHardware || in.Sender != "button-box" {
		t.Errorf("inbound %+v", in)
	}
}

func TestHelloErrors(t *testing.T) {
	tests := []struct {
		name   string
		first  func(c *client)
		code   string
		closed int
	}{
		{"bad token", func(c *client) { c.sendHello(map[string]any{"token": "guess"}) }, CodeUnauthorized, websocket.ClosePolicyViolation},
		{"no token", func(c *client) { c.sendHello(map[string]any{"token": nil}) }, CodeUnauthorized, websocket.ClosePolicyViolation},
		{"text before hello", func(c *client) { c.send(map[string]string{"type": "text", "text": "hi"}) }, CodeBadHello, websocket.CloseProtocolError},
		{"end before hello", func(c *client) { c.end() }, CodeBadHello, websocket.CloseProtocolError},
		{"audio before hello", func(c *client) { c.pcm(make([]byte, 640), 640) }, CodeBadHello, websocket.CloseProtocolError},
		{"not json", func(c *client) { c.ws.WriteMessage(websocket.TextMessage, []byte("hello?")) }, CodeBadHello, websocket.CloseProtocolError},
		{"wrong sample rate", func(c *client) { c.sendHello(map[string]any{"sample_rate": 12345}) }, CodeBadAudio, websocket.CloseUnsupportedData},
		{"negative sample rate", func(c *client) { c.sendHello(map[string]any{"sample_rate": -16000}) }, CodeBadAudio, websocket.CloseUnsupportedData},
		{"bad profile", func(c *client) { c.sendHello(map[string]any{"profile": "admin"}) }, CodeBadHello, websocket.CloseProtocolError},
		{"other protocol", func(c *client) { c.sendHello(map[string]any{"protocol": "agent.voice.v9"}) }, CodeBadHello, websocket.CloseProtocolError},
		{"no name", func(c *client) { c.sendHello(map[string]any{"user": nil, "device": nil}) }, CodeBadHello, websocket.CloseProtocolError},
		{"long name", func(c *client) { c.sendHello(map[string]any{"user": strings.Repeat("x", 200)}) }, CodeBadHello, websocket.CloseProtocolError},
	}
	conv := &fakeConv{}
	_, hs := newServer(t, fakeConfig(nil, conv))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, hs)
			c.t = t
			tt.first(c)
			f := c.next()
			if f.Type != "error" || f.Code != tt.code || !f.Fatal || f.Message == "" {
				t.Fatalf("got %+v; want a fatal %s error", f, tt.code)
			}
			if code := c.closed(); code != tt.closed {
				t.Errorf("close code %d; want %d", code, tt.closed)
			}
		})
	}
	if n := conv.numTurns(); n != 0 {
		t.Errorf("%d turns ran for refused clients", n)
	}
}

func TestTokenFollowsReload(t *testing.T) {
	var token atomic.Value
	token.Store("one")
	cfg := fakeConfig(nil, &fakeConv{})
	cfg.Token = func() string { return token.Load().(string) }
	_, hs := newServer(t, cfg)
	dial(t, hs).ready(map[string]any{"token": "one"})
	token.Store("two")
	if f := dial(t, hs).hello(map[string]any{"token": "one"}); f.Code != CodeUnauthorized {
		t.Errorf("old token after reload: %+v", f)
	}
	dial(t, hs).ready(map[string]any{"token": "two"})
}

func TestResamplesOtherRates(t *testing.T) {
	for _, rate := range []int{8000, 44100, 48000} {
		rec := &fakeASR{text: "x"}
		_, hs := newServer(t, fakeConfig(rec, nil))
		c := dial(t, hs)
		c.ready(map[string]any{"sample_rate": rate})
		in := tone(2*time.Second, rate, 440, 0.4)
		c.pcm(toPCM16(in), rate/10*2)
		c.end()
		c.expect("transcript")
		c.expect("error", CodeLLMUnavailable)
		got := rec.calls[0]
		if want := len(in) * asr.SampleRate / rate; len(got) != want {
			t.Errorf("%d Hz: %d samples at 16 kHz; want %d", rate, len(got), want)
		}
	}
}

func TestOddLengthFrames(t *testing.T) {
	rec := &fakeASR{text: "x"}
	_, hs := newServer(t, fakeConfig(rec, &fakeConv{}))
	c := dial(t, hs)
	c.ready(nil)
	pcm := toPCM16(tone(time.Second, 16000, 200, 0.5))
	c.pcm(pcm, 333) // every frame splits a sample
	c.end()
	c.expect("transcript")
	c.replies()
	// A stray last byte is dropped, not shifted into the next utterance.
	c.pcm(append(pcm[:len(pcm):len(pcm)], 0x7f), 641)
	c.end()
	c.expect("transcript")
	c.replies()
	want, _ := audio.PCM16ToFloat32(pcm)
	for i, got := range rec.calls {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("utterance %d: the samples differ from the even-framed input (%d vs %d samples)", i, len(got), len(want))
		}
	}
}

func TestSilenceAndEmptyUtterances(t *testing.T) {
	rec := &fakeASR{text: "hallucination"}
	_, hs := newServer(t, fakeConfig(rec, &fakeConv{}))
	c := dial(t, hs)
	c.ready(nil)
	c.pcm(toPCM16(silence(3*time.Second, 16000)), 3200)
	c.end()
	if f := c.expect("transcript"); f.Text != "" || !f.Final {
		t.Errorf("silence: %+v; want an empty final transcript", f)
	}
	c.end() // nothing at all
	if f := c.expect("transcript"); f.Text != "" || !f.Final {
		t.Errorf("empty: %+v", f)
	}
	if rec.numCalls() != 0 {
		t.Errorf("the recogniser ran %d times on silence", rec.numCalls())
	}
}

func TestVADEndsUtterance(t *testing.T) {
	rec := &fakeASR{text: "hello"}
	cfg := fakeConfig(rec, &fakeConv{})
	cfg.VAD = VADConfig{Silence: 500 * time.Millisecond}
	_, hs := newServer(t, cfg)
	c := dial(t, hs)
	c.ready(nil)
	c.pcm(toPCM16(append(tone(800*time.Millisecond, 16000, 250, 0.3), silence(600*time.Millisecond, 16000)...)), 640)
	if f := c.expect("transcript"); f.Text != "hello" {
		t.Errorf("transcript %+v", f)
	}
	c.replies()
	c.end() // the push-to-talk release after VAD ended it: nothing more
	c.send(map[string]string{"type": "text", "text": "next"})
	if _, final := c.replies(); final != "you said: next" {
		t.Errorf("after a VAD end + end: %q", final)
	}
	if rec.numCalls() != 1 {
		t.Errorf("%d recognitions; want 1", rec.numCalls())
	}
}

func TestTenMinutesOfAudio(t *testing.T) {
	rec := &fakeASR{text: "x"}
	_, hs := newServer(t, fakeConfig(rec, &fakeConv{}))
	c := dial(t, hs)
	c.ready(nil)
	second := toPCM16(noise(time.Second, 16000, 0.3, 1))
	errs := make(chan frame, 16)
	go func() { // read while writing: the server must not block on us
		for {
			f, err := c.read(60 * time.Second)
			if err != nil {
				close(errs)
				return
			}
			errs <- f
			if f.Type == "reply" && f.Final {
				close(errs)
				return
			}
		}
	}()
	for range 600 {
		c.pcm(second, len(second)/10)
	}
	c.end()
	c.send(map[string]string{"type": "text", "text": "still there?"})
	var got []frame
	for f := range errs {
		if f.Type != "reply" || f.Final {
			got = append(got, f)
		}
	}
	if len(got) != 2 || got[0].Code != CodeTooLong || got[1].Text != "you said: still there?" {
		t.Fatalf("frames %+v; want one too_long error then the text turn's reply", got)
	}
	if rec.numCalls() != 0 {
		t.Errorf("the over-long utterance was recognised")
	}
}

func TestNoiseIsRecognised(t *testing.T) {
	rec := &fakeASR{text: ""}
	_, hs := newServer(t, fakeConfig(rec, &fakeConv{}))
	c := dial(t, hs)
	c.ready(nil)
	c.pcm(toPCM16(noise(3*time.Second, 16000, 0.5, 2)), 1000)
	c.end()
	if f := c.expect("transcript"); f.Text != "" || !f.Final {
		t.Errorf("%+v", f)
	}
	if rec.numCalls() != 1 {
		t.Errorf("noise not handed to the recogniser")
	}
}

func TestErrorsKeepConnectionUsable(t *testing.T) {
	rec := &fakeASR{err: asr.ErrBadAudio}
	_, hs := newServer(t, fakeConfig(rec, &fakeConv{}))
	c := dial(t, hs)
	c.ready(nil)
	c.ws.WriteMessage(websocket.TextMessage, []byte("{not json"))
	c.expect("error", CodeBadRequest)
	c.send(map[string]string{"type": "dance"})
	c.expect("error", CodeBadRequest)
	c.send(map[string]string{"type": "text", "text": "   "})
	c.expect("error", CodeBadRequest)
	c.send(map[string]string{"type": "text", "text": strings.Repeat("a", 5000)})
	c.expect("error", CodeBadRequest)
	c.send(map[string]string{"type": "hello"})
	c.expect("error", CodeBadRequest)
	c.pcm(toPCM16(tone(time.Second, 16000, 300, 0.3)), 3200)
	c.end()
	c.expect("error", CodeBadAudio)
	c.send(map[string]string{"type": "text", "text": "ok"})
	if _, final := c.replies(); final != "you said: ok" {
		t.Errorf("final %q", final)
	}
}

func TestUnavailable(t *testing.T) {
	_, hs := newServer(t, Config{Token: func() string { return "secret" }, VAD: VADConfig{Silence: -1}})
	c := dial(t, hs)
	c.ready(nil)
	c.pcm(toPCM16(tone(time.Second, 16000, 300, 0.3)), 3200)
	c.end()
	c.expect("error", CodeASRUnavailable)
	c.send(map[string]string{"type": "text", "text": "hi"})
	c.expect("error", CodeLLMUnavailable)
}

func TestBusyAndCancel(t *testing.T) {
	conv := &fakeConv{gate: make(chan struct{}), started: make(chan string, 4)}
	cancelled := make(chan string, 4)
	cfg := fakeConfig(&fakeASR{text: "x"}, conv)
	cfg.Turns = cancelTurns{cfg.Turns, cancelled}
	_, hs := newServer(t, cfg)
	c := dial(t, hs)
	c.ready(nil)
	c.send(map[string]string{"type": "text", "text": "first"})
	<-conv.started
	c.send(map[string]string{"type": "text", "text": "second"})
	c.expect("error", CodeBusy)
	c.pcm(toPCM16(tone(time.Second, 16000, 300, 0.3)), 3200) // speaking over the turn
	c.expect("error", CodeBusy)
	c.end()
	c.send(map[string]string{"type": "cancel"})
	if got := <-cancelled; got != "first" {
		t.Errorf("Cancel called for %q; want first", got)
	}
	close(conv.gate) // the cancelled turn ends late; later turns run freely
	c.send(map[string]string{"type": "text", "text": "third"})
	if pieces, final := c.replies(); final != "you said: third" || strings.Contains(strings.Join(pieces, ""), "first") {
		t.Errorf("after cancel: pieces %q final %q; want only the third turn", pieces, final)
	}
	if len(cancelled) != 0 {
		t.Errorf("Cancel called again for %q", <-cancelled)
	}
}

func TestCancelDuringRecognition(t *testing.T) {
	rec := &fakeASR{text: "x", started: make(chan struct{}, 1), gate: make(chan struct{})}
	conv := &fakeConv{}
	_, hs := newServer(t, fakeConfig(rec, conv))
	c := dial(t, hs)
	c.ready(nil)
	c.pcm(toPCM16(tone(time.Second, 16000, 300, 0.3)), 3200)
	c.end()
	<-rec.started
	c.send(map[string]string{"type": "cancel"})
	// Cancel the buffered utterance too: half an utterance, cancel, text.
	c.pcm(toPCM16(tone(time.Second, 16000, 300, 0.3)), 3200)
	c.send(map[string]string{"type": "cancel"})
	c.send(map[string]string{"type": "text", "text": "after"})
	if f := c.next(); f.Type != "reply" || f.Text == "" {
		t.Fatalf("first frame after cancel %+v; want the text turn's reply (no transcript of the cancelled utterance)", f)
	}
	if n := conv.numTurns(); n != 1 {
		t.Errorf("%d turns; want 1", n)
	}
}

func TestMaxMessageSize(t *testing.T) {
	cfg := fakeConfig(&fakeASR{}, nil)
	cfg.Limits.MaxMessage = 4096
	s, hs := newServer(t, cfg)
	c := dial(t, hs)
	c.ready(nil)
	c.ws.WriteMessage(websocket.BinaryMessage, make([]byte, 4097))
	if code := c.closed(); code != websocket.CloseMessageTooBig {
		t.Errorf("close code %d; want %d", code, websocket.CloseMessageTooBig)
	}
	waitIdle(t, s)
}

func TestConnectionCap(t *testing.T) {
	cfg := fakeConfig(nil, nil)
	cfg.Limits.MaxConns = 2
	_, hs := newServer(t, cfg)
	dial(t, hs).ready(nil)
	dial(t, hs).ready(nil)
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(hs), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third connection: err %v resp %v; want 503", err, resp)
	}
}

func TestKeepalive(t *testing.T) {
	cfg := fakeConfig(nil, &fakeConv{})
	cfg.Limits.PingInterval = 20 * time.Millisecond
	cfg.Limits.ReadTimeout = 200 * time.Millisecond
	s, hs := newServer(t, cfg)

	// A live client answers pings (its reader does) and stays connected
	// well past ReadTimeout.
	live := dial(t, hs)
	live.ready(nil)
	pings := make(chan struct{}, 100)
	live.ws.SetPingHandler(func(data string) error {
		pings <- struct{}{}
		return live.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	frames := make(chan frame, 8)
	go func() {
		for {
			f, err := live.read(time.Minute)
			if err != nil {
				close(frames)
				return
			}
			frames <- f
		}
	}()
	for range 25 { // 25 pings = 500 ms > 2x ReadTimeout
		<-pings
	}
	live.send(map[string]string{"type": "text", "text": "alive"})
	for f := range frames {
		if f.Type == "reply" && f.Final {
			break
		}
	}

	// A dead client (never reads, so never pongs) is dropped.
	dead := dial(t, hs)
	dead.ready(nil)
	deadline := time.Now().Add(30 * time.Second)
	for s.Active() > 1 {
		if time.Now().After(deadline) {
			t.Fatal("a client that does not answer pings is still connected")
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond) // polling for a condition, bounded
	}
}

func TestSlowClientIsDisconnected(t *testing.T) {
	conv := &fakeConv{pieces: 200000}
	cfg := fakeConfig(nil, conv)
	cfg.Limits.SendQueue = 8
	cfg.Limits.WriteTimeout = 200 * time.Millisecond
	s, hs := newServer(t, cfg)
	c := dial(t, hs)
	c.ready(nil)
	c.send(map[string]string{"type": "text", "text": strings.Repeat("long answer ", 300)})
	// Never read: the server must drop us rather than queue without bound.
	waitIdle(t, s)
}

func TestServerClose(t *testing.T) {
	conv := &fakeConv{gate: make(chan struct{}), started: make(chan string, 1)}
	s, hs := newServer(t, fakeConfig(nil, conv))
	c := dial(t, hs)
	c.ready(nil)
	c.send(map[string]string{"type": "text", "text": "slow"})
	<-conv.started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if code := c.closed(); code != websocket.CloseGoingAway && code != -1 {
		t.Errorf("close code %d; want going away", code)
	}
	close(conv.gate)
	if _, resp, err := websocket.DefaultDialer.Dial(wsURL(hs), nil); err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("dial after Close: %v", err)
	}
}

// TestThousandConnections opens and drops 1000 connections in many ways;
// afterwards no connection and no goroutine is left behind.
func TestThousandConnections(t *testing.T) {
	cfg := fakeConfig(&fakeASR{text: "x"}, &fakeConv{})
	cfg.Limits.MaxConns = 64
	s, hs := newServer(t, cfg)
	base := runtime.NumGoroutine()
	addr := strings.TrimPrefix(hs.URL, "http://")
	pcm := toPCM16(tone(200*time.Millisecond, 16000, 300, 0.3))
	var refused atomic.Int32
	for wave := range 20 {
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func(kind int) {
				defer wg.Done()
				if kind == 0 { // TCP only, no upgrade
					if nc, err := net.Dial("tcp", addr); err == nil {
						nc.Write([]byte("GET /voice HTTP/1.1\r\nHost: x\r\n"))
						nc.Close()
					}
					return
				}
				ws, resp, err := websocket.DefaultDialer.Dial(wsURL(hs), nil)
				if err != nil {
					if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
						refused.Add(1)
						return
					}
					t.Errorf("dial: %v", err)
					return
				}
				defer ws.Close()
				switch kind {
				case 1: // drop before hello
				case 2: // hello, then drop
					ws.WriteJSON(map[string]any{"type": "hello", "token": "secret", "user": "u"})
					ws.ReadMessage()
				case 3: // drop in the middle of an utterance
					ws.WriteJSON(map[string]any{"type": "hello", "token": "secret", "user": "u"})
					ws.ReadMessage()
					ws.WriteMessage(websocket.BinaryMessage, pcm)
					ws.NetConn().Write([]byte{0x82, 0x7e, 0x10}) // half a frame header
				case 4: // drop during a turn
					ws.WriteJSON(map[string]any{"type": "hello", "token": "secret", "user": "u"})
					ws.ReadMessage()
					ws.WriteMessage(websocket.BinaryMessage, pcm)
					ws.WriteJSON(map[string]string{"type": "end"})
				}
				ws.NetConn().Close()
			}((wave*50 + i) % 5)
		}
		wg.Wait()
	}
	waitIdle(t, s)
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > base+5 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after 1000 connections; baseline %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // polling for a condition, bounded
	}
	t.Logf("%d of 1000 connections refused by the cap", refused.Load())
}

// waitIdle waits until the server has no connection left.
func waitIdle(t testing.TB, s *Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.Active() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open", s.Active())
		}
		time.Sleep(5 * time.Millisecond) // polling for a condition, bounded
	}
}
