// Package aibottest is a local stand-in for WeCom's AI Bot long-connection
// endpoint, speaking its protocol (pkg/wecom/aibot): subscriptions
// accepted or refused, ping answers, callbacks and events the test
// sends, answers with errors or late, disconnected_event, and the server
// dropping the connection. Every frame a client sends is logged.
package aibottest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/wecom/aibot"
)

// BotID and Secret are the credentials the server accepts by default.
const (
	BotID  = "bot-test-1"
	Secret = "secret-test-1"
)

// Server is the fake endpoint. Its methods are safe for concurrent use.
type Server struct {
	tb  testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	conns    []*websocket.Conn
	live     *websocket.Conn // the subscribed connection
	frames   []aibot.Frame   // every frame clients sent, in order
	dials    int
	reject   *aibot.Error                        // answer subscriptions with this
	failNext map[string]*aibot.Error             // cmd -> the next answer's error
	delay    time.Duration                       // before every answer
	silent   map[string]bool                     // cmd -> never answered
	issued   map[*websocket.Conn]map[string]bool // req_ids of the callbacks sent on each connection
	changed  chan struct{}                       // closed and replaced on every change
	wmu      map[*websocket.Conn]*sync.Mutex
	media    map[string]*served // path -> an encrypted resource (media.go)
}

// New starts the server; it stops when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{tb: tb, failNext: map[string]*aibot.Error{}, silent: map[string]bool{}, issued: map[*websocket.Conn]map[string]bool{},
		changed: make(chan struct{}), wmu: map[*websocket.Conn]*sync.Mutex{}, media: map[string]*served{}}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, mediaPath) {
			s.serveMedia(w, r)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.dials++
		s.conns = append(s.conns, ws)
		s.wmu[ws] = &sync.Mutex{}
		s.notify()
		s.mu.Unlock()
		s.serve(ws)
	}))
	tb.Cleanup(s.Close)
	return s
}

// URL is the ws:// address (wecom_bot.url).
func (s *Server) URL() string { return "ws" + strings.TrimPrefix(s.srv.URL, "http") }

// Close stops the server and drops every connection.
func (s *Server) Close() {
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.srv.Close()
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) serve(ws *websocket.Conn) {
	defer func() {
		s.mu.Lock()
		if s.live == ws {
			s.live = nil
		}
		s.notify()
		s.mu.Unlock()
		ws.Close()
	}()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		f, err := aibot.Decode(data)
		if err != nil {
			s.tb.Errorf("aibottest: the client sent a bad frame: %v: %.200s", err, data)
			continue
		}
		s.mu.Lock()
		s.frames = append(s.frames, f)
		s.notify()
		var answer *aibot.Error
		code := 0
		switch {
		case f.Cmd == aibot.CmdSubscribe:
			var body struct{ BotID, Secret string }
			_ = json.Unmarshal(f.Body, &struct {
				BotID  *string `json:"bot_id"`
				Secret *string `json:"secret"`
			}{&body.BotID, &body.Secret})
			switch {
			case s.reject != nil:
				answer = s.reject
			case body.BotID != BotID || body.Secret != Secret:
				answer = &aibot.Error{Code: 40058, Msg: "invalid bot_id or secret"}
			default:
				s.live = ws
			}
		case (f.Cmd == aibot.CmdRespond || f.Cmd == aibot.CmdRespondWelcome) && !s.issued[ws][f.Headers.ReqID]:
			// A reply must answer a callback of this connection (our
			// reading of the protocol: a req_id is the connection's).
			answer = &aibot.Error{Code: 846605, Msg: "invalid req_id"}
		case s.failNext[f.Cmd] != nil:
			answer = s.failNext[f.Cmd]
			delete(s.failNext, f.Cmd)
		}
		silent, delay := s.silent[f.Cmd], s.delay
		s.mu.Unlock()
		if silent {
			continue
		}
		if answer != nil {
			code = answer.Code
		}
		msg := "ok"
		if answer != nil {
			msg = answer.Msg
		}
		reply := map[string]any{"headers": map[string]string{"req_id": f.Headers.ReqID}, "errcode": code, "errmsg": msg}
		if delay > 0 {
			go func() {
				time.Sleep(delay) // a slow WeCom, in real time
				s.write(ws, reply)
			}()
			continue
		}
		s.write(ws, reply)
	}
}

func (s *Server) write(ws *websocket.Conn, v any) error {
	s.mu.Lock()
	m := s.wmu[ws]
	s.mu.Unlock()
	m.Lock()
	defer m.Unlock()
	return ws.WriteJSON(v)
}

