package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// reply is one scripted answer of the fake server.
type reply struct {
	status int               // 0: 200
	header map[string]string // extra headers
	body   string            // a JSON body (or garbage)
	sse    []string          // SSE events: each is written as "data: X\n\n"
	raw    string            // written as is (SSE), instead of sse
	hang   bool              // block until the request is cancelled (after writing sse/raw)
}

// recorded is what the fake server received.
type recorded struct {
	header http.Header
	path   string
	body   map[string]any
	raw    string
}

// fakeServer speaks the chat-completions wire format from a script and
// records every request. Past the end of the script the last reply repeats.
type fakeServer struct {
	*httptest.Server
	mu      sync.Mutex
	script  []reply
	reqs    []recorded
	release chan struct{}
}

func newFakeServer(t *testing.T, script ...reply) *fakeServer {
	t.Helper()
	f := &fakeServer{script: script, release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		close(f.release)
		f.Close()
	})
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec := recorded{header: r.Header.Clone(), path: r.URL.Path, raw: string(b)}
	_ = json.Unmarshal(b, &rec.body)
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, rec)
	rp := f.script[min(n, len(f.script)-1)]
	f.mu.Unlock()

	hang := func() {
		select {
		case <-r.Context().Done():
		case <-f.release:
		}
	}
	if rp.hang && rp.sse == nil && rp.raw == "" {
		hang()
		return
	}
	for k, v := range rp.header {
		w.Header().Set(k, v)
	}
	if rp.sse != nil || rp.raw != "" {
		w.Header().Set("Content-Type", "text/event-stream")
	} else if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	status := rp.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	switch {
	case rp.raw != "":
		io.WriteString(w, rp.raw)
	case rp.sse != nil:
		for _, ev := range rp.sse {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			w.(http.Flusher).Flush()
		}
	default:
		io.WriteString(w, rp.body)
	}
	if rp.hang { // stall after what was written
		w.(http.Flusher).Flush()
		hang()
	}
}

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// fakeClock is an injected clock whose Sleep records and advances time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// newTestClient returns a client for provider against f, with the fake clock
// and a jitter of 0.5.
func newTestClient(t *testing.T, provider string, f *fakeServer, clk *fakeClock, mod func(*Config), opts ...Option) *Client {
	t.Helper()
	cfg := Config{
		Provider:  provider,
		BaseURL:   f.URL + "/v1",
		APIKey:    "sk-test",
		Model:     "test-model",
		MaxTokens: 512,
		Timeout:   5 * time.Second,
		Now:       clk.Now,
		Sleep:     clk.Sleep,
		Rand:      func() float64 { return 0.5 },
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// completion returns a non-streamed completion body.
func completion(content string, finish string, toolCalls string) string {
	msg := map[string]any{"role": "assistant", "content": content}
	if toolCalls != "" {
		msg["tool_calls"] = json.RawMessage(toolCalls)
		msg["content"] = nil
	}
	b, _ := json.Marshal(map[string]any{
		"id":      "chatcmpl-1",
		"object":  "chat.completion",
		"model":   "test-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	})
	return string(b)
}

func userMsg(s string) []Message { return []Message{{Role: RoleUser, Content: s}} }

func jsonEq(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON %q: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return string(gb) == string(wb)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return strings.TrimSpace(string(b))
}
