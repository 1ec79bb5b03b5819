package llmtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/llm"
	"agent/pkg/llm/llmtest"
)

// client is the real client on srv, without retries or breaker.
func client(t *testing.T, srv *llmtest.Server, provider string) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{Provider: provider, BaseURL: srv.BaseURL(), APIKey: "sk-test", Model: "test-model", Timeout: 10 * time.Second},
		llm.WithRetry(llm.RetryPolicy{MaxAttempts: 1}), llm.WithBreaker(-1, 0))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func user(text string) llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "be brief"}, {Role: llm.RoleUser, Content: text}}}
}

func TestScriptChatAndStream(t *testing.T) {
	srv := llmtest.New(t, llmtest.Text("Hello there."), llmtest.Stream("Hel", "lo", "!"), llmtest.Stream("one", "two"))
	c := client(t, srv, "openai")
	ctx := context.Background()

	resp, err := c.Chat(ctx, user("hi"))
	if err != nil || resp.Message.Content != "Hello there." || resp.FinishReason != llm.FinishStop || resp.Usage.TotalTokens != 15 || resp.Model != "test-model" {
		t.Fatalf("Chat = %+v, %v", resp, err)
	}
	var frags []string
	resp, err = c.Stream(ctx, user("again"), func(d llm.Delta) error {
		frags = append(frags, d.Content)
		return nil
	})
	if err != nil || resp.Message.Content != "Hello!" || strings.Join(frags, "|") != "Hel|lo|!" || resp.Usage.TotalTokens != 15 {
		t.Fatalf("Stream = %+v (fragments %q), %v", resp, frags, err)
	}
	// Chunks to a request that does not stream: the text joined.
	if resp, err = c.Chat(ctx, user("third")); err != nil || resp.Message.Content != "onetwo" {
		t.Fatalf("Chat of chunks = %+v, %v", resp, err)
	}

	if n := srv.Count(); n != 3 {
		t.Fatalf("Count = %d", n)
	}
	r0, r1 := srv.Request(0), srv.Request(1)
	if r0.Stream || !r1.Stream || !r1.StreamUsage || r0.Model != "test-model" || r0.Path != "/v1/chat/completions" {
		t.Errorf("decoded: %+v / %+v", r0, r1)
	}
	if r0.System() != "be brief" || r0.LastUser() != "hi" || r0.Last().Role != "user" || r1.LastUser() != "again" {
		t.Errorf("messages: %+v", r0.Messages)
	}
	if r0.Header.Get("Authorization") != "Bearer sk-test" || r0.JSON["model"] != "test-model" {
		t.Errorf("header %v, JSON %v", r0.Header, r0.JSON)
	}
	var total int64
	for _, r := range srv.Requests() {
		total += int64(len(r.Body))
	}
	if srv.BytesReceived() != total || total == 0 {
		t.Errorf("BytesReceived = %d, bodies %d", srv.BytesReceived(), total)
	}
}

