package redact

import (
	"context"

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
//
// Restore says which tools' call arguments get the real values back; the
// others run with the placeholders in them, so a tool cannot turn a
// placeholder into the value for the model (cut, rev, sed on an un-redacted
// argument). nil: every tool's. Tool results are redacted with
// Map.Result: a value the conversation already had comes back as its
// placeholder however it is written.
//
// Conversations, when set, gives the requests of a conversation (named
// in their context by WithConversation) one map for all of them; other
// requests get a map of their own.
type Client struct {
	Next          LLM
	Kinds         func() []Kind
	Counted       func(map[Kind]int)
	Restore       func(tool string) bool
	Conversations *Conversations
}

var _ LLM = (*Client)(nil)

// Chat redacts req, asks Next and restores the answer.
func (c *Client) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	m, req := c.redact(ctx, req)
	if m == nil {
		return c.Next.Chat(ctx, req)
	}
	resp, err := c.Next.Chat(ctx, req)
	return c.restoreResponse(m, resp), err
}

// Stream redacts req, asks Next and restores the answer, fragments
// included (a fragment ending inside a placeholder waits for the rest).
func (c *Client) Stream(ctx context.Context, req llm.Request, fn func(llm.Delta) error) (llm.Response, error) {
	m, req := c.redact(ctx, req)
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
	return c.restoreResponse(m, resp), err
}

// redact returns the request with its values replaced and the map that
// restores them (nil when nothing is redacted).
func (c *Client) redact(ctx context.Context, req llm.Request) (*Map, llm.Request) {
	var kinds []Kind
	if c.Kinds != nil {
		kinds = c.Kinds()
	}
	if len(kinds) == 0 {
		return nil, req
	}
	var m *Map
	if key := conversationOf(ctx); key != "" && c.Conversations != nil {
		m = c.Conversations.Map(key, kinds)
	} else {
		m = NewMap(kinds)
	}
	counted := map[Kind]int{}
	for _, msg := range req.Messages { // literal placeholders are not handed out
		m.Reserve(msg.Content)
		m.Reserve(msg.ReasoningContent)
		for _, p := range msg.Parts {
			m.Reserve(p.Text)
		}
		for _, tc := range msg.ToolCalls {
			m.Reserve(tc.Function.Arguments)
		}
	}
	msgs := make([]llm.Message, len(req.Messages))
	for i, msg := range req.Messages {
		msg.Content = m.text(msg.Content, msg.Role == llm.RoleTool, counted)
		msg.ReasoningContent = m.text(msg.ReasoningContent, false, counted)
		if len(msg.Parts) > 0 {
			parts := make([]llm.Part, len(msg.Parts))
			for j, p := range msg.Parts {
				if p.Type == "text" {
					p.Text = m.text(p.Text, msg.Role == llm.RoleTool, counted)
				}
				parts[j] = p
			}
			msg.Parts = parts
		}
		if len(msg.ToolCalls) > 0 {
			calls := make([]llm.ToolCall, len(msg.ToolCalls))
			for j, tc := range msg.ToolCalls {
				tc.Function.Arguments = redactJSON(m, tc.Function.Arguments, counted)
				calls[j] = tc
			}
			msg.ToolCalls = calls
		}
		msgs[i] = msg
	}
	req.Messages = msgs
	if c.Counted != nil && len(counted) > 0 {
		c.Counted(counted)
	}
	return m, req
}

// redactJSON redacts a JSON value (tool-call arguments) as text: the
// values the detectors find hold no character JSON escapes, so the result
// is the same JSON with placeholders, every other byte as it was.
func redactJSON(m *Map, s string, counted map[Kind]int) string { return m.text(s, false, counted) }

// restoreJSON puts values back into a JSON value (tool-call arguments)
// as text: numbers, other strings and key order stay exactly as the model
// wrote them.
func restoreJSON(m *Map, s string) string { return m.Restore(s) }

// restoreResponse puts the values back into the answer's text, and into
// the arguments of the tool calls Restore allows.
func (c *Client) restoreResponse(m *Map, resp llm.Response) llm.Response {
	resp.Message.Content = m.Restore(resp.Message.Content)
	resp.Message.ReasoningContent = m.Restore(resp.Message.ReasoningContent)
	if len(resp.Message.ToolCalls) > 0 {
		calls := make([]llm.ToolCall, len(resp.Message.ToolCalls))
		for i, tc := range resp.Message.ToolCalls {
			if c.Restore == nil || c.Restore(tc.Function.Name) {
				tc.Function.Arguments = restoreJSON(m, tc.Function.Arguments)
			}
			calls[i] = tc
		}
		resp.Message.ToolCalls = calls
	}
	return resp
}
