package llm

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/llm/llmtest"
)

// newFakeServer is an llmtest server answering script in order, its last
// reply repeating.
func newFakeServer(t *testing.T, script ...llmtest.Reply) *llmtest.Server {
	t.Helper()
	srv := llmtest.New(t, script[:len(script)-1]...)
	srv.Default(script[len(script)-1])
	return srv
}

// body is a 200 whose body is b, as is.
func body(b string) llmtest.Reply { return llmtest.Reply{Body: b} }

// stalled is r flushed, then held until the client gives up.
func stalled(r llmtest.Reply) llmtest.Reply {
	r.Stall = true
	return r
}

// clockStart is where every test's fake clock starts.
var clockStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is a clock.Fake that a goroutine of the test moves to every
// timer the client starts (the waits between attempts) as soon as it is
// started, recording how long each was: the waits take no wall time.
type fakeClock struct {
	*clock.Fake
	mu     sync.Mutex
	sleeps []time.Duration
}

func newFakeClock(t *testing.T) *fakeClock {
	c := &fakeClock{Fake: clock.NewFake(clockStart)}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for c.WaitTimers(1, stop) {
			at, ok := c.Next()
			if !ok {
				continue
			}
			c.mu.Lock()
			c.sleeps = append(c.sleeps, at.Sub(c.Now()))
			c.mu.Unlock()
			c.Set(at)
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	return c
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// newTestClient returns a client for provider against f, with the fake clock
// and a jitter of 0.5.
func newTestClient(t *testing.T, provider string, f *llmtest.Server, clk *fakeClock, mod func(*Config), opts ...Option) *Client {
	t.Helper()
	cfg := Config{
		Provider:  provider,
		BaseURL:   f.BaseURL(),
		APIKey:    "sk-test",
		Model:     "test-model",
		MaxTokens: 512,
		Timeout:   5 * time.Second,
		Clock:     clk.Fake,
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
