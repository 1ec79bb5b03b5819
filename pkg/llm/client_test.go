package llm

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/llm/llmtest"
)

func TestChatPlainReply(t *testing.T) {
	f := newFakeServer(t, body(completion("Hello there.", "stop", "")))
	c := newTestClient(t, "openai", f, newFakeClock(t), nil)

	resp, err := c.Chat(context.Background(), Request{Messages: userMsg("hi")})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if got, want := resp.Message.Content, "Hello there."; got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
	if resp.Message.Role != RoleAssistant || resp.FinishReason != FinishStop {
		t.Errorf("role, finish = %q, %q", resp.Message.Role, resp.FinishReason)
	}
	if want := (Usage{10, 5, 15}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	reqs := f.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" {
		t.Errorf("path = %q", r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	want := `{"model":"test-model","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":512}`
	if !jsonEq(t, string(r.Body), want) {
		t.Errorf("request body\n got %s\nwant %s", string(r.Body), want)
	}
}

func TestChatToolCalls(t *testing.T) {
	tests := []struct {
		name, calls, finish string
		want                []ToolCall
		wantFinish          string
	}{
		{
			name:   "openai parallel",
			calls:  `[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]`,
			finish: "tool_calls",
			want: []ToolCall{
				{ID: "call_a", Type: "function", Function: FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
				{ID: "call_b", Type: "function", Function: FunctionCall{Name: "get_time", Arguments: `{}`}},
			},
			wantFinish: FinishToolCalls,
		},
		{
			name:   "arguments as object, no id, finish stop",
			calls:  `[{"type":"function","function":{"name":"get_time","arguments":{"tz":"UTC"}}}]`,
			finish: "stop",
			want: []ToolCall{
				{ID: "call_0", Type: "function", Function: FunctionCall{Name: "get_time", Arguments: `{"tz":"UTC"}`}},
			},
			wantFinish: FinishToolCalls,
		},
		{
			name:   "empty arguments",
			calls:  `[{"id":"x","type":"function","function":{"name":"ping","arguments":""}}]`,
			finish: "tool_calls",
			want: []ToolCall{
				{ID: "x", Type: "function", Function: FunctionCall{Name: "ping", Arguments: `{}`}},
			},
			wantFinish: FinishToolCalls,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, body(completion("", tt.finish, tt.calls)))
			c := newTestClient(t, "openai", f, newFakeClock(t), nil)
			tools := []Tool{{Function: FunctionSpec{Name: "get_weather", Parameters: []byte(`{"type":"object"}`)}}}
			resp, err := c.Chat(context.Background(), Request{Messages: userMsg("weather?"), Tools: tools})
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			if got, want := mustJSON(resp.Message.ToolCalls), mustJSON(tt.want); got != want {
				t.Errorf("tool calls\n got %s\nwant %s", got, want)
			}
			if resp.FinishReason != tt.wantFinish {
				t.Errorf("finish = %q, want %q", resp.FinishReason, tt.wantFinish)
			}
			body := f.Request(0).JSON
			if got := mustJSON(body["tools"]); got != `[{"function":{"name":"get_weather","parameters":{"type":"object"}},"type":"function"}]` {
				t.Errorf("tools sent = %s", got)
			}
		})
	}
}

func TestToolChoice(t *testing.T) {
	tools := []Tool{{Function: FunctionSpec{Name: "f", Parameters: []byte(`{"type":"object"}`)}}}
	tests := []struct {
		provider, choice string
		tools            []Tool
		want             string // JSON of tool_choice, "" for absent
	}{
		{"openai", "required", tools, `"required"`},
		{"openai", "f", tools, `{"function":{"name":"f"},"type":"function"}`},
		{"openai", "auto", nil, ""}, // no tools: never sent
		{"openai", "", tools, ""},
		{"ollama", "required", tools, ""},
		{"ollama", "f", tools, ""},
		{"dashscope", "auto", tools, `"auto"`},
	}
	for _, tt := range tests {
		t.Run(tt.provider+"/"+tt.choice, func(t *testing.T) {
			f := newFakeServer(t, body(completion("ok", "stop", "")))
			c := newTestClient(t, tt.provider, f, newFakeClock(t), nil)
			if _, err := c.Chat(context.Background(), Request{Messages: userMsg("x"), Tools: tt.tools, ToolChoice: tt.choice}); err != nil {
				t.Fatalf("Chat: %v", err)
			}
			got, ok := f.Request(0).JSON["tool_choice"]
			switch {
			case tt.want == "" && ok:
				t.Errorf("tool_choice sent: %s", mustJSON(got))
			case tt.want != "" && mustJSON(got) != tt.want:
				t.Errorf("tool_choice = %s, want %s", mustJSON(got), tt.want)
			}
		})
	}
}

func TestVisionParts(t *testing.T) {
	msg := Message{Role: RoleUser, Parts: []Part{TextPart("what is this?"), ImagePart("image/png", []byte{0x89, 'P', 'N', 'G'})}}
	tests := []struct {
		vision bool
		want   string
	}{
		{true, `[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw=="}}]`},
		{false, `"what is this?\n[image omitted]"`},
	}
	for _, tt := range tests {
		f := newFakeServer(t, body(completion("a logo", "stop", "")))
		c := newTestClient(t, "openai", f, newFakeClock(t), func(c *Config) { c.Vision = tt.vision })
		if _, err := c.Chat(context.Background(), Request{Messages: []Message{msg}}); err != nil {
			t.Fatalf("Chat: %v", err)
		}
		msgs := f.Request(0).JSON["messages"].([]any)
		got := mustJSON(msgs[0].(map[string]any)["content"])
		if !jsonEq(t, got, tt.want) {
			t.Errorf("vision=%v: content\n got %s\nwant %s", tt.vision, got, tt.want)
		}
	}
}

func TestReasoningRoundTrip(t *testing.T) {
	// The model thinks, calls a tool; the next request carries the
	// assistant message back. DeepSeek must get reasoning_content, OpenAI
	// must not.
	stream := []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Need the "}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"time."}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"now","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`[DONE]`,
	}
	for _, tt := range []struct {
		provider string
		wantSent bool
	}{{"deepseek", true}, {"openai", false}, {"ollama", false}} {
		t.Run(tt.provider, func(t *testing.T) {
			f := newFakeServer(t, llmtest.Events(stream...), body(completion("It is noon.", "stop", "")))
			c := newTestClient(t, tt.provider, f, newFakeClock(t), nil)
			msgs := userMsg("what time is it?")
			resp, err := c.Stream(context.Background(), Request{Messages: msgs}, nil)
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if got := resp.Message.ReasoningContent; got != "Need the time." {
				t.Fatalf("reasoning = %q", got)
			}
			msgs = append(msgs, resp.Message, Message{Role: RoleTool, ToolCallID: "call_1", Content: "12:00"})
			if _, err := c.Chat(context.Background(), Request{Messages: msgs}); err != nil {
				t.Fatalf("Chat: %v", err)
			}
			sent := f.Request(1).JSON["messages"].([]any)[1].(map[string]any)
			rc, ok := sent["reasoning_content"]
			if ok != tt.wantSent {
				t.Errorf("reasoning_content sent = %v (%v), want sent=%v", ok, rc, tt.wantSent)
			}
			if ok && rc != "Need the time." {
				t.Errorf("reasoning_content = %v", rc)
			}
			if sent["content"] != nil {
				t.Errorf("assistant content with tool calls = %v, want null", sent["content"])
			}
		})
	}
}

