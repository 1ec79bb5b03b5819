package redact

import (
	"context"
	"encoding/json"

	"agent/pkg/llm"
)

// LLM is what the wrapper wraps and is (*llm.Client; agent.LLM).
type LLM interface {
	Chat(ctx context.Context, req llm.Request) (llm.Response, error)
	Stream(ctx context.Context, req llm.Request, fn func(llm.Delta) error) (llm.Response, error)
}

// Client redacts every request before next sends it and restores the
// answer. Kinds is read per request (a reload applies to the next one);
// none: requests pass untouched. Counted, when set, is told how many
// values of each kind a request had replaced.
type Client struct {
	Next    LLM
	Kinds   func() []Kind
	Counted func(map[Kind]int)
}

var _ LLM = (*Client)(nil)

// Chat redacts req, asks Next and restores the answer.
func (c *Client) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	m, req := c.redact(req)
	if m == nil {
		return c.Next.Chat(ctx, req)
	}
	resp, err := c.Next.Chat(ctx, req)
	return restoreResponse(m, resp), err
}

// Stream redacts req, asks Next and restores the answer, fragments
// included (a fragment ending inside a placeholder waits for the rest).
func (c *Client) Stream(ctx context.Context, req llm.Request, fn func(llm.Delta) error) (llm.Response, error) {
	m, req := c.redact(req)
	if m == nil {
		return c.Next.Stream(ctx, req, fn)
	}
	content, reasoning := m.NewStream(), m.NewStream()
	resp, err := c.Next.Stream(ctx, req, func(d llm.Delta) error {
		d.Content = content.Write(d.Content)
		d.Reasoning = reasoning.Write(d.Reasoning)
		for i := range d.ToolCalls {
			d.ToolCalls[i].Arguments = "" // assembled and restored in the response
		}
		if d.Content == "" && d.Reasoning == "" && len(d.ToolCalls) == 0 {
			return nil
		}
		return fn(d)
	})
	if rest, rr := content.Flush(), reasoning.Flush(); (rest != "" || rr != "") && err == nil {
		if ferr := fn(llm.Delta{Content: rest, Reasoning: rr}); ferr != nil {
			err = ferr
		}
	}
	return restoreResponse(m, resp), err
}

// redact returns the request with its values replaced and the map that
// restores them (nil when nothing is redacted).
func (c *Client) redact(req llm.Request) (*Map, llm.Request) {
	var kinds []Kind
	if c.Kinds != nil {
		kinds = c.Kinds()
	}
	if len(kinds) == 0 {
		return nil, req
	}
	m := NewMap(kinds)
	msgs := make([]llm.Message, len(req.Messages))
	for i, msg := range req.Messages {
		msg.Content = m.Text(msg.Content)
		msg.ReasoningContent = m.Text(msg.ReasoningContent)
		if len(msg.Parts) > 0 {
			parts := make([]llm.Part, len(msg.Parts))
			for j, p := range msg.Parts {
				if p.Type == "text" {
					p.Text = m.Text(p.Text)
				}
				parts[j] = p
			}
			msg.Parts = parts
		}
		if len(msg.ToolCalls) > 0 {
			calls := make([]llm.ToolCall, len(msg.ToolCalls))
			for j, tc := range msg.ToolCalls {
				tc.Function.Arguments = redactJSON(m, tc.Function.Arguments)
				calls[j] = tc
			}
			msg.ToolCalls = calls
		}
		msgs[i] = msg
	}
	req.Messages = msgs
	if c.Counted != nil && m.Len() > 0 {
		c.Counted(m.Counts())
	}
	return m, req
}

// redactJSON redacts the strings of a JSON value (tool-call arguments)
// and keeps it valid JSON; text that is not JSON is redacted as text.
func redactJSON(m *Map, s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return m.Text(s)
	}
	out, err := json.Marshal(walk(v, m.Text))
	if err != nil {
		return m.Text(s)
	}
	return string(out)
}

// restoreJSON puts values back into a JSON value's strings (left as the
// model wrote them when they hold no placeholder).
func restoreJSON(m *Map, s string) string {
	if !rePH.MatchString(s) {
		return s
	}
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return m.Restore(s)
	}
	out, err := json.Marshal(walk(v, m.Restore))
	if err != nil {
		return m.Restore(s)
	}
	return string(out)
}

func walk(v any, f func(string) string) any {
	switch t := v.(type) {
	case string:
		return f(t)
	case []any:
		for i := range t {
			t[i] = walk(t[i], f)
		}
	case map[string]any:
		for k, e := range t {
			t[k] = walk(e, f)
		}
	}
	return v
}

func restoreResponse(m *Map, resp llm.Response) llm.Response {
	resp.Message.Content = m.Restore(resp.Message.Content)
	resp.Message.ReasoningContent = m.Restore(resp.Message.ReasoningContent)
	if len(resp.Message.ToolCalls) > 0 {
		calls := make([]llm.ToolCall, len(resp.Message.ToolCalls))
		for i, tc := range resp.Message.ToolCalls {
			tc.Function.Arguments = restoreJSON(m, tc.Function.Arguments)
			calls[i] = tc
		}
		resp.Message.ToolCalls = calls
	}
	return resp
}
