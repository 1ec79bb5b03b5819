// Package turn is the vocabulary every channel and the conversation
// pipeline share: the message a person sent, normalised whatever the
// platform (Message), where its conversation lives (Key), what a turn
// sends back while it runs (Sink: the reply, streamed fragments, tool
// progress) and the files a channel sends (Media). It is a leaf: the
// standard library only, no behaviour beyond naming things, so a channel
// — built in or a plugin's adapter — depends on it and on pkg/channel,
// never on the pipeline.
package turn

import (
	"context"
	"io"
	"time"
)

// Message is one inbound message, as a channel hands it to the pipeline.
type Message struct {
	// Channel is the channel's name, the first part of the sender's
	// scope ("wecom" in "wecom:zhangsan").
	Channel string
	// Chat is where the message was written: a group's id, or the direct
	// chat's ("" when the platform has none: the sender is the chat).
	Chat string
	// Sender is the platform's id of who wrote it, unique in Channel.
	Sender string
	// Display is the sender's name as the platform shows it ("" unknown);
	// never an identity: Sender is.
	Display string
	Text    string
	// Group is true for a group chat (Chat is then required), false for
	// a direct one.
	Group bool
	// Mentioned is true when the message names the assistant (@) in a
	// group.
	Mentioned bool
	// Thread is the platform's thread or topic the message belongs to
	// ("" none).
	Thread string
	// Attachments are the files and pictures that came with the text.
	Attachments []Attachment
	// ID is the platform's message id ("" when it has none); with
	// Channel it identifies a message seen twice.
	ID string
	// ReplyTo is the platform's handle for answering this message (a
	// response URL, a request id, the message to quote); "" to answer in
	// Chat.
	ReplyTo string
	// Device is the device a voice or hardware turn comes from ("" none).
	Device string
	// Profile is the tool profile the channel declares for the turn;
	// "" means Channel's.
	Profile string
	// Fast asks for a latency-first turn: the sender waits for the answer
	// in real time (voice and hardware devices).
	Fast bool
}

// Attachment is one file or picture of a message, already kept by the
// channel (Path) and, for a picture the model may see, its bytes.
type Attachment struct {
	Kind string // "image", "voice", "video", "file"
	Name string // the sender's file name ("" none)
	MIME string
	Path string // where the channel kept it, as the user's tools name it ("" not kept)
	Data []byte // a picture shown to the model (nil: not shown)
	Size int64
}

// Key is where a message's conversation lives, the routing key: turns of
// one key run one at a time, in order. A group chat (or a thread of one)
// is one conversation whoever writes; a direct chat is its sender's.
type Key struct {
	Channel string
	Group   bool
	Chat    string // the group's id (Group), else ""
	Sender  string // the sender (not Group), else ""
	Thread  string
}

// KeyOf is the routing key of m.
func KeyOf(m Message) Key {
	if m.Group {
		return Key{Channel: m.Channel, Group: true, Chat: m.Chat, Thread: m.Thread}
	}
	return Key{Channel: m.Channel, Sender: m.Sender, Thread: m.Thread}
}

// Progress is one tool's step in a turn (a channel may show a short status
// line); it names the tool, never its arguments or result.
type Progress struct {
	Tool   string
	Done   bool          // false: starting
	Failed bool          // ended with an error
	Took   time.Duration // when Done
}

// Sink is where a turn's output goes. Reply is required; Stream and
// Progress are the channel's streaming and status capabilities (nil: it
// shows neither).
type Sink struct {
	// Reply delivers one whole message of the answer to the chat the
	// message came from (a turn may send several).
	Reply func(ctx context.Context, text string) error
	// Stream gets the answer's text fragments as the model writes them;
	// the whole text still goes to Reply.
	Stream func(fragment string)
	// Progress is told when a tool starts and ends.
	Progress func(Progress)
	// Held is called when the turn is kept to be answered later (the
	// model service is unreachable) instead of answered now.
	Held func()
}

// Media is a file to send: an image, a file, a video or a link card.
type Media struct {
	Kind string // "image", "file", "video", "link"
	Name string // file name shown to the recipient
	Body io.Reader
	Size int64
	// Title and Description go with a video or a link card; URL and
	// PicURL are a link card's.
	Title, Description, URL, PicURL string
}