func TestReasoningField(t *testing.T) {
	// Ollama and OpenRouter call it "reasoning".
	f := newFakeServer(t, body(`{"choices":[{"message":{"role":"assistant","content":"4","reasoning":"2+2"},"finish_reason":"stop"}]}`))
	c := newTestClient(t, "ollama", f, newFakeClock(t), nil)
	resp, err := c.Chat(context.Background(), Request{Messages: userMsg("2+2")})
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	if resp.Message.ReasoningContent != "2+2" || resp.Message.Content != "4" {
		t.Errorf("got %+v", resp.Message)
	}
}

func TestRetries(t *testing.T) {
	ok := body(completion("fine", "stop", ""))
	date := clockStart.Add(9 * time.Second).Format(http.TimeFormat)
	tests := []struct {
		name       string
		script     []llmtest.Reply
		wantErr    error
		wantReqs   int
		wantSleeps []time.Duration
		wantStatus int
	}{
		{
			name:       "429 Retry-After seconds then success",
			script:     []llmtest.Reply{{Status: 429, Header: http.Header{"Retry-After": {"7"}}, Body: `{"error":{"message":"slow down","type":"rate_limit_exceeded"}}`}, ok},
			wantReqs:   2,
			wantSleeps: []time.Duration{7 * time.Second},
		},
		{
			name:       "429 Retry-After date then success",
			script:     []llmtest.Reply{{Status: 429, Header: http.Header{"Retry-After": {date}}}, ok},
			wantReqs:   2,
			wantSleeps: []time.Duration{9 * time.Second},
		},
		{
			name:       "500 then success",
			script:     []llmtest.Reply{{Status: 500, Body: `{"error":{"message":"boom"}}`}, ok},
			wantReqs:   2,
			wantSleeps: []time.Duration{375 * time.Millisecond}, // 500ms base, jitter 0.5: 250+125
		},
		{
			name:       "503 always: bounded attempts",
			script:     []llmtest.Reply{{Status: 503}},
			wantErr:    ErrServer,
			wantReqs:   4,
			wantSleeps: []time.Duration{375 * time.Millisecond, 750 * time.Millisecond, 1500 * time.Millisecond},
			wantStatus: 503,
		},
		{
			name:       "400 not retried",
			script:     []llmtest.Reply{{Status: 400, Body: `{"error":{"message":"bad messages","code":"invalid_request_error"}}`}, ok},
			wantErr:    ErrBadRequest,
			wantReqs:   1,
			wantStatus: 400,
		},
		{
			name:       "401 auth",
			script:     []llmtest.Reply{{Status: 401, Body: `{"error":{"message":"Incorrect API key"}}`}, ok},
			wantErr:    ErrAuth,
			wantReqs:   1,
			wantStatus: 401,
		},
		{
			name:       "403 auth",
			script:     []llmtest.Reply{{Status: 403, Body: `forbidden`}, ok},
			wantErr:    ErrAuth,
			wantReqs:   1,
			wantStatus: 403,
		},
		{
			name:       "quota spent not retried",
			script:     []llmtest.Reply{{Status: 429, Body: `{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}`}, ok},
			wantErr:    ErrRateLimited,
			wantReqs:   1,
			wantStatus: 429,
		},
		{
			name:       "Retry-After too long returned at once",
			script:     []llmtest.Reply{{Status: 429, Header: http.Header{"Retry-After": {"3600"}}}, ok},
			wantErr:    ErrRateLimited,
			wantReqs:   1,
			wantStatus: 429,
		},
		{
			name:       "content filter 400",
			script:     []llmtest.Reply{{Status: 400, Body: `{"code":"DataInspectionFailed","message":"x","error":{"code":"data_inspection_failed","message":"Input data may contain inappropriate content."}}`}, ok},
			wantErr:    ErrContentFilter,
			wantReqs:   1,
			wantStatus: 400,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, tt.script...)
			clk := newFakeClock(t)
			c := newTestClient(t, "openai", f, clk, nil)
			var notices []time.Duration
			ctx := WithRetryNotice(context.Background(), func(_ int, d time.Duration, _ error) { notices = append(notices, d) })
			resp, err := c.Chat(ctx, Request{Messages: userMsg("hi")})
			if mustJSON(notices) != mustJSON(tt.wantSleeps) {
				t.Errorf("retry notices = %v, want one per sleep %v", notices, tt.wantSleeps)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Chat: %v", err)
				}
				if resp.Message.Content != "fine" {
					t.Errorf("content = %q", resp.Message.Content)
				}
			} else {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				var ae *APIError
				if !errors.As(err, &ae) || ae.Status != tt.wantStatus || ae.Attempts != tt.wantReqs {
					t.Errorf("APIError = %+v, want status %d, attempts %d", ae, tt.wantStatus, tt.wantReqs)
				}
			}
			if got := f.Count(); got != tt.wantReqs {
				t.Errorf("%d requests, want %d", got, tt.wantReqs)
			}
			if got := clk.Sleeps(); mustJSON(got) != mustJSON(tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
			}
		})
	}
}

