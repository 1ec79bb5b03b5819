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

	wx "agent/pkg/wecom"
)

// Inbox row states.
const (
	inboxPending = 0
	inboxDone    = 1
	inboxIgnored = 2
)

// Clock is the time source of the channel; tests inject a fake one.
type Clock interface {
	Now() time.Time
	// After fires once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RealClock is the wall clock.
var RealClock Clock = realClock{}

// Inbox is the persisted queue of received messages (table wecom_inbox).
type Inbox struct {
	db    *sql.DB
	clock Clock
}

// NewInbox returns the inbox on db; clock is RealClock when nil.
func NewInbox(db *sql.DB, clock Clock) *Inbox {
	if clock == nil {
		clock = RealClock
	}
	return &Inbox{db: db, clock: clock}
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
	res, err := in.db.ExecContext(ctx, `INSERT INTO wecom_inbox(dedup_key, sender, chat_id, msg_type, content, raw, received_at, state)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(dedup_key) DO NOTHING`,
		m.DedupKey(), m.FromUserName, m.ChatID, m.MsgType, TurnText(m), string(raw), in.clock.Now().UnixMilli(), state)
	if err != nil {
		return false, fmt.Errorf("wecom inbox: store %s: %w", m.DedupKey(), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("wecom inbox: store %s: %w", m.DedupKey(), err)
	}
	return n == 1, nil
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
		return "[The user shared a link: " + strings.Join(keep, " — ") + "]"
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
	rows, err := in.db.QueryContext(ctx, `SELECT id, sender, chat_id, msg_type, content, raw, received_at
		FROM wecom_inbox WHERE state = 0 ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("wecom inbox: pending: %w", err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		var ms int64
		if err := rows.Scan(&r.id, &r.sender, &r.chatID, &r.msgType, &r.content, &r.raw, &ms); err != nil {
			return nil, fmt.Errorf("wecom inbox: pending: %w", err)
		}
		r.received = time.UnixMilli(ms)
		out = append(out, r)
	}
	return out, rows.Err()
}

// mark sets the state of rows inside tx.
func mark(ctx context.Context, tx *sql.Tx, state int, at time.Time, rows []row) error {
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, len(rows)+2)
	args = append(args, state, at.UnixMilli())
	marks := make([]string, len(rows))
	for i, r := range rows {
		marks[i] = "?"
		args = append(args, r.id)
	}
	_, err := tx.ExecContext(ctx, `UPDATE wecom_inbox SET state = ?, done_at = ? WHERE id IN (`+strings.Join(marks, ",")+`)`, args...)
	if err != nil {
		return fmt.Errorf("wecom inbox: mark: %w", err)
	}
	return nil
}
