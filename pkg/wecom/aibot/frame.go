// Package aibot speaks WeCom's AI Bot long-connection protocol (智能机器人,
// API mode, 长连接): the box dials WeCom over a WebSocket itself, so it
// needs no public address, certificate or open port.
//
// Every frame is a JSON object {"cmd", "headers": {"req_id"}, "body"}. The
// answer to a command carries the same req_id, no cmd, and errcode/errmsg.
// The client subscribes (aibot_subscribe with bot_id and secret), pings
// about every 30 s, receives aibot_msg_callback and aibot_event_callback,
// answers a message with aibot_respond_msg under the message's req_id
// (stream frames: each one's content replaces what was shown, finish must
// come within 6 minutes of the first) and pushes with aibot_send_msg.
//
// Facts were checked against WeCom's AI Bot documentation ("智能机器人长连接")
// and its official Node SDK's behaviour. Where they differ this package
// says so: a voice message's transcript is voice.content in the SDK's
// types and voice.text in the issue that specified this channel; both are
// read.
package aibot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// DefaultURL is WeCom's long-connection endpoint.
const DefaultURL = "wss://openws.work.weixin.qq.com"

// Commands.
const (
	CmdSubscribe      = "aibot_subscribe"
	CmdPing           = "ping"
	CmdMsgCallback    = "aibot_msg_callback"
	CmdEventCallback  = "aibot_event_callback"
	CmdRespond        = "aibot_respond_msg"
	CmdRespondWelcome = "aibot_respond_welcome_msg"
	CmdSend           = "aibot_send_msg"
)

// Event types of aibot_event_callback.
const (
	EventEnterChat    = "enter_chat"
	EventDisconnected = "disconnected_event" // a newer connection replaced this one
)

// Bounds of what Decode accepts.
const (
	MaxFrame  = 4 << 20 // bytes of one frame
	maxReqID  = 256
	maxCmdLen = 64
)

// Headers of a frame.
type Headers struct {
	ReqID string `json:"req_id"`
}

// Frame is one message on the connection: a command (Cmd set) or the
// answer to one (Cmd empty, ErrCode set).
type Frame struct {
	Cmd     string          `json:"cmd,omitempty"`
	Headers Headers         `json:"headers"`
	Body    json.RawMessage `json:"body,omitempty"`
	ErrCode *int            `json:"errcode,omitempty"`
	ErrMsg  string          `json:"errmsg,omitempty"`
}

// IsAnswer reports whether f answers a command.
func (f Frame) IsAnswer() bool { return f.Cmd == "" }

// Err is the answer's error, nil for errcode 0 (or a command).
func (f Frame) Err() error {
	if f.ErrCode == nil || *f.ErrCode == 0 {
		return nil
	}
	return &Error{Code: *f.ErrCode, Msg: f.ErrMsg}
}

// Error is a non-zero errcode WeCom answered.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("wecom aibot: errcode %d: %s", e.Code, e.Msg) }

// ErrBadFrame is wrapped by Decode for what is not a frame.
var ErrBadFrame = errors.New("wecom aibot: bad frame")

// Decode reads one frame: a JSON object of at most MaxFrame bytes, valid
// UTF-8, with a short printable cmd and req_id.
func Decode(data []byte) (Frame, error) {
	var f Frame
	if len(data) > MaxFrame {
		return f, fmt.Errorf("%w: %d bytes", ErrBadFrame, len(data))
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return f, fmt.Errorf("%w: not a JSON object", ErrBadFrame)
	}
	if !utf8.Valid(data) {
		return f, fmt.Errorf("%w: not UTF-8", ErrBadFrame)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	if len(f.Cmd) > maxCmdLen || !printable(f.Cmd) {
		return Frame{}, fmt.Errorf("%w: cmd %.64q", ErrBadFrame, f.Cmd)
	}
	if len(f.Headers.ReqID) > maxReqID || !printable(f.Headers.ReqID) {
		return Frame{}, fmt.Errorf("%w: req_id %.64q", ErrBadFrame, f.Headers.ReqID)
	}
	if f.Cmd != "" && f.Headers.ReqID == "" && f.Cmd != CmdPing {
		return Frame{}, fmt.Errorf("%w: %s without a req_id", ErrBadFrame, f.Cmd)
	}
	if len(f.Body) > 0 && string(f.Body) == "null" {
		f.Body = nil
	}
	return f, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Encode writes a command frame.
func Encode(cmd, reqID string, body any) ([]byte, error) {
	f := struct {
		Cmd     string  `json:"cmd"`
		Headers Headers `json:"headers"`
		Body    any     `json:"body,omitempty"`
	}{cmd, Headers{reqID}, body}
	return json.Marshal(f)
}

// Message is the body of aibot_msg_callback.
type Message struct {
	MsgID      string `json:"msgid"`
	CreateTime int64  `json:"create_time"`
	AIBotID    string `json:"aibotid"`
	ChatID     string `json:"chatid"`
	ChatType   string `json:"chattype"` // single | group
	From       struct {
		UserID string `json:"userid"`
	} `json:"from"`
	MsgType string `json:"msgtype"` // text | image | voice | mixed | file | video
	Text    *struct {
		Content string `json:"content"`
	} `json:"text,omitempty"`
	Image *Resource `json:"image,omitempty"`
	File  *Resource `json:"file,omitempty"`
	Video *Resource `json:"video,omitempty"`
	Voice *struct {
		Content string `json:"content"` // the SDK's name
		Text    string `json:"text"`    // the name the issue gives
	} `json:"voice,omitempty"`
	Mixed *struct {
		Items []struct {
			MsgType string `json:"msgtype"`
			Text    *struct {
				Content string `json:"content"`
			} `json:"text,omitempty"`
			Image *Resource `json:"image,omitempty"`
		} `json:"msg_item"`
	} `json:"mixed,omitempty"`
	Event *struct {
		EventType string `json:"eventtype"`
	} `json:"event,omitempty"`
}

// Resource is a downloadable media of a message: the URL (valid about five
// minutes) serves it AES-encrypted with the per-resource key (DecryptMedia).
type Resource struct {
	URL    string `json:"url"`
	AESKey string `json:"aeskey"`
}

// VoiceText is a voice message's transcript (WeCom's own).
func (m Message) VoiceText() string {
	if m.Voice == nil {
		return ""
	}
	if m.Voice.Content != "" {
		return m.Voice.Content
	}
	return m.Voice.Text
}

// ParseMessage decodes a callback's body.
func ParseMessage(body json.RawMessage) (Message, error) {
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return Message{}, fmt.Errorf("%w: body: %v", ErrBadFrame, err)
	}
	return m, nil
}

// StreamBody is aibot_respond_msg's stream reply: each frame's Content
// replaces what was shown; Finish ends the message.
func StreamBody(id, content string, finish bool) any {
	return map[string]any{"msgtype": "stream", "stream": map[string]any{"id": id, "finish": finish, "content": content}}
}

// MarkdownPush is aibot_send_msg's body: chatType 1 for a single chat
// (chatid = the user's id), 2 for a group.
func MarkdownPush(chatID string, chatType int, content string) any {
	return map[string]any{"chatid": chatID, "chat_type": chatType, "msgtype": "markdown", "markdown": map[string]any{"content": content}}
}
