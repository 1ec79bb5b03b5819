package llmtest

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Reply is one answer of the server. The zero Reply is a completion with
// empty text. A completion (Text, Chunks, Reasoning, ToolCalls) is sent as
// one JSON body, or as SSE chunks when the request asked for stream. Body
// or Events replace the completion with exactly those bytes; Status,
// Header, Cut, Stall and Hang shape the exchange.
type Reply struct {
	Text string
	// Chunks, when set, is the text in the fragments a stream sends (Text
	// is then ignored; a JSON answer carries them joined). Without it the
	// text goes in one fragment.
	Chunks    []string
	Reasoning string // reasoning_content, sent before the text
	ToolCalls []ToolCall
	// Finish is finish_reason; "" means "tool_calls" with tool calls,
	// "stop" without.
	Finish string
	Usage  *Usage // nil: 10 prompt + 5 completion tokens
	Model  string // "" echoes the request's model
	// NoStream answers with one JSON body even when the request asked for
	// a stream (servers that ignore "stream").
	NoStream bool

	// Status is the HTTP status; 0 means 200. A status of 400 or more with
	// no Body gets an OpenAI-style error body.
	Status int
	Header http.Header
	// Body is written as is (Content-Type application/json unless Header
	// sets one) instead of a completion.
	Body string
	// Events are SSE data payloads written as "data: <event>\n\n", each
	// flushed, instead of a completion; nothing is added (no [DONE] unless
	// it is one of them).
	Events []string

	// Cut drops the connection after the reply's beginning: a streamed
	// completion's fragments without the finish and [DONE], Events and
	// Body in full, half of a JSON completion. The client sees the body
	// end unexpectedly.
	Cut bool
	// Stall is Cut without the cut: the beginning is flushed, then the
	// server waits until the request's context ends or the server closes.
	Stall bool
	// Hang answers nothing: the server waits until the request's context
	// ends or the server closes (the rest of the Reply is ignored).
	Hang bool
}

// Usage is the token usage a reply reports.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
}

var defaultUsage = Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}

// created is the "created" timestamp of every completion: fixed, so
// replies are reproducible.
const created = 1767225600 // 2026-01-01T00:00:00Z

// Text is a completion answering text.
func Text(text string) Reply { return Reply{Text: text} }

// Stream is a completion whose text is streamed in these fragments (and
// sent joined to a request that does not stream).
func Stream(fragments ...string) Reply { return Reply{Chunks: fragments} }

// Calls is a completion calling tools (finish_reason "tool_calls").
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Call is one tool call with JSON arguments; its id is assigned by the
// server ("call_<n>").
func Call(name, arguments string) ToolCall { return ToolCall{Name: name, Arguments: arguments} }

// Error is an error response with an OpenAI-style body:
// {"error":{"message":...,"type":...,"param":null,"code":...}}. An empty
// type or code is sent as null.
func Error(status int, typ, code, message string) Reply {
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	return Reply{Status: status, Body: mustJSON(map[string]any{"error": map[string]any{
		"message": message, "type": null(typ), "param": nil, "code": null(code),
	}})}
}

// RateLimited is a 429 with Retry-After (whole seconds, rounded up; none
// when retryAfter is 0), as OpenAI sends when requests come too fast.
func RateLimited(retryAfter time.Duration) Reply {
	r := Error(http.StatusTooManyRequests, "requests", "rate_limit_exceeded",
		"Rate limit reached for requests. Please try again later.")
	if retryAfter > 0 {
		r.Header = http.Header{"Retry-After": {strconv.Itoa(int(math.Ceil(retryAfter.Seconds())))}}
	}
	return r
}

// QuotaExceeded is the 429 of a spent quota (not worth retrying).
func QuotaExceeded() Reply {
	return Error(http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota",
		"You exceeded your current quota, please check your plan and billing details.")
}

// ServerError is a 5xx (500 when status is 0).
func ServerError(status int) Reply {
	if status == 0 {
		status = http.StatusInternalServerError
	}
	msg := "The server had an error while processing your request. Sorry about that!"
	if status == http.StatusServiceUnavailable {
		msg = "The engine is currently overloaded, please try again later."
	}
	return Error(status, "server_error", "", msg)
}

// Unauthorized is the 401 of a wrong or missing API key.
func Unauthorized() Reply {
	return Error(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
		"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.")
}

// BadRequest is a 400 invalid_request_error.
func BadRequest(message string) Reply {
	return Error(http.StatusBadRequest, "invalid_request_error", "", message)
}

// ContentFiltered is the 400 a provider's content filter answers a prompt
// with (code "content_filter"). For a reply cut by the filter, send
// Reply{Text: "partial", Finish: "content_filter"}.
func ContentFiltered() Reply {
	return Error(http.StatusBadRequest, "", "content_filter",
		"The response was filtered due to the prompt triggering the content management policy.")
}

// Malformed is a 200 whose body is not a completion: body, or a
// truncated JSON object when body is "".
func Malformed(body string) Reply {
	if body == "" {
		body = `{"id":"chatcmpl-0","object":"chat.completion","choices":[`
	}
	return Reply{Body: body}
}