func TestAPIErrorMessage(t *testing.T) {
	f := newFakeServer(t, llmtest.Reply{Status: 401, Body: `{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}`})
	c := newTestClient(t, "deepseek", f, newFakeClock(t), nil)
	_, err := c.Chat(context.Background(), Request{Messages: userMsg("hi")})
	want := "llm: deepseek: authentication failed (HTTP 401): Incorrect API key provided"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestMalformed(t *testing.T) {
	tests := []struct {
		name string
		rp   llmtest.Reply
		opts []Option
	}{
		{"not JSON", body(`{"choices": [`), nil},
		{"HTML", body(`<html>gateway</html>`), nil},
		{"no choices", body(`{"choices":[]}`), nil},
		{"content a number", body(`{"choices":[{"message":{"content":42}}]}`), nil},
		{"too large", body(completion(strings.Repeat("x", 4096), "stop", "")), []Option{WithMaxBodyBytes(1024)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, tt.rp)
			c := newTestClient(t, "openai", f, newFakeClock(t), nil, tt.opts...)
			_, err := c.Chat(context.Background(), Request{Messages: userMsg("hi")})
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if n := f.Count(); n != 1 {
				t.Errorf("%d requests, want 1 (malformed is not retried)", n)
			}
		})
	}
}

func TestErrorInBody200(t *testing.T) {
	f := newFakeServer(t, body(`{"error":{"message":"upstream overloaded"}}`), body(completion("ok", "stop", "")))
	c := newTestClient(t, "custom", f, newFakeClock(t), nil)
	resp, err := c.Chat(context.Background(), Request{Messages: userMsg("hi")})
	if err != nil || resp.Message.Content != "ok" {
		t.Fatalf("Chat = %+v, %v; want a retry to succeed", resp, err)
	}
}

