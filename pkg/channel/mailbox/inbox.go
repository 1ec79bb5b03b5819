// Package mailbox is the durable inbox and outbox every channel shares:
// tables inbox and outbox in the daemon's database, keyed by channel.
//
// The inbox keeps each received message (a callback is acknowledged only
// once its row is here), deduplicated per channel by a key the channel
// chooses; a processor takes pending rows in arrival order and marks them
// done in the transaction that queues their replies.
//
// The outbox keeps replies until they are delivered: strictly in order per
// recipient, recipients in parallel, with persisted backoff, across
// restarts. A row being sent is claimed (state 3) first, so a crash leaves
// it "in doubt" and Run sends it again. For a channel whose API drops a
// request identical to one it accepted within a window (WeCom's duplicate
// check), the outbox fixes each row's window before its first attempt and
// every attempt carries it: the resend of a row that did arrive is
// dropped, so the user sees it once.
//
// What a row's content means, how it is sent and which errors are
// permanent belong to the channel (OutboxConfig.Send, Permanent).
package mailbox

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"agent/pkg/clock"
)

// Inbox row states.
const (
	InPending = 0
	InDone    = 1
	InIgnored = 2
)

// Execer is *sql.DB or *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Inbox is one channel's received messages (table inbox). Safe for
// concurrent use.
type Inbox struct {
	db      *sql.DB
	channel string
	clock   clock.Clock
}

// NewInbox returns channel's inbox on db; clk is the wall clock when nil.
func NewInbox(db *sql.DB, channel string, clk clock.Clock) *Inbox {
	return &Inbox{db: db, channel: channel, clock: clock.Or(clk)}
}

// DB is the database the inbox is on (a processor commits its turns there).
func (in *Inbox) DB() *sql.DB { return in.db }

// Channel is the inbox's channel.
func (in *Inbox) Channel() string { return in.channel }

// Received is a message to store.
type Received struct {
	// DedupKey identifies the message within the channel: a second Put
	// with the same key stores nothing.
	DedupKey string
	Sender   string
	ChatID   string // a group chat; empty for a direct message
	Kind     string // the channel's message type
	Content  string // the text the message contributes to a turn
	Raw      string // the whole message, as the channel encodes it
	// State is InPending, or InIgnored for a message kept only to
	// deduplicate (events).
	State int
}

// Put stores m unless a message with the same DedupKey is already there.
// It reports whether m was new.
func (in *Inbox) Put(ctx context.Context, m Received) (bool, error) {
	res, err := in.db.ExecContext(ctx, `INSERT INTO inbox(channel, dedup_key, sender, chat_id, msg_type, content, raw, received_at, state)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(channel, dedup_key) DO NOTHING`,
		in.channel, m.DedupKey, m.Sender, m.ChatID, m.Kind, m.Content, m.Raw, in.clock.Now().UnixMilli(), m.State)
	if err != nil {
		return false, fmt.Errorf("%s inbox: store %s: %w", in.channel, m.DedupKey, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s inbox: store %s: %w", in.channel, m.DedupKey, err)
	}
	return n == 1, nil
}

// Row is a pending inbox row.
type Row struct {
	ID       int64
	Sender   string
	ChatID   string
	Kind     string
	Content  string
	Raw      string
	Received time.Time
}

// Pending returns the pending rows in arrival order.
func (in *Inbox) Pending(ctx context.Context) ([]Row, error) {
	rows, err := in.db.QueryContext(ctx, `SELECT id, sender, chat_id, msg_type, content, raw, received_at
		FROM inbox WHERE channel = ? AND state = 0 ORDER BY id`, in.channel)
	if err != nil {
		return nil, fmt.Errorf("%s inbox: pending: %w", in.channel, err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var ms int64
		if err := rows.Scan(&r.ID, &r.Sender, &r.ChatID, &r.Kind, &r.Content, &r.Raw, &ms); err != nil {
			return nil, fmt.Errorf("%s inbox: pending: %w", in.channel, err)
		}
		r.Received = time.UnixMilli(ms)
		out = append(out, r)
	}
	return out, rows.Err()
}

// Mark sets the state of rows ids inside q (the transaction that commits
// what the rows produced).
func (in *Inbox) Mark(ctx context.Context, q Execer, state int, at time.Time, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, 0, len(ids)+3)
	args = append(args, state, at.UnixMilli(), in.channel)
	marks := make([]string, len(ids))
	for i, id := range ids {
		marks[i] = "?"
		args = append(args, id)
	}
	_, err := q.ExecContext(ctx, `UPDATE inbox SET state = ?, done_at = ? WHERE channel = ? AND id IN (`+strings.Join(marks, ",")+`)`, args...)
	if err != nil {
		return fmt.Errorf("%s inbox: mark: %w", in.channel, err)
	}
	return nil
}
