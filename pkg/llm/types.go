package llm

import (
	"encoding/base64"
	"encoding/json"
)

// Roles of a Message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons surfaced in Response.FinishReason. Providers that report
// "stop" (or nothing) while returning tool calls are normalised to
// FinishToolCalls, and the legacy "function_call" is too.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
)

// Message is one chat message. Content holds plain text; Parts, when not
// empty, replaces it with multimodal content (text and images). Images are
// only sent when the client has vision on; otherwise each image becomes the
// text "[image omitted]".
type Message struct {
	Role       string
	Content    string
	Parts      []Part
	Name       string
	ToolCalls  []ToolCall
	ToolCallID string
	// ReasoningContent is the model's reasoning ("thinking") text. It is kept
	// on assistant messages and sent back only to providers that need it
	// (DeepSeek); providers that reject unknown fields never see it.
	ReasoningContent string
}

// Part is one piece of multimodal content: Type "text" with Text, or Type
// "image_url" with ImageURL (an https URL or a data: URL).
type Part struct {
	Type     string
	Text     string
	ImageURL string
}

// TextPart returns a text content part.
func TextPart(text string) Part { return Part{Type: "text", Text: text} }

// ImagePart returns an image content part holding data as a base64 data URL
// of the given MIME type (for example "image/jpeg").
func ImagePart(mimeType string, data []byte) Part {
	return Part{Type: "image_url", ImageURL: "data:" + mimeType + ";base64," + base64.StdEncoding.EncodeToString(data)}
}

// ToolCall is a function call requested by the model. Arguments is the raw
// JSON text of the arguments as the model wrote it (it may be invalid JSON;
// checking it is the caller's job). An empty Arguments is returned as "{}".
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function part of a ToolCall.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool describes a function the model may call. Type is "function" (the
// default when empty).
type Tool struct {
	Type     string       `json:"type"`
	Function FunctionSpec `json:"function"`
}

// FunctionSpec is a tool's name, description and JSON schema.
type FunctionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// Request is one chat-completions call. Empty Model and zero MaxTokens take
// the client's configured values. ToolChoice is "" (provider default),
// "auto", "none", "required", or the name of a function the model must call;
// it is never sent to Ollama nor when Tools is empty. Stream is set by
// Client.Stream and cleared by Client.Chat.
type Request struct {
	Model       string
	Messages    []Message
	Tools       []Tool
	ToolChoice  string
	MaxTokens   int
	Temperature *float64
	Stream      bool
}

// Usage counts tokens for one or more calls.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Add returns the sum of u and o, for totals per turn.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + o.PromptTokens,
		CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		TotalTokens:      u.TotalTokens + o.TotalTokens,
	}
}

// Response is the assistant's reply. Message.Role is always "assistant".
type Response struct {
	Message      Message
	FinishReason string
	Usage        Usage
	Model        string
}

// Delta is one streamed fragment, passed to the Stream callback as it
// arrives. Tool-call fragments carry the provider's index; the assembled
// calls are in the Response that Stream returns.
type Delta struct {
	Content   string
	Reasoning string
	ToolCalls []ToolCallDelta
}

// ToolCallDelta is a fragment of one tool call.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}