func TestContentFilterFinish(t *testing.T) {
	f := newFakeServer(t, body(completion("partial", "content_filter", "")))
	c := newTestClient(t, "openai", f, newFakeClock(t), nil)
	resp, err := c.Chat(context.Background(), Request{Messages: userMsg("hi")})
	if !errors.Is(err, ErrContentFilter) {
		t.Fatalf("err = %v, want ErrContentFilter", err)
	}
	if resp.Message.Content != "partial" || resp.FinishReason != FinishContentFilter {
		t.Errorf("resp = %+v", resp)
	}
}

func TestHungServer(t *testing.T) {
	t.Run("caller cancels", func(t *testing.T) {
		f := newFakeServer(t, llmtest.Hang())
		c := newTestClient(t, "openai", f, newFakeClock(t), nil)
		// The caller's deadline passes once the server holds the request.
		caller := clock.NewFake(time.Time{})
		ctx, cancel := clock.WithTimeout(context.Background(), caller, time.Minute)
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := c.Chat(ctx, Request{Messages: userMsg("hi")})
			errc <- err
		}()
		f.Wait(1)
		caller.Advance(time.Minute)
		err := <-errc
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want context.DeadlineExceeded", err)
		}
		var ae *APIError
		if errors.As(err, &ae) {
			t.Errorf("caller's cancellation came back as an APIError: %v", err)
		}
		if n := f.Count(); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("config timeout", func(t *testing.T) {
		f := newFakeServer(t, llmtest.Hang())
		clk := newFakeClock(t)
		c := newTestClient(t, "openai", f, clk, func(c *Config) { c.Timeout = 50 * time.Millisecond }, WithRetry(RetryPolicy{MaxAttempts: 2}))
		_, err := c.Stream(context.Background(), Request{Messages: userMsg("hi")}, nil)
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrUnavailable and DeadlineExceeded", err)
		}
		if n := f.Count(); n != 2 {
			t.Errorf("%d requests, want 2 (a timeout is retried)", n)
		}
	})
	t.Run("stream stalls after first fragment", func(t *testing.T) {
		// The idle timeout cuts a stream that stops sending; what arrived
		// is returned and nothing is retried (the user saw it).
		f := newFakeServer(t, stalled(llmtest.RawSSE("data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n")))
		c := newTestClient(t, "openai", f, newFakeClock(t), func(c *Config) { c.Timeout = 100 * time.Millisecond })
		var got []string
		resp, err := c.Stream(context.Background(), Request{Messages: userMsg("hi")}, func(d Delta) error {
			got = append(got, d.Content)
			return nil
		})
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrUnavailable and DeadlineExceeded", err)
		}
		if resp.Message.Content != "Hel" || len(got) != 1 {
			t.Errorf("content = %q, deltas = %q", resp.Message.Content, got)
		}
		if n := f.Count(); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
}

