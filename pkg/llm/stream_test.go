package llm

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"agent/pkg/llm/llmtest"
)

func TestStreamText(t *testing.T) {
	f := newFakeServer(t, llmtest.Events(
		`{"id":"c1","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}]}`,
		`{"id":"c1","choices":[{"index":0,"delta":{"content":"lo, "}}]}`,
		`{"id":"c1","choices":[{"index":0,"delta":{"content":"world."},"finish_reason":null}]}`,
		`{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
		`{"id":"c1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`,
		`[DONE]`,
	))
	c := newTestClient(t, "openai", f, newFakeClock(t), nil)
	var frags []string
	resp, err := c.Stream(context.Background(), Request{Messages: userMsg("hi")}, func(d Delta) error {
		frags = append(frags, d.Content)
		return nil
	})
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if got, want := strings.Join(frags, "|"), "Hel|lo, |world."; got != want {
		t.Errorf("fragments = %q, want %q", got, want)
	}
	if resp.Message.Content != "Hello, world." || resp.FinishReason != FinishLength || resp.Model != "gpt-4o" {
		t.Errorf("resp = %+v", resp)
	}
	if want := (Usage{9, 3, 12}); resp.Usage != want {
		t.Errorf("usage = %+v, want %+v", resp.Usage, want)
	}
	r := f.Request(0)
	if got := mustJSON(r.JSON["stream_options"]); got != `{"include_usage":true}` || r.JSON["stream"] != true {
		t.Errorf("stream = %v, stream_options = %s", r.JSON["stream"], got)
	}
	if got := r.Header.Get("Accept"); got != "text/event-stream" {
		t.Errorf("Accept = %q", got)
	}
}

func TestStreamUsageOptionPerProvider(t *testing.T) {
	for _, tt := range []struct {
		provider string
		want     bool
	}{{"openai", true}, {"deepseek", true}, {"dashscope", true}, {"vllm", true}, {"ollama", false}, {"custom", false}} {
		f := newFakeServer(t, llmtest.Events(`{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}`, `[DONE]`))
		c := newTestClient(t, tt.provider, f, newFakeClock(t), nil)
		if _, err := c.Stream(context.Background(), Request{Messages: userMsg("hi")}, nil); err != nil {
			t.Fatalf("%s: %v", tt.provider, err)
		}
		if _, got := f.Request(0).JSON["stream_options"]; got != tt.want {
			t.Errorf("%s: stream_options sent = %v, want %v", tt.provider, got, tt.want)
		}
	}
}

func TestStreamToolCalls(t *testing.T) {
	weather := ToolCall{ID: "call_w", Type: "function", Function: FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}
	clock := ToolCall{ID: "call_t", Type: "function", Function: FunctionCall{Name: "get_time", Arguments: `{"tz":"UTC"}`}}
	tests := []struct {
		name   string
		events []string
		want   []ToolCall
		finish string
	}{
		{
			name: "openai parallel split across chunks",
			events: []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_w","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_t","type":"function","function":{"name":"get_time","arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Paris\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\":"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"UTC\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`[DONE]`,
			},
			want:   []ToolCall{weather, clock},
			finish: FinishToolCalls,
		},
		{
			name: "dashscope empty id in later chunks",
			events: []string{
				`{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"id":"call_w","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"","type":"function","function":{"arguments":"\"Paris\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_t","type":"function","function":{"name":"get_time","arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"","type":"function","function":{"name":"","arguments":"{\"tz\":\"UTC\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"tool_calls"}]}`,
				`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`,
				`[DONE]`,
			},
			want:   []ToolCall{weather, clock},
			finish: FinishToolCalls,
		},
		{
			name: "ollama whole calls in one chunk, finish stop",
			events: []string{
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_w","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_t","index":1,"type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`,
				`[DONE]`,
			},
			want:   []ToolCall{weather, clock},
			finish: FinishToolCalls,
		},
		{
			name: "whole calls sharing index 0",
			events: []string{
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_w","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_t","index":0,"type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]}}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`[DONE]`,
			},
			want:   []ToolCall{weather, clock},
			finish: FinishToolCalls,
		},
		{
			name: "no index field",
			events: []string{
				`{"choices":[{"delta":{"tool_calls":[{"id":"call_w","type":"function","function":{"name":"get_weather","arguments":"{\"city\""}}]}}]}`,
				`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":\"Paris\"}"}}]}}]}`,
				`{"choices":[{"delta":{"tool_calls":[{"id":"call_t","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]}}]}`,
				`{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}`,
				`[DONE]`,
			},
			want:   []ToolCall{weather, clock},
			finish: FinishToolCalls,
		},
		{
			name: "out of order indexes, missing id",
			events: []string{
				`{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_t","function":{"name":"get_time","arguments":"{\"tz\":\"UTC\"}"}}]}}]}`,
				`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}]}`,
				`{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}`,
				`[DONE]`,
			},
			want:   []ToolCall{{ID: "call_0", Type: "function", Function: weather.Function}, clock},
			finish: FinishToolCalls,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, llmtest.Events(tt.events...))
			c := newTestClient(t, "dashscope", f, newFakeClock(t), nil)
			var deltas int
			resp, err := c.Stream(context.Background(), Request{Messages: userMsg("weather and time?")}, func(d Delta) error {
				deltas += len(d.ToolCalls)
				return nil
			})
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			if got, want := mustJSON(resp.Message.ToolCalls), mustJSON(tt.want); got != want {
				t.Errorf("tool calls\n got %s\nwant %s", got, want)
			}
			if resp.FinishReason != tt.finish {
				t.Errorf("finish = %q, want %q", resp.FinishReason, tt.finish)
			}
			if deltas == 0 {
				t.Errorf("no tool-call deltas reached the callback")
			}
		})
	}
}

