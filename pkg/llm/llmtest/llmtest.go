// Package llmtest is a fake OpenAI-compatible chat-completions server for
// tests: one httptest server that answers POST .../chat/completions from a
// script or a function, speaks the wire format the real providers speak
// (JSON completions, or SSE chunks ending in [DONE] when the request asks
// for stream, tool calls, usage, OpenAI-style error bodies, Retry-After),
// fails in the ways real servers fail (429, 5xx, 401, the content filter,
// malformed JSON, a connection cut mid-stream, a hang until the client
// gives up), lists models on GET .../models, and records every request,
// decoded.
//
// It does not import agent/pkg/llm: it checks the client against the wire
// format, not against the client's own types, and the client's own tests
// can use it.
//
// A script answers requests in order; Func answers the rest (or every
// request when there is no script); a request past both fails the test:
//
//	srv := llmtest.New(t,
//		llmtest.Calls(llmtest.Call("write_file", `{"path":"a.txt","content":"x"}`)),
//		llmtest.Text("Saved."),
//	)
//	cfg := llm.Config{Provider: "custom", BaseURL: srv.BaseURL(), Model: "m"}
//	// ... run the code under test ...
//	if got := srv.Request(1).Last(); got.Role != "tool" {
//		t.Errorf("second request ends with %+v, want the tool result", got)
//	}
//
// A test that decides per request passes a function:
//
//	srv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
//		if r.Last().Role == "user" {
//			return llmtest.Calls(llmtest.Call("echo", `{"text":"hi"}`))
//		}
//		return llmtest.Text("re: " + r.Last().Content)
//	})
//
// Whether a reply is streamed follows the request's "stream" field, so one
// script serves Chat and Stream alike (Reply.Chunks says how the text is
// split). Failures are replies too: llmtest.RateLimited(7*time.Second),
// ServerError(503), Unauthorized(), ContentFiltered(), Malformed(""),
// CutAfter("Hel"), Hang(). Reply's fields write anything else: raw SSE
// events, a raw body, headers, a stall after a partial stream.
//
// The server is closed when the test ends; Close closes it earlier (the
// model "goes away"). A hanging reply ends when the request's context
// does or the server closes.
package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitTimeout bounds Wait: an expected request that has not arrived by
// then fails the test.
const WaitTimeout = 30 * time.Second

// Server is the fake endpoint. Its methods are safe for concurrent use.
type Server struct {
	tb      testing.TB // nil for Serve
	srv     *httptest.Server
	closing chan struct{}
	once    sync.Once

	mu          sync.Mutex
	script      []Reply
	fn          func(*Request) Reply
	reqs        []*Request
	count       int // chat requests received
	modelReqs   []*Request
	bytes       int64
	cut         int           // requests whose body the client did not finish sending
	arrived     chan struct{} // closed and replaced on every chat request
	models      []string
	modelsReply *Reply
	key         string
}

// New starts a server answering with replies in order.
func New(tb testing.TB, replies ...Reply) *Server {
	tb.Helper()
	s := NewUnstarted(tb, replies...)
	s.Start()
	return s
}

// NewFunc starts a server answering every request with fn's reply.
func NewFunc(tb testing.TB, fn func(*Request) Reply) *Server {
	tb.Helper()
	s := NewUnstarted(tb)
	s.Func(fn)
	s.Start()
	return s
}

// NewUnstarted is New without Start, for a test that adjusts the
// underlying server first (HTTPServer: its Listener, its Config).
func NewUnstarted(tb testing.TB, replies ...Reply) *Server {
	tb.Helper()
	s := &Server{
		tb:      tb,
		closing: make(chan struct{}),
		script:  append([]Reply(nil), replies...),
		arrived: make(chan struct{}),
		models:  []string{"test-model"},
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener = newToggleListener(s.srv.Listener) // Refuse, Accept
	tb.Cleanup(s.Close)
	return s
}

// Serve starts a server outside a test, for the benchmark and soak
// commands: fn answers every request, nothing is logged per request (a
// run of hours must not grow), Close stops it. The methods that fail a
// test (Request, Last, Wait, Refuse, Accept) are not for it; Count and
// BytesReceived are.
func Serve(fn func(*Request) Reply) *Server {
	s := &Server{
		closing: make(chan struct{}),
		arrived: make(chan struct{}),
		models:  []string{"test-model"},
		fn:      fn,
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Start starts a server from NewUnstarted.
func (s *Server) Start() { s.srv.Start() }

// HTTPServer is the underlying httptest server.
func (s *Server) HTTPServer() *httptest.Server { return s.srv }

// URL is the server's root, http://127.0.0.1:port.
func (s *Server) URL() string { return s.srv.URL }

// BaseURL is what a client's base_url takes: URL() + "/v1". The client
// posts to BaseURL()+"/chat/completions"; any path ending in
// /chat/completions (or /models) is served, so URL() works as well.
func (s *Server) BaseURL() string { return s.srv.URL + "/v1" }

// Close ends hanging replies and closes the server: later requests cannot
// connect. It is called when the test ends; calling it again is harmless.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closing) })
	s.srv.Close()
}

// Push appends replies to the script.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// Script replaces what is left of the script.
func (s *Server) Script(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append([]Reply(nil), replies...)
}

// Func answers the requests that come after the script (all of them when
// there is none). fn runs on the server's goroutine, one call per request,
// possibly concurrently.
func (s *Server) Func(fn func(*Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fn = fn
}

// Default answers every request after the script with r.
func (s *Server) Default(r Reply) { s.Func(func(*Request) Reply { return r }) }

// RequireKey makes every route answer 401 (Unauthorized) unless the request
// carries "Authorization: Bearer key".
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// Models sets the ids GET .../models lists (default: "test-model").
func (s *Server) Models(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = append([]string(nil), ids...)
	s.modelsReply = nil
}

// ModelsReply makes GET .../models answer r instead of the list (an
// error, Hang()...).
func (s *Server) ModelsReply(r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.modelsReply = &r
}

// Requests returns the chat-completions requests received so far, in
// order of arrival.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

// Count is the number of chat-completions requests received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Request returns request i (from 0), failing the test when fewer arrived.
func (s *Server) Request(i int) *Request {
	s.tb.Helper()
	reqs := s.Requests()
	if i < 0 || i >= len(reqs) {
		s.tb.Fatalf("llmtest: request #%d asked for, %d received", i, len(reqs))
	}
	return reqs[i]
}

// Last returns the latest request, failing the test when none arrived.
func (s *Server) Last() *Request {
	s.tb.Helper()
	return s.Request(s.Count() - 1)
}

// ModelsRequests returns the GET .../models requests received.
func (s *Server) ModelsRequests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.modelReqs...)
}

// BytesReceived is the total size of the chat-completions request bodies.
func (s *Server) BytesReceived() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// CutRequests is how many requests ended before their body did (the
// client went away mid-send); they are not in the log.
func (s *Server) CutRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut
}