func TestToolCallsRoundTrip(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			srv := llmtest.New(t,
				llmtest.Calls(llmtest.Call("get_weather", `{"city":"Zürich"}`), llmtest.ToolCall{ID: "mine", Name: "get_time", Arguments: `{}`}),
				llmtest.Text("Sunny."))
			c := client(t, srv, "deepseek")
			req := user("weather?")
			req.Tools = []llm.Tool{{Function: llm.FunctionSpec{Name: "get_weather", Description: "weather", Parameters: []byte(`{"type":"object"}`)}}}
			req.ToolChoice = "auto"
			call := c.Chat
			if stream {
				call = func(ctx context.Context, r llm.Request) (llm.Response, error) { return c.Stream(ctx, r, nil) }
			}
			resp, err := call(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := []llm.ToolCall{
				{ID: "call_0", Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Zürich"}`}},
				{ID: "mine", Type: "function", Function: llm.FunctionCall{Name: "get_time", Arguments: `{}`}},
			}
			if fmt.Sprint(resp.Message.ToolCalls) != fmt.Sprint(want) || resp.FinishReason != llm.FinishToolCalls {
				t.Fatalf("calls = %+v (%s)", resp.Message.ToolCalls, resp.FinishReason)
			}
			req.Messages = append(req.Messages, resp.Message,
				llm.Message{Role: llm.RoleTool, ToolCallID: "call_0", Name: "get_weather", Content: "sunny"},
				llm.Message{Role: llm.RoleTool, ToolCallID: "mine", Name: "get_time", Content: "noon"})
			if resp, err = call(context.Background(), req); err != nil || resp.Message.Content != "Sunny." {
				t.Fatalf("second call = %+v, %v", resp, err)
			}
			first, second := srv.Request(0), srv.Request(1)
			if got := first.ToolNames(); len(got) != 1 || got[0] != "get_weather" || first.Tools[0].Description != "weather" ||
				string(first.Tools[0].Parameters) != `{"type":"object"}` || string(first.ToolChoice) != `"auto"` {
				t.Errorf("tools sent: %+v, choice %s", first.Tools, first.ToolChoice)
			}
			asst := second.Messages[2]
			if asst.Role != "assistant" || !asst.Null || len(asst.ToolCalls) != 2 || asst.ToolCalls[0] != (llmtest.ToolCall{ID: "call_0", Name: "get_weather", Arguments: `{"city":"Zürich"}`}) {
				t.Errorf("assistant message sent back: %+v", asst)
			}
			if last := second.Last(); last.Role != "tool" || last.ToolCallID != "mine" || last.Content != "noon" || last.Name != "get_time" {
				t.Errorf("tool result sent: %+v", last)
			}
		})
	}
}

func TestReasoningAndParts(t *testing.T) {
	srv := llmtest.New(t, llmtest.Reply{Reasoning: "2+2", Text: "4"}, llmtest.Reply{Reasoning: "hmm", Chunks: []string{"a", "b"}, Model: "other"})
	c, err := llm.New(llm.Config{Provider: "custom", BaseURL: srv.URL(), Model: "m", Vision: true}, llm.WithRetry(llm.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("what is"), llm.ImagePart("image/png", []byte("png")), llm.TextPart("this?")}}}}
	resp, err := c.Chat(context.Background(), req)
	if err != nil || resp.Message.ReasoningContent != "2+2" || resp.Message.Content != "4" {
		t.Fatalf("Chat = %+v, %v", resp, err)
	}
	resp, err = c.Stream(context.Background(), req, nil)
	if err != nil || resp.Message.ReasoningContent != "hmm" || resp.Message.Content != "ab" || resp.Model != "other" {
		t.Fatalf("Stream = %+v, %v", resp, err)
	}
	m := srv.Request(0).Last()
	if m.Content != "what is\nthis?" || len(m.Parts) != 3 || m.Parts[1].Type != "image_url" || !strings.HasPrefix(m.Parts[1].ImageURL, "data:image/png;base64,") {
		t.Errorf("parts: %+v", m)
	}
	if srv.Request(0).Path != "/chat/completions" {
		t.Errorf("path %q", srv.Request(0).Path)
	}
}

func TestFuncDefaultAndPush(t *testing.T) {
	srv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		return llmtest.Text(fmt.Sprintf("#%d re: %s", r.N, r.LastUser()))
	})
	c := client(t, srv, "custom")
	ask := func(text string) string {
		t.Helper()
		resp, err := c.Chat(context.Background(), user(text))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Message.Content
	}
	if got := ask("a"); got != "#0 re: a" {
		t.Fatalf("Func: %q", got)
	}
	srv.Push(llmtest.Text("scripted"))
	if got := ask("b"); got != "scripted" {
		t.Fatalf("a pushed reply goes before Func: %q", got)
	}
	if got := ask("c"); got != "#2 re: c" {
		t.Fatalf("after the script: %q", got)
	}
	srv.Default(llmtest.Text("always"))
	srv.Script(llmtest.Text("x"), llmtest.Text("y"))
	srv.Script(llmtest.Text("z"))
	if a, b := ask("d"), ask("e"); a != "z" || b != "always" {
		t.Fatalf("Script replaces, Default after it: %q %q", a, b)
	}
}

// recordingTB notes the failures of code under test.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Helper() {}

