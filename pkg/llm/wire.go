package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The chat-completions wire format.

type wireRequest struct {
	Model               string         `json:"model"`
	Messages            []wireMessage  `json:"messages"`
	Tools               []Tool         `json:"tools,omitempty"`
	ToolChoice          any            `json:"tool_choice,omitempty"`
	MaxTokens           int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name,omitempty"`
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
}

type wirePart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *wireImageURL `json:"image_url,omitempty"`
}

type wireImageURL struct {
	URL string `json:"url"`
}

type wireToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

const imageOmitted = "[image omitted]"

// encodeRequest builds the JSON body for req as p expects it.
func encodeRequest(p preset, vision bool, req Request) ([]byte, error) {
	w := wireRequest{
		Model:       req.Model,
		Messages:    make([]wireMessage, 0, len(req.Messages)),
		Tools:       make([]Tool, len(req.Tools)),
		Temperature: req.Temperature,
		Stream:      req.Stream,
	}
	copy(w.Tools, req.Tools)
	for i := range w.Tools {
		if w.Tools[i].Type == "" {
			w.Tools[i].Type = "function"
		}
	}
	if p.maxCompletionTokens {
		w.MaxCompletionTokens = req.MaxTokens
	} else {
		w.MaxTokens = req.MaxTokens
	}
	if req.Stream && p.streamUsage {
		w.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if p.toolChoice && len(req.Tools) > 0 && req.ToolChoice != "" {
		switch req.ToolChoice {
		case "auto", "none", "required":
			w.ToolChoice = req.ToolChoice
		default:
			var tc wireToolChoice
			tc.Type = "function"
			tc.Function.Name = req.ToolChoice
			w.ToolChoice = tc
		}
	}
	for i, m := range req.Messages {
		wm, err := encodeMessage(p, vision, m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		w.Messages = append(w.Messages, wm)
	}
	return json.Marshal(w)
}

func encodeMessage(p preset, vision bool, m Message) (wireMessage, error) {
	wm := wireMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
	if m.Role == RoleAssistant {
		wm.ToolCalls = make([]ToolCall, len(m.ToolCalls))
		copy(wm.ToolCalls, m.ToolCalls)
		for i := range wm.ToolCalls {
			if wm.ToolCalls[i].Type == "" {
				wm.ToolCalls[i].Type = "function"
			}
			if wm.ToolCalls[i].Function.Arguments == "" {
				wm.ToolCalls[i].Function.Arguments = "{}"
			}
		}
		if p.sendReasoning {
			wm.ReasoningContent = m.ReasoningContent
		}
	}
	var err error
	switch {
	case len(m.Parts) > 0 && vision:
		parts := make([]wirePart, 0, len(m.Parts))
		for _, pt := range m.Parts {
			switch pt.Type {
			case "image_url":
				parts = append(parts, wirePart{Type: "image_url", ImageURL: &wireImageURL{URL: pt.ImageURL}})
			default:
				parts = append(parts, wirePart{Type: "text", Text: pt.Text})
			}
		}
		wm.Content, err = json.Marshal(parts)
	case len(m.Parts) > 0:
		var b strings.Builder
		for _, pt := range m.Parts {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			if pt.Type == "image_url" {
				b.WriteString(imageOmitted)
			} else {
				b.WriteString(pt.Text)
			}
		}
		wm.Content, err = json.Marshal(b.String())
	case m.Role == RoleAssistant && m.Content == "" && len(m.ToolCalls) > 0:
		wm.Content = json.RawMessage("null")
	default:
		wm.Content, err = json.Marshal(m.Content)
	}
	return wm, err
}

// wireResponse is a completion or a stream chunk.
type wireResponse struct {
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   *Usage       `json:"usage"`
	Error   *wireError   `json:"error"`
}

type wireChoice struct {
	Message      *wireRespMessage `json:"message"`
	Delta        *wireRespMessage `json:"delta"`
	FinishReason *string          `json:"finish_reason"`
}

type wireRespMessage struct {
	Content          json.RawMessage    `json:"content"`
	ReasoningContent string             `json:"reasoning_content"`
	Reasoning        string             `json:"reasoning"`
	ToolCalls        []wireRespToolCall `json:"tool_calls"`
}

type wireRespToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// wireError is {"error": {...}}; some servers send {"error": "text"}.
type wireError struct {
	Message string
	Code    string
}

func (e *wireError) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		e.Message = s
		return nil
	}
	var o struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	e.Message = o.Message
	e.Code = rawString(o.Code)
	if e.Code == "" {
		e.Code = o.Type
	}
	return nil
}