// CutAfter streams fragments and then drops the connection (half a JSON
// body to a request that does not stream).
func CutAfter(fragments ...string) Reply { return Reply{Chunks: fragments, Cut: true} }

// Hang answers nothing until the client gives up or the server closes.
func Hang() Reply { return Reply{Hang: true} }

// Events is a 200 text/event-stream of these data payloads, as is.
func Events(payloads ...string) Reply { return Reply{Events: payloads} }

// RawSSE is a 200 text/event-stream whose body is raw, as is.
func RawSSE(raw string) Reply {
	return Reply{Body: raw, Header: http.Header{"Content-Type": {"text/event-stream"}}}
}

// write sends r as the answer to req.
func (s *Server) write(w http.ResponseWriter, req *Request, r Reply) {
	if r.Hang {
		s.hang(req.ctx)
		return
	}
	for k, v := range r.Header {
		w.Header()[k] = v
	}
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	body := r.Body
	if body == "" && r.Events == nil && status >= 400 {
		body = Error(status, "", "", http.StatusText(status)).Body
	}
	events := r.Events
	var tail []string // a streamed completion's end: what Cut and Stall leave out
	completion := body == "" && events == nil
	streamed := completion && req.Stream && !r.NoStream
	switch {
	case streamed:
		events, tail = s.chunks(req, r)
	case completion:
		body = s.completion(req, r)
	}
	sse := events != nil
	if w.Header().Get("Content-Type") == "" {
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
	}
	if sse {
		w.Header().Set("Cache-Control", "no-cache")
	}
	if (r.Cut || r.Stall) && completion && !streamed {
		body = body[:len(body)/2]
	}
	w.WriteHeader(status)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	if sse {
		for _, ev := range events {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			flush()
		}
	} else {
		io.WriteString(w, body)
	}
	switch {
	case r.Cut:
		flush()
		panic(http.ErrAbortHandler) // closes the connection mid-body
	case r.Stall:
		flush()
		s.hang(req.ctx)
		return
	}
	for _, ev := range tail {
		fmt.Fprintf(w, "data: %s\n\n", ev)
		flush()
	}
}

// content is the reply's text.
func (r Reply) content() string {
	if r.Chunks != nil {
		return strings.Join(r.Chunks, "")
	}
	return r.Text
}

func (r Reply) finish() string {
	switch {
	case r.Finish != "":
		return r.Finish
	case len(r.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

func (r Reply) usage() map[string]int {
	u := defaultUsage
	if r.Usage != nil {
		u = *r.Usage
	}
	return map[string]int{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens, "total_tokens": u.TotalTokens}
}

func (r Reply) model(req *Request) string {
	if r.Model != "" {
		return r.Model
	}
	return req.Model
}

func callID(c ToolCall, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return "call_" + strconv.Itoa(i)
}

// completion is the JSON body of a non-streamed answer.
func (s *Server) completion(req *Request, r Reply) string {
	msg := map[string]any{"role": "assistant", "content": r.content()}
	if r.Reasoning != "" {
		msg["reasoning_content"] = r.Reasoning
	}
	if len(r.ToolCalls) > 0 {
		if r.content() == "" {
			msg["content"] = nil
		}
		calls := make([]any, 0, len(r.ToolCalls))
		for i, c := range r.ToolCalls {
			calls = append(calls, map[string]any{"id": callID(c, i), "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = calls
	}
	return mustJSON(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", req.N), "object": "chat.completion", "created": created, "model": r.model(req),
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": r.finish()}},
		"usage":   r.usage(),
	})
}

// chunks are the SSE events of a streamed answer, as OpenAI sends them:
// the role, reasoning, text fragments, each tool call (id and name, then
// its arguments in two pieces), then (tail) the finish, the usage when
// the request asked for it, and [DONE].
func (s *Server) chunks(req *Request, r Reply) (events, tail []string) {
	id, model := fmt.Sprintf("chatcmpl-%d", req.N), r.model(req)
	chunk := func(delta map[string]any, finish any) string {
		return mustJSON(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
	}
	events = append(events, chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if r.Reasoning != "" {
		events = append(events, chunk(map[string]any{"reasoning_content": r.Reasoning}, nil))
	}
	frags := r.Chunks
	if frags == nil && r.Text != "" {
		frags = []string{r.Text}
	}
	for _, f := range frags {
		events = append(events, chunk(map[string]any{"content": f}, nil))
	}
	for i, c := range r.ToolCalls {
		events = append(events, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": callID(c, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
		half := len(c.Arguments) / 2
		for half > 0 && !utf8.RuneStart(c.Arguments[half]) {
			half--
		}
		for _, piece := range []string{c.Arguments[:half], c.Arguments[half:]} {
			if piece != "" {
				events = append(events, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i,
					"function": map[string]any{"arguments": piece}}}}, nil))
			}
		}
	}
	tail = append(tail, chunk(map[string]any{}, r.finish()))
	if req.StreamUsage {
		tail = append(tail, mustJSON(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": r.usage()}))
	}
	tail = append(tail, "[DONE]")
	return events, tail
}