// Wait blocks until n chat-completions requests have arrived and returns
// them. After WaitTimeout it fails the test.
func (s *Server) Wait(n int) []*Request {
	s.tb.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if len(s.reqs) >= n {
			reqs := append([]*Request(nil), s.reqs...)
			s.mu.Unlock()
			return reqs
		}
		arrived := s.arrived
		got := len(s.reqs)
		s.mu.Unlock()
		select {
		case <-arrived:
		case <-deadline.C:
			s.tb.Fatalf("llmtest: %d requests after %v, want %d", got, WaitTimeout, n)
			return nil
		}
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		// The client went away mid-request (a daemon killed with -9 in
		// the middle of a send): there is no request to answer or log,
		// as for a real server.
		s.mu.Lock()
		s.cut++
		s.mu.Unlock()
		return
	}
	req := &Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, ctx: r.Context()}
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	authorized := key == "" || r.Header.Get("Authorization") == "Bearer "+key

	switch {
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		s.chat(w, req, authorized)
	case strings.HasSuffix(r.URL.Path, "/models") && r.Method == http.MethodGet:
		s.mu.Lock()
		s.modelReqs = append(s.modelReqs, req)
		models, override := s.models, s.modelsReply
		s.mu.Unlock()
		switch {
		case !authorized:
			s.write(w, req, Unauthorized())
		case override != nil:
			s.write(w, req, *override)
		default:
			data := make([]any, 0, len(models))
			for _, id := range models {
				data = append(data, map[string]any{"id": id, "object": "model", "created": created, "owned_by": "llmtest"})
			}
			s.write(w, req, Reply{Body: mustJSON(map[string]any{"object": "list", "data": data})})
		}
	default:
		s.write(w, req, Error(http.StatusNotFound, "invalid_request_error", "unknown_url",
			fmt.Sprintf("Unknown request URL: %s %s. Please check the URL for typos.", r.Method, r.URL.Path)))
	}
}

func (s *Server) chat(w http.ResponseWriter, req *Request, authorized bool) {
	decodeErr := req.decode()
	s.mu.Lock()
	req.N = s.count
	s.count++
	if s.tb != nil { // Serve's long runs keep no log
		s.reqs = append(s.reqs, req)
	}
	s.bytes += int64(len(req.Body))
	close(s.arrived)
	s.arrived = make(chan struct{})
	s.mu.Unlock()

	switch {
	case req.Method != http.MethodPost:
		s.write(w, req, Error(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
			"Only POST requests are accepted at this URL."))
		return
	case !authorized:
		s.write(w, req, Unauthorized())
		return
	case decodeErr != nil:
		s.errorf("llmtest: request #%d is not a chat-completions body: %v\n%s", req.N, decodeErr, clip(req.Body))
		s.write(w, req, BadRequest("We could not parse the JSON body of your request."))
		return
	}
	s.mu.Lock()
	var reply Reply
	scripted := len(s.script) > 0
	if scripted {
		reply = s.script[0]
		s.script = s.script[1:]
	}
	fn := s.fn
	s.mu.Unlock()
	switch {
	case scripted:
	case fn != nil:
		reply = fn(req)
	default:
		s.errorf("llmtest: request #%d past the end of the script (last message: %+v)", req.N, req.Last())
		reply = ServerError(http.StatusInternalServerError)
	}
	s.write(w, req, reply)
}

// errorf fails the test; a server from Serve logs instead.
func (s *Server) errorf(format string, args ...any) {
	if s.tb == nil {
		log.Printf(format, args...)
		return
	}
	s.tb.Errorf(format, args...)
}

// hang blocks until the request ends or the server closes.
func (s *Server) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.closing:
	}
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