func TestStreamFailures(t *testing.T) {
	tests := []struct {
		name     string
		rp       llmtest.Reply
		wantErr  error
		wantText string
		wantReqs int
	}{
		{
			name:     "truncated: no [DONE], no finish",
			rp:       llmtest.RawSSE("data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"conte"),
			wantErr:  ErrMalformed,
			wantText: "Hel",
			wantReqs: 1,
		},
		{
			name:     "truncated before any fragment",
			rp:       llmtest.RawSSE(": keep-alive\n\n"),
			wantErr:  ErrMalformed,
			wantReqs: 1,
		},
		{
			name:     "bad JSON chunk",
			rp:       llmtest.Events(`{"choices":[{"delta":{"content":"a"}}]}`, `{not json}`, `[DONE]`),
			wantErr:  ErrMalformed,
			wantText: "a",
			wantReqs: 1,
		},
		{
			name:     "error event before any fragment is retried",
			rp:       llmtest.Events(`{"error":{"message":"overloaded","code":"server_error"}}`),
			wantErr:  ErrServer,
			wantReqs: 4,
		},
		{
			name:     "line too long",
			rp:       llmtest.RawSSE("data: " + strings.Repeat("x", maxSSELine+10) + "\n\n"),
			wantErr:  ErrMalformed,
			wantReqs: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t, tt.rp)
			c := newTestClient(t, "openai", f, newFakeClock(t), nil)
			resp, err := c.Stream(context.Background(), Request{Messages: userMsg("hi")}, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if resp.Message.Content != tt.wantText {
				t.Errorf("partial content = %q, want %q", resp.Message.Content, tt.wantText)
			}
			if n := f.Count(); n != tt.wantReqs {
				t.Errorf("%d requests, want %d", n, tt.wantReqs)
			}
		})
	}
}

func TestStreamTooLarge(t *testing.T) {
	var ev []string
	for i := 0; i < 100; i++ {
		ev = append(ev, `{"choices":[{"delta":{"content":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}]}`)
	}
	f := newFakeServer(t, llmtest.Events(append(ev, `[DONE]`)...))
	c := newTestClient(t, "openai", f, newFakeClock(t), nil, WithMaxBodyBytes(2048))
	_, err := c.Stream(context.Background(), Request{Messages: userMsg("hi")}, nil)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
}

func TestStreamCallbackError(t *testing.T) {
	stop := errors.New("user hung up")
	f := newFakeServer(t, llmtest.Events(`{"choices":[{"delta":{"content":"a"}}]}`, `{"choices":[{"delta":{"content":"b"}}]}`, `[DONE]`))
	c := newTestClient(t, "openai", f, newFakeClock(t), nil)
	_, err := c.Stream(context.Background(), Request{Messages: userMsg("hi")}, func(Delta) error { return stop })
	if err != stop {
		t.Fatalf("err = %v, want the callback's error as is", err)
	}
	if n := f.Count(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestStreamServerIgnoresStream(t *testing.T) {
	f := newFakeServer(t, body(completion("whole", "stop", "")))
	c := newTestClient(t, "custom", f, newFakeClock(t), nil)
	var got string
	resp, err := c.Stream(context.Background(), Request{Messages: userMsg("hi")}, func(d Delta) error {
		got += d.Content
		return nil
	})
	if err != nil || resp.Message.Content != "whole" || got != "whole" {
		t.Fatalf("Stream = %q (callback %q), %v", resp.Message.Content, got, err)
	}
}

func TestStreamSSEVariants(t *testing.T) {
	// CRLF, no space after "data:", comments, event: lines, a multi-line
	// event, and no blank line between events.
	raw := ": OPENROUTER PROCESSING\r\n\r\n" +
		"event: message\r\ndata:{\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\n" +
		"data: {\"choices\":[{\"delta\":\n" +
		"data: {\"content\":\"b\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"reasoning\":\"r\",\"content\":\"c\"}}]}\n" +
		"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n" +
		"data: [DONE]\n"
	sr := &streamReader{}
	resp, err := sr.read(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if resp.Message.Content != "abc" || resp.Message.ReasoningContent != "r" || resp.FinishReason != FinishStop {
		t.Errorf("resp = %+v", resp)
	}
}

func TestStreamFinishWithoutDone(t *testing.T) {
	// A finish_reason without [DONE] is a complete reply.
	sr := &streamReader{}
	resp, err := sr.read(strings.NewReader("data: {\"choices\":[{\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n"))
	if err != nil || resp.Message.Content != "ok" {
		t.Fatalf("read = %+v, %v", resp, err)
	}
}

func FuzzStream(f *testing.F) {
	seeds := []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\"}}]}}]}\n\n" +
			"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"\",\"function\":{\"arguments\":\"\\\":1}\"}}]}}]}\n\ndata: [DONE]\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":{\"a\":1}}}]}}]}\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-5,\"id\":\"q\"}]}}]}\n",
		"data: {\"error\":\"x\"}\n\n",
		"data: {\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}}],\"usage\":{\"total_tokens\":1}}\n",
		": c\r\n\r\nevent: e\r\ndata:\r\ndata\r\n\r\n",
		"data: {\"choices\":null}\ndata: [DONE]",
		"\x00\xff\n\n\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sr := &streamReader{emit: func(Delta) error { return nil }}
		resp, err := sr.read(bytes.NewReader(data))
		if err != nil {
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error is not an *APIError: %T %v", err, err)
			}
			_ = ae.Error()
		}
		for _, tc := range resp.Message.ToolCalls {
			if tc.ID == "" || tc.Function.Arguments == "" {
				t.Fatalf("incomplete tool call %+v", tc)
			}
		}
	})
}
