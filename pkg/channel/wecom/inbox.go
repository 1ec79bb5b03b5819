// Package wecom is the WeChat Work channel: the callback endpoint that
// verifies, decrypts and persists each message before acknowledging it
// (inbox), the processor that debounces a sender's messages into one turn
// of the conversation pipeline under the DM policy, and the outbox that
// delivers replies in order per user, with retries, across restarts.
//
// Every step is a row in the daemon's SQLite database, so a crash between
// acknowledgement and reply loses nothing: unprocessed inbox rows are taken
// up again after a restart, and a turn's replies are committed to the outbox
// in the same transaction that marks its messages done.
package wecom

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"agent/pkg/channel/mailbox"
	"agent/pkg/clock"
	wx "agent/pkg/wecom"
)

// Inbox row states (mailbox.In*).
const (
	inboxPending = mailbox.InPending
	inboxDone    = mailbox.InDone
	inboxIgnored = mailbox.InIgnored
)

// Clock is the channel's former clock type, now clock.Clock (tests inject
// a *clock.Fake).
type Clock = clock.Clock

// RealClock is the wall clock (clock.Real()).
var RealClock Clock = clock.Real()

// Inbox is the persisted queue of received WeCom messages (the mailbox
// inbox, channel "wecom").
type Inbox struct {
	db *sql.DB
	mb *mailbox.Inbox
}

// NewInbox returns the inbox on db; clk is the wall clock when nil.
func NewInbox(db *sql.DB, clk clock.Clock) *Inbox {
	return &Inbox{db: db, mb: mailbox.NewInbox(db, Channel, clk)}
}

// Put stores m unless a message with the same DedupKey is already there.
// It reports whether m was new. Events are stored already done: they are
// kept for deduplication only.
func (in *Inbox) Put(ctx context.Context, m *wx.Message) (bool, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return false, fmt.Errorf("wecom inbox: encode: %w", err)
	}
	state := inboxPending
	if m.MsgType == wx.MsgEvent {
		state = inboxIgnored
	}
	return in.mb.Put(ctx, mailbox.Received{DedupKey: m.DedupKey(), Sender: m.FromUserName, ChatID: m.ChatID,
		Kind: m.MsgType, Content: TurnText(m), Raw: string(raw), State: state})
}

// Known reports whether MsgType is one the channel handles.
func Known(msgType string) bool {
	switch msgType {
	case wx.MsgText, wx.MsgImage, wx.MsgVoice, wx.MsgVideo, wx.MsgFile, wx.MsgLocation, wx.MsgLink, wx.MsgEvent:
		return true
	}
	return false
}

// TurnText is the text a message contributes to a turn as stored in the
// inbox. Media are only described here: the processor downloads them
// (media.go) and this text is what remains when it cannot.
func TurnText(m *wx.Message) string {
	switch m.MsgType {
	case wx.MsgText:
		return m.Content
	case wx.MsgImage:
		return "[The user sent a picture.]"
	case wx.MsgVoice:
		return "[The user sent a voice message.]"
	case wx.MsgVideo:
		return "[The user sent a video.]"
	case wx.MsgFile:
		return fmt.Sprintf("[The user sent a file %q.]", m.FileName)
	case wx.MsgLocation:
		return fmt.Sprintf("[The user shared a location: %s (latitude %s, longitude %s)]", m.Label, m.LocationX, m.LocationY)
	case wx.MsgLink:
		parts := []string{m.Title, m.Description, m.URL}
		var keep []string
		for _, p := range parts {
			if strings.TrimSpace(p) != "" {
				keep = append(keep, p)
			}
		}
		link := "[The user shared a link: " + strings.Join(keep, " — ") + "]"
		if strings.TrimSpace(m.URL) != "" {
			link += " (web_fetch reads the page)"
		}
		return link
	}
	return ""
}

// row is one pending inbox row.
type row struct {
	id       int64
	sender   string
	chatID   string
	msgType  string
	content  string
	raw      string // the message as JSON (media ids)
	received time.Time
}

// pending returns the pending rows in arrival order.
func (in *Inbox) pending(ctx context.Context) ([]row, error) {
	rows, err := in.mb.Pending(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]row, len(rows))
	for i, r := range rows {
		out[i] = row{id: r.ID, sender: r.Sender, chatID: r.ChatID, msgType: r.Kind, content: r.Content, raw: r.Raw, received: r.Received}
	}
	return out, nil
}

// mark sets the state of rows inside tx.
func (in *Inbox) mark(ctx context.Context, tx *sql.Tx, state int, at time.Time, rows []row) error {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return in.mb.Mark(ctx, tx, state, at, ids...)
}