func TestBreaker(t *testing.T) {
	f := newFakeServer(t, llmtest.Reply{Status: 500})
	clk := newFakeClock(t)
	c := newTestClient(t, "openai", f, clk, nil, WithRetry(RetryPolicy{MaxAttempts: 1}), WithBreaker(3, 30*time.Second))
	chat := func() error {
		_, err := c.Chat(context.Background(), Request{Messages: userMsg("hi")})
		return err
	}
	for i := 0; i < 3; i++ {
		if err := chat(); !errors.Is(err, ErrServer) {
			t.Fatalf("call %d: err = %v, want ErrServer", i, err)
		}
	}
	if got := c.BreakerState(); got != "open" {
		t.Fatalf("state = %q, want open", got)
	}
	err := chat()
	var ae *APIError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ae) || ae.RetryAfter != 30*time.Second {
		t.Fatalf("open breaker: err = %v (%+v), want ErrUnavailable with RetryAfter 30s", err, ae)
	}
	if n := f.Count(); n != 3 {
		t.Fatalf("%d requests, want 3 (open breaker sends nothing)", n)
	}

	// Half-open probe fails: open again.
	clk.Advance(31 * time.Second)
	if got := c.BreakerState(); got != "half-open" {
		t.Fatalf("state = %q, want half-open", got)
	}
	if err := chat(); !errors.Is(err, ErrServer) {
		t.Fatalf("probe: err = %v, want ErrServer", err)
	}
	if err := chat(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("after failed probe: err = %v, want ErrUnavailable", err)
	}

	// Recovers: the next probe succeeds and closes it.
	f.Default(body(completion("back", "stop", "")))
	clk.Advance(31 * time.Second)
	if err := chat(); err != nil {
		t.Fatalf("recovery probe: %v", err)
	}
	if got := c.BreakerState(); got != "closed" {
		t.Errorf("state = %q, want closed", got)
	}
	if err := chat(); err != nil {
		t.Errorf("after recovery: %v", err)
	}
}

func TestBreakerRetryStops(t *testing.T) {
	// Retries stop when the breaker opens mid-way.
	f := newFakeServer(t, llmtest.Reply{Status: 502})
	c := newTestClient(t, "openai", f, newFakeClock(t), nil, WithRetry(RetryPolicy{MaxAttempts: 10}), WithBreaker(2, time.Minute))
	_, err := c.Chat(context.Background(), Request{Messages: userMsg("hi")})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := f.Count(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
		wantURL string
	}{
		{"openai", Config{Provider: "openai", BaseURL: "https://api.openai.com/v1", Model: "m"}, "", "https://api.openai.com/v1/chat/completions"},
		{"trailing slash", Config{Provider: "vllm", BaseURL: "http://h:8000/v1/", Model: "m"}, "", "http://h:8000/v1/chat/completions"},
		{"unknown provider", Config{Provider: "anthropic", Model: "m"}, "unknown provider", ""},
		{"custom needs url", Config{Provider: "custom", Model: "m"}, "needs a base_url", ""},
		{"no default url", Config{Provider: "openai", Model: "m"}, "needs a base_url", ""},
		{"bad url", Config{Provider: "custom", BaseURL: "ftp://x", Model: "m"}, "want an http", ""},
		{"no model", Config{Provider: "ollama", BaseURL: "http://127.0.0.1:11434/v1"}, "model is required", ""},
	}
	for _, tt := range tests {
		c, err := New(tt.cfg)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if c.url != tt.wantURL {
			t.Errorf("%s: url = %q, want %q", tt.name, c.url, tt.wantURL)
		}
	}
}

func TestModel(t *testing.T) {
	c, err := New(Config{Provider: "ollama", BaseURL: "http://127.0.0.1:11434/v1", Model: "big", VoiceModel: "small"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Model(false) != "big" || c.Model(true) != "small" {
		t.Errorf("Model = %q, %q", c.Model(false), c.Model(true))
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(time.Minute).Format(http.TimeFormat)}, time.Minute},
		{map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After": "-4"}, 0},
		{map[string]string{"retry-after-ms": "250", "Retry-After": "1"}, 250 * time.Millisecond},
		{nil, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.h {
			h.Set(k, v)
		}
		if got := parseRetryAfter(h, now); got != tt.want {
			t.Errorf("parseRetryAfter(%v) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestAccounting(t *testing.T) {
	var a Accounting
	a.Add("wecom:alice", Usage{10, 5, 15})
	a.Add("wecom:alice", Usage{1, 2, 3})
	a.Add("voice:desk", Usage{7, 0, 7})
	got := a.Snapshot()
	if want := (UserUsage{Usage{11, 7, 18}, 2}); got["wecom:alice"] != want {
		t.Errorf("alice = %+v, want %+v", got["wecom:alice"], want)
	}
	if want := (UserUsage{Usage{7, 0, 7}, 1}); got["voice:desk"] != want {
		t.Errorf("desk = %+v, want %+v", got["voice:desk"], want)
	}
	a.Add("voice:desk", Usage{1, 1, 2})
	if got["voice:desk"].Requests != 1 {
		t.Errorf("Snapshot is not a copy")
	}
}