// rawString returns a JSON string's value, a number's text, or "".
func rawString(b json.RawMessage) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s
	}
	if b[0] == '-' || (b[0] >= '0' && b[0] <= '9') {
		return string(b)
	}
	return ""
}

// decodeContent reads message content: a string, null, or an array of parts
// whose text is joined.
func decodeContent(b json.RawMessage) (string, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return "", nil
	}
	var s string
	if b[0] == '"' {
		err := json.Unmarshal(b, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor parts: %w", err)
	}
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(p.Text)
	}
	return sb.String(), nil
}

// decodeArguments reads tool-call arguments: normally a JSON string holding
// JSON text, but some servers send the object itself.
func decodeArguments(b json.RawMessage) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return ""
	}
	var s string
	if b[0] == '"' {
		if json.Unmarshal(b, &s) == nil {
			return s
		}
	}
	return string(b)
}

// parseErrorBody extracts the provider's code and message from an error
// body, falling back to a short excerpt of the body.
func parseErrorBody(body []byte) (code, msg string) {
	var w struct {
		Error   *wireError      `json:"error"`
		Message string          `json:"message"` // DashScope native, vLLM
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(body, &w) == nil {
		if w.Error != nil && (w.Error.Message != "" || w.Error.Code != "") {
			return w.Error.Code, w.Error.Message
		}
		if w.Message != "" {
			return rawString(w.Code), w.Message
		}
	}
	return "", excerpt(body)
}

// excerpt returns at most 200 bytes of b as valid UTF-8 on one line.
func excerpt(b []byte) string {
	const max = 200
	cut := len(b) > max
	if cut {
		b = b[:max]
	}
	s := strings.ToValidUTF8(string(b), "")
	s = strings.Join(strings.Fields(s), " ")
	if cut {
		s += "..."
	}
	return s
}

// normaliseFinish maps provider finish reasons onto the documented ones.
func normaliseFinish(reason string, hasToolCalls bool) string {
	if reason == "function_call" {
		return FinishToolCalls
	}
	if hasToolCalls && (reason == "" || reason == FinishStop) {
		return FinishToolCalls
	}
	return reason
}

// decodeResponse parses a non-streamed completion.
func decodeResponse(body []byte) (Response, *wireError, error) {
	var w wireResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return Response{}, nil, fmt.Errorf("decoding completion: %w", err)
	}
	if w.Error != nil && (w.Error.Message != "" || w.Error.Code != "") {
		return Response{}, w.Error, nil
	}
	if len(w.Choices) == 0 || w.Choices[0].Message == nil {
		return Response{}, nil, fmt.Errorf("completion has no choices")
	}
	c := w.Choices[0]
	content, err := decodeContent(c.Message.Content)
	if err != nil {
		return Response{}, nil, err
	}
	resp := Response{Model: w.Model}
	resp.Message = Message{Role: RoleAssistant, Content: content, ReasoningContent: c.Message.ReasoningContent}
	if resp.Message.ReasoningContent == "" {
		resp.Message.ReasoningContent = c.Message.Reasoning
	}
	for i, tc := range c.Message.ToolCalls {
		call := ToolCall{ID: tc.ID, Type: "function", Function: FunctionCall{Name: tc.Function.Name, Arguments: decodeArguments(tc.Function.Arguments)}}
		if call.Function.Arguments == "" {
			call.Function.Arguments = "{}"
		}
		if call.ID == "" {
			call.ID = fmt.Sprintf("call_%d", i)
		}
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, call)
	}
	if c.FinishReason != nil {
		resp.FinishReason = *c.FinishReason
	}
	resp.FinishReason = normaliseFinish(resp.FinishReason, len(resp.Message.ToolCalls) > 0)
	if w.Usage != nil {
		resp.Usage = *w.Usage
	}
	return resp, nil, nil
}
