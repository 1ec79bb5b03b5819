package plugin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Protocol is the version every hello names.
const Protocol = "agent.channel.v1"

// Line types of agent.channel.v1.
const (
	TypeHello   = "hello"   // daemon -> plugin, first line
	TypeMessage = "message" // plugin -> daemon: someone wrote
	TypeAck     = "ack"     // daemon -> plugin: the message is durable
	TypeSend    = "send"    // daemon -> plugin: deliver this
	TypeSent    = "sent"    // plugin -> daemon: delivered
	TypeError   = "error"   // plugin -> daemon: not delivered (retried)
)

// Limits of the protocol.
const (
	// MaxLine bounds one line in either direction (newline excluded): a
	// plugin writing a longer one has its connection reset.
	MaxLine = 1 << 20
	// maxID bounds a message id, a sender, a chat and a thread.
	maxID = 256
	// maxText bounds the text kept of one message (the rest is cut).
	maxText = 64 << 10
	// maxDisplay bounds a display name.
	maxDisplay = 256
	// maxErrorText bounds the error a plugin gives for a send.
	maxErrorText = 1024
)

// Hello is the daemon's first line.
type Hello struct {
	Type     string `json:"type"`
	Protocol string `json:"protocol"`
	Channel  string `json:"channel"`
}

// Message is a plugin's "message" line: someone wrote in a chat.
type Message struct {
	ID        string `json:"id"`
	Chat      string `json:"chat"`
	Sender    string `json:"sender"`
	Display   string `json:"display"`
	Text      string `json:"text"`
	Group     bool   `json:"group"`
	Mentioned bool   `json:"mentioned"`
	Thread    string `json:"thread"`
}

// Ack answers a message once it is durable.
type Ack struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Send asks the plugin to deliver text to a chat. ReplyTo is the id of
// the message it answers ("" for one the assistant sends unprompted).
type Send struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Chat    string `json:"chat"`
	Text    string `json:"text"`
	ReplyTo string `json:"reply_to"`
}

// Frame is one line a plugin wrote, decoded: Type says which fields
// matter (Message for "message"; ID, and Error for "error", for "sent" and
// "error").
type Frame struct {
	Type    string
	Message Message
	ID      string
	Error   string
}

// wire is every field a plugin line may carry.
type wire struct {
	Type      *string `json:"type"`
	ID        string  `json:"id"`
	Chat      string  `json:"chat"`
	Sender    string  `json:"sender"`
	Display   string  `json:"display"`
	Text      string  `json:"text"`
	Group     bool    `json:"group"`
	Mentioned bool    `json:"mentioned"`
	Thread    string  `json:"thread"`
	Error     string  `json:"error"`
}

// ErrGarbage is wrapped by ParseLine's errors: the line is not a JSON
// object with a string "type" (the connection is reset).
var ErrGarbage = errors.New("not an agent.channel.v1 line")

// ParseLine decodes one line a plugin wrote (without its newline). A line
// that is not one JSON object with a string "type", or whose known fields
// have the wrong JSON types, is garbage. Unknown fields are ignored, and
// so is an unknown type's content (the caller decides what to do with
// it). Invalid UTF-8 in strings becomes U+FFFD.
func ParseLine(line []byte) (Frame, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Frame{}, fmt.Errorf("%w: want a JSON object", ErrGarbage)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	var w wire
	if err := dec.Decode(&w); err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrGarbage, err)
	}
	if dec.More() {
		return Frame{}, fmt.Errorf("%w: more than one JSON value on the line", ErrGarbage)
	}
	if w.Type == nil {
		return Frame{}, fmt.Errorf("%w: no \"type\"", ErrGarbage)
	}
	f := Frame{Type: *w.Type, ID: w.ID, Error: w.Error}
	if f.Type == TypeMessage {
		f.Message = Message{ID: w.ID, Chat: w.Chat, Sender: w.Sender, Display: w.Display, Text: w.Text,
			Group: w.Group, Mentioned: w.Mentioned, Thread: w.Thread}
	}
	return f, nil
}

// Check says what is wrong with a message ("" when nothing): an id,
// sender and chat (a group's) are required, each at most 256 bytes;
// sender and chat are single tokens (no spaces or control characters), as
// names in security.allow_from are.
func (m Message) Check() string {
	switch {
	case m.ID == "":
		return "no id"
	case len(m.ID) > maxID || hasControl(m.ID):
		return "the id is longer than 256 bytes or holds control characters"
	case m.Sender == "":
		return "no sender"
	case !token(m.Sender):
		return "the sender is longer than 256 bytes or holds spaces or control characters"
	case m.Group && m.Chat == "":
		return "a group message without its chat"
	case m.Chat != "" && !token(m.Chat):
		return "the chat is longer than 256 bytes or holds spaces or control characters"
	case len(m.Thread) > maxID || hasControl(m.Thread):
		return "the thread is longer than 256 bytes or holds control characters"
	}
	return ""
}

// token reports whether s can name a sender or a chat: 1 to 256 bytes of
// UTF-8 without spaces, control or formatting characters (pkg/recipient
// refuses such recipients).
func token(s string) bool {
	if s == "" || len(s) > maxID || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return true
		}
	}
	return false
}

// encode is v as one line, newline included.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil { // only strings and bools: unreachable
		panic(fmt.Sprintf("plugin: encode %T: %v", v, err))
	}
	return append(b, '\n')
}

// ErrLineTooLong is wrapped by readLine for a line over MaxLine bytes.
var ErrLineTooLong = fmt.Errorf("a line is longer than %d bytes", MaxLine)

// readLine returns the next line of br without its newline (or CRLF), at
// most max bytes; a longer one is ErrLineTooLong (nothing more is read).
// A last line without a newline is returned as a line; the error that
// ended it (io.EOF) comes with the next call.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		// Room for the line, its CR and its newline, never more.
		if len(line)+len(chunk) > max+2 {
			return nil, ErrLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && len(line) == 0:
			return nil, err
		}
		// A whole line, or the last one, unterminated (the error that
		// ended it comes with the next call).
		line = bytes.TrimSuffix(line, []byte{'\n'})
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) > max {
			return nil, ErrLineTooLong
		}
		return line, nil
	}
}