// Reject makes every subscription fail with code and msg (0: accept again).
func (s *Server) Reject(code int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == 0 {
		s.reject = nil
		return
	}
	s.reject = &aibot.Error{Code: code, Msg: msg}
}

// FailNext answers the next frame of cmd with an error.
func (s *Server) FailNext(cmd string, code int, msg string) {
	s.mu.Lock()
	s.failNext[cmd] = &aibot.Error{Code: code, Msg: msg}
	s.mu.Unlock()
}

// Silence stops (or resumes) answering cmd.
func (s *Server) Silence(cmd string, on bool) {
	s.mu.Lock()
	s.silent[cmd] = on
	s.mu.Unlock()
}

// Delay answers every frame d late.
func (s *Server) Delay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}

// WaitReady waits until a client is subscribed.
func (s *Server) WaitReady(timeout time.Duration) bool {
	return s.wait(timeout, func() bool { return s.live != nil })
}

// Dials counts the connections made so far.
func (s *Server) Dials() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dials
}

func (s *Server) wait(timeout time.Duration, ok func() bool) bool {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		done, ch := ok(), s.changed
		s.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-deadline:
			return false
		}
	}
}

// Callback sends the subscribed client a callback (cmd aibot_msg_callback
// or aibot_event_callback) with body and returns its req_id.
func (s *Server) Callback(cmd string, body any) string {
	s.tb.Helper()
	s.mu.Lock()
	ws := s.live
	s.mu.Unlock()
	if ws == nil {
		s.tb.Fatal("aibottest: no subscribed client to send a callback to")
	}
	reqID := "cb_" + time.Now().Format("150405.000000000")
	s.mu.Lock()
	if s.issued[ws] == nil {
		s.issued[ws] = map[string]bool{}
	}
	s.issued[ws][reqID] = true
	s.mu.Unlock()
	if err := s.write(ws, map[string]any{"cmd": cmd, "headers": map[string]string{"req_id": reqID}, "body": body}); err != nil {
		s.tb.Fatalf("aibottest: callback: %v", err)
	}
	return reqID
}

// Text sends a text message from user in chat (chatType "single" or
// "group"; chat "" for a single chat) and returns its req_id.
func (s *Server) Text(msgID, user, chatType, chat, text string) string {
	body := s.body(msgID, user, chatType, chat, "text")
	body["text"] = map[string]string{"content": text}
	return s.Callback(aibot.CmdMsgCallback, body)
}

// Replace sends disconnected_event (a newer connection took over), then
// drops the connection.
func (s *Server) Replace() {
	s.Callback(aibot.CmdEventCallback, map[string]any{"msgid": "evt-replaced", "create_time": time.Now().Unix(), "aibotid": BotID,
		"msgtype": "event", "event": map[string]string{"eventtype": aibot.EventDisconnected}})
	time.Sleep(50 * time.Millisecond) // WeCom closes shortly after
	s.Drop()
}

// Drop closes the subscribed connection from the server's side.
func (s *Server) Drop() {
	s.mu.Lock()
	ws := s.live
	s.live = nil
	s.mu.Unlock()
	if ws != nil {
		ws.Close()
	}
}

// Frames returns the frames clients sent with cmd ("" for all).
func (s *Server) Frames(cmd string) []aibot.Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []aibot.Frame
	for _, f := range s.frames {
		if cmd == "" || f.Cmd == cmd {
			out = append(out, f)
		}
	}
	return out
}

// WaitFrames waits until clients sent at least n frames with cmd and
// returns them.
func (s *Server) WaitFrames(ctx context.Context, cmd string, n int) []aibot.Frame {
	s.tb.Helper()
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	count := func() bool {
		c := 0
		for _, f := range s.frames {
			if f.Cmd == cmd {
				c++
			}
		}
		return c >= n
	}
	if !s.wait(timeout, count) {
		s.tb.Fatalf("aibottest: %d %s frames not sent in time; got %d", n, cmd, len(s.Frames(cmd)))
	}
	return s.Frames(cmd)
}

// Await waits up to timeout for a frame a client sent that ok accepts,
// looking only at frames sent after the first `after` ones, and returns
// it.
func (s *Server) Await(timeout time.Duration, after int, ok func(aibot.Frame) bool) (aibot.Frame, bool) {
	var found aibot.Frame
	hit := s.wait(timeout, func() bool {
		for _, f := range s.frames[min(after, len(s.frames)):] {
			if ok(f) {
				found = f
				return true
			}
		}
		return false
	})
	return found, hit
}

// Count is how many frames clients sent so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.frames)
}