func TestPastTheScriptFails(t *testing.T) {
	rec := &recordingTB{TB: t}
	srv := llmtest.New(rec, llmtest.Text("only one"))
	c := client(t, srv, "custom")
	if _, err := c.Chat(context.Background(), user("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Chat(context.Background(), user("2")); !errors.Is(err, llm.ErrServer) {
		t.Fatalf("past the script: %v, want a 500", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "past the end of the script") {
		t.Fatalf("test failures: %q", rec.errors)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name       string
		reply      llmtest.Reply
		want       error
		status     int
		code       string
		retryAfter time.Duration
	}{
		{"rate limited", llmtest.RateLimited(7 * time.Second), llm.ErrRateLimited, 429, "rate_limit_exceeded", 7 * time.Second},
		{"rate limited, fraction rounds up", llmtest.RateLimited(1500 * time.Millisecond), llm.ErrRateLimited, 429, "rate_limit_exceeded", 2 * time.Second},
		{"quota", llmtest.QuotaExceeded(), llm.ErrRateLimited, 429, "insufficient_quota", 0},
		{"500", llmtest.ServerError(0), llm.ErrServer, 500, "server_error", 0},
		{"503", llmtest.ServerError(503), llm.ErrServer, 503, "server_error", 0},
		{"bare status", llmtest.Reply{Status: 502}, llm.ErrServer, 502, "", 0},
		{"401", llmtest.Unauthorized(), llm.ErrAuth, 401, "invalid_api_key", 0},
		{"400", llmtest.BadRequest("messages: too long"), llm.ErrBadRequest, 400, "invalid_request_error", 0},
		{"content filter", llmtest.ContentFiltered(), llm.ErrContentFilter, 400, "content_filter", 0},
		{"malformed", llmtest.Malformed(""), llm.ErrMalformed, 200, "", 0},
		{"not JSON", llmtest.Malformed("<html>gateway</html>"), llm.ErrMalformed, 200, "", 0},
		{"filtered finish", llmtest.Reply{Text: "partial", Finish: "content_filter"}, llm.ErrContentFilter, 200, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.New(t, tt.reply)
			_, err := client(t, srv, "openai").Chat(context.Background(), user("hi"))
			var ae *llm.APIError
			if !errors.Is(err, tt.want) || !errors.As(err, &ae) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if ae.Status != tt.status || ae.Code != tt.code || ae.RetryAfter != tt.retryAfter {
				t.Errorf("APIError = %+v; want status %d, code %q, retry after %v", ae, tt.status, tt.code, tt.retryAfter)
			}
		})
	}
}

func TestCutAndStall(t *testing.T) {
	srv := llmtest.New(t, llmtest.CutAfter("Hel", "lo"), llmtest.CutAfter("whole"), llmtest.Reply{Chunks: []string{"Hi"}, Stall: true})
	c := client(t, srv, "openai")
	var got string
	resp, err := c.Stream(context.Background(), user("hi"), func(d llm.Delta) error { got += d.Content; return nil })
	if !errors.Is(err, llm.ErrUnavailable) || resp.Message.Content != "Hello" || got != "Hello" {
		t.Fatalf("cut stream: %+v (%q), %v; want the fragments and ErrUnavailable", resp, got, err)
	}
	if _, err := c.Chat(context.Background(), user("hi")); !errors.Is(err, llm.ErrUnavailable) && !errors.Is(err, llm.ErrMalformed) {
		t.Fatalf("cut JSON body: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	resp, err = c.Stream(ctx, user("hi"), func(d llm.Delta) error {
		cancel() // the client gives up after the first fragment
		return nil
	})
	if !errors.Is(err, context.Canceled) || resp.Message.Content != "Hi" {
		t.Fatalf("stalled stream: %+v, %v", resp, err)
	}
}

func TestHangEndsWithTheRequest(t *testing.T) {
	srv := llmtest.New(t, llmtest.Hang())
	c := client(t, srv, "openai")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Chat(ctx, user("hi"))
		done <- err
	}()
	srv.Wait(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	// A hang still in progress at Close ends then.
	srv.Push(llmtest.Hang())
	go func() {
		_, err := c.Chat(context.Background(), user("again"))
		done <- err
	}()
	srv.Wait(2)
	srv.Close()
	if err := <-done; err == nil {
		t.Fatal("a request hanging at Close succeeded")
	}
	if _, err := c.Chat(context.Background(), user("after")); !errors.Is(err, llm.ErrUnavailable) {
		t.Fatalf("after Close: %v, want ErrUnavailable", err)
	}
}

func TestRawEvents(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Events(`{"choices":[{"delta":{"content":"a"}}]}`, `{"choices":[{"delta":{},"finish_reason":"stop"}]}`, `[DONE]`),
		llmtest.Events(`{"choices":[{"delta":{"content":"a"}}]}`),
		llmtest.RawSSE("data: {\"choices\":[{\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\r\n\r\n"),
		llmtest.Reply{Text: "whole", NoStream: true})
	c := client(t, srv, "openai")
	stream := func() (string, error) {
		resp, err := c.Stream(context.Background(), user("hi"), nil)
		return resp.Message.Content, err
	}
	if got, err := stream(); err != nil || got != "a" {
		t.Fatalf("events: %q %v", got, err)
	}
	if _, err := stream(); !errors.Is(err, llm.ErrMalformed) {
		t.Fatalf("events without [DONE]: %v", err)
	}
	if got, err := stream(); err != nil || got != "b" {
		t.Fatalf("raw: %q %v", got, err)
	}
	if got, err := stream(); err != nil || got != "whole" {
		t.Fatalf("NoStream: %q %v", got, err)
	}
}

