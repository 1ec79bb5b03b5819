package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Request is one request as the server received it: the raw body and
// headers for checks of the wire format, and the fields a test usually
// asks about, decoded.
type Request struct {
	N      int // position in the log, from 0 (chat-completions requests)
	Method string
	Path   string
	Header http.Header
	Body   []byte         // the raw body
	JSON   map[string]any // the body decoded generically; nil when not a JSON object

	Model       string
	Messages    []Message
	Tools       []Tool
	ToolChoice  json.RawMessage // as sent; nil when absent
	Stream      bool
	StreamUsage bool // stream_options.include_usage
	// MaxTokens is max_tokens, or max_completion_tokens when that is sent.
	MaxTokens   int
	Temperature *float64

	ctx context.Context
}

// Message is one message of a request.
type Message struct {
	Role string
	// Content is the text: the string content, or the text parts joined
	// with "\n" (Parts then holds every part).
	Content          string
	Parts            []Part
	Null             bool // "content": null (an assistant message with tool calls)
	Name             string
	ToolCalls        []ToolCall
	ToolCallID       string
	ReasoningContent string
}

// Part is one part of a multimodal content array.
type Part struct {
	Type     string // "text" or "image_url"
	Text     string
	ImageURL string
}

// Tool is one function offered to the model.
type Tool struct {
	Type        string
	Name        string
	Description string
	Parameters  json.RawMessage
}

// ToolCall is a function call: in a Reply, what the model calls (an empty
// ID becomes "call_<n>"); in a Request, what an assistant message carried.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text
}

// Context is the request's context: it ends when the client gives up.
func (r *Request) Context() context.Context { return r.ctx }

// Last returns the last message (the zero Message when there is none).
func (r *Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// LastUser returns the text of the last user message, "" when none.
func (r *Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// System returns the text of the first message when it is a system
// message, "" otherwise.
func (r *Request) System() string {
	if len(r.Messages) > 0 && r.Messages[0].Role == "system" {
		return r.Messages[0].Content
	}
	return ""
}

// ToolNames returns the names of the tools offered, in order.
func (r *Request) ToolNames() []string {
	names := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return names
}

// Contains reports whether the raw body contains sub. The body is JSON:
// quotes, backslashes and <, >, & are escaped in it (use Messages for text).
func (r *Request) Contains(sub string) bool { return bytes.Contains(r.Body, []byte(sub)) }

type wireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID       string `json:"tool_call_id"`
		ReasoningContent string `json:"reasoning_content"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Stream        bool            `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int      `json:"max_tokens"`
	MaxCompletionTokens int      `json:"max_completion_tokens"`
	Temperature         *float64 `json:"temperature"`
}

// decode fills the decoded fields from Body.
func (r *Request) decode() error {
	if err := json.Unmarshal(r.Body, &r.JSON); err != nil {
		r.JSON = nil
		return err
	}
	var w wireRequest
	if err := json.Unmarshal(r.Body, &w); err != nil {
		return err
	}
	r.Model, r.Stream, r.Temperature, r.ToolChoice = w.Model, w.Stream, w.Temperature, w.ToolChoice
	r.StreamUsage = w.StreamOptions != nil && w.StreamOptions.IncludeUsage
	r.MaxTokens = w.MaxTokens
	if w.MaxCompletionTokens != 0 {
		r.MaxTokens = w.MaxCompletionTokens
	}
	for i, m := range w.Messages {
		msg := Message{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		content := bytes.TrimSpace(m.Content)
		switch {
		case len(content) == 0 || string(content) == "null":
			msg.Null = len(content) > 0
		case content[0] == '"':
			if err := json.Unmarshal(content, &msg.Content); err != nil {
				return fmt.Errorf("message %d: content: %w", i, err)
			}
		default:
			var parts []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL *struct {
					URL string `json:"url"`
				} `json:"image_url"`
			}
			if err := json.Unmarshal(content, &parts); err != nil {
				return fmt.Errorf("message %d: content is neither a string nor parts: %w", i, err)
			}
			var text []string
			for _, p := range parts {
				part := Part{Type: p.Type, Text: p.Text}
				if p.ImageURL != nil {
					part.ImageURL = p.ImageURL.URL
				}
				if p.Type == "text" {
					text = append(text, p.Text)
				}
				msg.Parts = append(msg.Parts, part)
			}
			msg.Content = strings.Join(text, "\n")
		}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		r.Messages = append(r.Messages, msg)
	}
	for _, t := range w.Tools {
		r.Tools = append(r.Tools, Tool{Type: t.Type, Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return nil
}