func TestModelsAndKey(t *testing.T) {
	srv := llmtest.New(t)
	get := func(key string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.BaseURL()+"/models", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(""); code != 200 || !strings.Contains(body, `"id":"test-model"`) || !strings.Contains(body, `"object":"list"`) {
		t.Fatalf("models: %d %s", code, body)
	}
	srv.Models("a", "b")
	srv.RequireKey("sk-right")
	if code, body := get("sk-wrong"); code != 401 || !strings.Contains(body, "invalid_api_key") {
		t.Fatalf("wrong key: %d %s", code, body)
	}
	if code, body := get("sk-right"); code != 200 || !strings.Contains(body, `"id":"b"`) {
		t.Fatalf("right key: %d %s", code, body)
	}
	srv.ModelsReply(llmtest.Error(404, "invalid_request_error", "unknown_url", "no such route"))
	if code, _ := get("sk-right"); code != 404 {
		t.Fatalf("ModelsReply: %d", code)
	}
	if n := len(srv.ModelsRequests()); n != 4 || srv.Count() != 0 {
		t.Fatalf("%d models requests, %d chat", n, srv.Count())
	}
	// The key applies to chat too, and the request is logged.
	_, err := client(t, srv, "openai").Chat(context.Background(), user("hi"))
	if !errors.Is(err, llm.ErrAuth) || srv.Count() != 1 {
		t.Fatalf("chat with the wrong key: %v, %d logged", err, srv.Count())
	}
	resp, err := http.Get(srv.URL() + "/v1/embeddings")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("unknown route: %d", resp.StatusCode)
	}
}

func TestUnstartedAndContext(t *testing.T) {
	type key struct{}
	srv := llmtest.NewUnstarted(t)
	srv.HTTPServer().Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, key{}, "stamped")
	}
	srv.Func(func(r *llmtest.Request) llmtest.Reply {
		v, _ := r.Context().Value(key{}).(string)
		return llmtest.Text(v)
	})
	srv.Start()
	resp, err := client(t, srv, "openai").Chat(context.Background(), user("hi"))
	if err != nil || resp.Message.Content != "stamped" {
		t.Fatalf("%+v %v", resp, err)
	}
}

// A client that goes away mid-body (a daemon killed with -9 while it
// sends) is not a malformed request: nothing is logged, the test is not
// failed, and CutRequests counts it.
func TestClientGoneMidBody(t *testing.T) {
	srv := llmtest.New(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"model\":\"m\",\"mess")
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for srv.CutRequests() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cut request was not seen")
		}
		time.Sleep(time.Millisecond) // polling the server's handler, bounded
	}
	if srv.Count() != 0 {
		t.Errorf("a cut request was logged: %d", srv.Count())
	}
}
