// Package backlog keeps the turns the model service could not answer (the
// network or the service down, its breaker open, 5xx, quota) and runs them
// again, oldest first, once it answers: a question asked during an outage
// is answered after it, in order per conversation, across restarts.
//
// A held turn is a row of the held_turns table: the conversation's key,
// the message (what the pipeline needs to run it again: channel, sender,
// chat, text, where the answer goes), and the session its user message
// was already stored in (the run then continues that turn instead of
// repeating the message). While a conversation has held turns, its new
// messages are held behind them, so order is kept. The backlog retries
// the oldest held turn with a growing pause (the retry is the probe); a
// turn that succeeds anywhere else wakes it at once.
package backlog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"agent/pkg/clock"
	"agent/pkg/llm"
)

// Turn is one held turn.
type Turn struct {
	ID      int64
	Key     string // the conversation (session key)
	Message Message
	// Session is the session the turn's user message was stored in
	// before the model failed (0: none; the run stores it).
	Session int64
	Held    time.Time
	Tries   int
}

// Message is what running a held turn again needs.
type Message struct {
	Channel  string `json:"channel"`
	Profile  string `json:"profile,omitempty"`
	ChatType string `json:"chat_type,omitempty"`
	Sender   string `json:"sender"`
	ChatID   string `json:"chat_id,omitempty"`
	ThreadID string `json:"thread_id,omitempty"`
	Text     string `json:"text"`
	// ReplyChannel and ReplyTo are where the answer goes ("" : the
	// sender on Channel); Due is when a scheduled task was due (the
	// answer then says it ran late).
	// MsgID identifies the message(s) the turn answers (an inbox row): a
	// message processed again after a crash is held once.
	MsgID        string    `json:"msg_id,omitempty"`
	ReplyChannel string    `json:"reply_channel,omitempty"`
	ReplyTo      string    `json:"reply_to,omitempty"`
	Due          time.Time `json:"due,omitzero"`
}

// Outcome of running a held turn again.
type Outcome int

const (
	// Answered: the replies go out, the turn is done.
	Answered Outcome = iota
	// StillDown: the model service still fails; the turn stays held.
	StillDown
)

// Runner runs a held turn again and returns its replies; StillDown keeps
// it held (any other error is reported and the turn dropped: it would
// fail the same way again).
type Runner func(ctx context.Context, t Turn) (replies []string, out Outcome, err error)

// Deliverer sends a held turn's answer.
type Deliverer func(ctx context.Context, t Turn, replies []string) error

// Config of a Backlog.
type Config struct {
	DB      *sql.DB
	Clock   clock.Clock
	Logger  *slog.Logger
	Run     Runner
	Deliver Deliverer
	// MinPause and MaxPause bound the pause between tries while the
	// service stays down (5 s doubling to 1 min).
	MinPause, MaxPause time.Duration
	// MaxAge is how long a turn is held before it is given up (1 day).
	MaxAge time.Duration
}

// MaxText bounds a held message's text (what a channel passes is shorter).
const MaxText = 64 << 10

// Backlog is the held turns and their runner.
type Backlog struct {
	c    Config
	wake chan struct{}
}

// New returns a Backlog on cfg.DB (the held_turns table, pkg/store).
func New(cfg Config) *Backlog {
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MinPause <= 0 {
		cfg.MinPause = 5 * time.Second
	}
	if cfg.MaxPause < cfg.MinPause {
		cfg.MaxPause = max(time.Minute, cfg.MinPause)
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 24 * time.Hour
	}
	return &Backlog{c: cfg, wake: make(chan struct{}, 1)}
}

// States of a held turn.
const (
	stateHeld      = 0
	stateAnswered  = 1
	stateCancelled = 2
	stateDropped   = 3 // failed for another reason
)

// Hold keeps a turn. first reports whether its user is to be told now:
// once per outage and conversation, and never for a scheduled task (Due:
// its answer goes elsewhere, the owner's own first message is told). dup
// reports that the same message (MsgID) was held before, whatever became
// of it, or that the same job ("job:ID") is held now: nothing is kept.
func (b *Backlog) Hold(ctx context.Context, key string, m Message, session int64) (first, dup bool, err error) {
	if len(m.Text) > MaxText {
		return false, false, fmt.Errorf("backlog: message of %d bytes is over %d", len(m.Text), MaxText)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return false, false, err
	}
	tx, err := b.c.DB.BeginTx(ctx, nil)
	if err != nil {
		return false, false, fmt.Errorf("backlog: %w", err)
	}
	defer tx.Rollback()
	if m.MsgID != "" {
		q := `SELECT count(*) FROM held_turns WHERE key = ? AND msg_id = ?`
		if strings.HasPrefix(m.MsgID, "job:") {
			q += ` AND state = 0` // one late run of a job, however many fell due
		}
		var n int
		if err := tx.QueryRowContext(ctx, q, key, m.MsgID).Scan(&n); err != nil {
			return false, false, fmt.Errorf("backlog: %w", err)
		}
		if n > 0 {
			return false, true, nil
		}
	}
	var told int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM held_turns WHERE key = ? AND state = 0 AND told = 1`, key).Scan(&told); err != nil {
		return false, false, fmt.Errorf("backlog: %w", err)
	}
	first = told == 0 && m.Due.IsZero()
	if _, err := tx.ExecContext(ctx, `INSERT INTO held_turns(key, message, session_id, msg_id, told, held_at) VALUES (?, ?, ?, ?, ?, ?)`,
		key, string(raw), session, m.MsgID, first, b.c.Clock.Now().UnixMilli()); err != nil {
		return false, false, fmt.Errorf("backlog: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, false, fmt.Errorf("backlog: %w", err)
	}
	b.Wake()
	return first, false, nil
}

// Resumed records the session a held turn's message went to while it was
// run again and failed again: the next run continues it instead of
// storing the message once more.
func (b *Backlog) Resumed(ctx context.Context, id, session int64) error {
	_, err := b.c.DB.ExecContext(ctx, `UPDATE held_turns SET session_id = ? WHERE id = ? AND state = 0`, session, id)
	return err
}

// Waiting is how many turns of key are held.
func (b *Backlog) Waiting(ctx context.Context, key string) (int, error) {
	var n int
	err := b.c.DB.QueryRowContext(ctx, `SELECT count(*) FROM held_turns WHERE key = ? AND state = 0`, key).Scan(&n)
	return n, err
}

// Cancel drops key's held turns (/new) and returns how many.
func (b *Backlog) Cancel(ctx context.Context, key string) (int, error) {
	res, err := b.c.DB.ExecContext(ctx, `UPDATE held_turns SET state = ?, done_at = ? WHERE key = ? AND state = 0`,
		stateCancelled, b.c.Clock.Now().UnixMilli(), key)
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Stats are the held turns of every conversation.
type Stats struct {
	Held          int       `json:"held"`
	Conversations int       `json:"conversations"`
	Oldest        time.Time `json:"oldest,omitzero"`
}

// Stats counts what is held.
func (b *Backlog) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	var oldest sql.NullInt64
	err := b.c.DB.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT key), min(held_at) FROM held_turns WHERE state = 0`).Scan(&st.Held, &st.Conversations, &oldest)
	if oldest.Valid {
		st.Oldest = time.UnixMilli(oldest.Int64)
	}
	return st, err
}

// Wake makes the backlog try now (a turn just succeeded, or one was held).
func (b *Backlog) Wake() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Run tries the held turns until ctx ends: each conversation's oldest,
// in the order they were held, so one conversation's turn that keeps
// failing (too large for the model's limits, say) never holds up the
// others. A turn held longer than MaxAge is given up with a word to its
// user. While the service stays down the backlog pauses, longer each
// time (or until the model client's breaker lets a probe through), and a
// Wake cuts the pause short.
func (b *Backlog) Run(ctx context.Context) error {
	pause := b.c.MinPause
	var pruned time.Time
	for {
		if now := b.c.Clock.Now(); now.Sub(pruned) > time.Hour {
			b.prune(ctx)
			pruned = now
		}
		heads, err := b.heads(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			b.c.Logger.Error("backlog: reading held turns failed", "err", err)
		}
		if err == nil && len(heads) == 0 {
			pause = b.c.MinPause
			if !b.sleep(ctx, 0) {
				return nil
			}
			continue
		}
		progressed := false
		var hint time.Duration
		for _, t := range heads {
			if ctx.Err() != nil {
				return nil
			}
			if b.c.Clock.Now().Sub(t.Held) > b.c.MaxAge {
				b.giveUp(ctx, t)
				progressed = true
				continue
			}
			settled, h := b.try(ctx, t)
			if settled {
				progressed = true
			} else if h > 0 && (hint == 0 || h < hint) {
				hint = h
			}
		}
		if progressed {
			pause = b.c.MinPause
			continue
		}
		wait := pause
		if hint > 0 {
			// The model client says when it tries again (its breaker's
			// probe): retry right then.
			wait = min(hint+10*time.Millisecond, b.c.MaxPause)
		} else {
			pause = min(pause*2, b.c.MaxPause)
		}
		if !b.sleep(ctx, wait) {
			return nil
		}
	}
}

// GaveUpText is what a user whose held message was given up reads.
const GaveUpText = "I could not answer this: the model service stayed unreachable for too long. Please ask again."

// giveUp drops a held turn too old to answer and tells its user.
func (b *Backlog) giveUp(ctx context.Context, t Turn) {
	b.c.Logger.Warn("backlog: held turn given up", "held", t.ID, "key", t.Key, "age", b.c.Clock.Now().Sub(t.Held).Round(time.Minute))
	if err := b.c.Deliver(ctx, t, []string{GaveUpText}); err != nil {
		b.c.Logger.Error("backlog: notice not delivered", "held", t.ID, "err", err)
	}
	if _, err := b.c.DB.ExecContext(ctx, `UPDATE held_turns SET state = ?, done_at = ? WHERE id = ?`, stateDropped, b.c.Clock.Now().UnixMilli(), t.ID); err != nil {
		b.c.Logger.Error("backlog: marking a held turn dropped failed", "held", t.ID, "err", err)
	}
}

// prune deletes settled rows older than a week (the text of a held
// message is not kept for good).
func (b *Backlog) prune(ctx context.Context) {
	if _, err := b.c.DB.ExecContext(ctx, `DELETE FROM held_turns WHERE state != 0 AND done_at < ?`, b.c.Clock.Now().Add(-7*24*time.Hour).UnixMilli()); err != nil {
		b.c.Logger.Warn("backlog: pruning failed", "err", err)
	}
}

// sleep waits d (0: until woken) or a Wake; false when ctx ended.
func (b *Backlog) sleep(ctx context.Context, d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := b.c.Clock.NewTimer(d)
		defer t.Stop()
		timer = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-b.wake:
	case <-timer:
	}
	return true
}

// try runs t again; settled when it is answered or dropped. Still down,
// hint is when the model client expects to try again (0: unknown).
func (b *Backlog) try(ctx context.Context, t Turn) (settled bool, hint time.Duration) {
	replies, out, err := b.c.Run(ctx, t)
	if ctx.Err() != nil {
		return false, 0
	}
	if out == StillDown {
		b.c.Logger.Info("backlog: the model service is still unreachable", "held", t.ID, "key", t.Key, "err", err)
		if _, uerr := b.c.DB.ExecContext(ctx, `UPDATE held_turns SET tries = tries + 1 WHERE id = ?`, t.ID); uerr != nil {
			b.c.Logger.Warn("backlog: counting a try failed", "err", uerr)
		}
		var ae *llm.APIError
		if errors.As(err, &ae) {
			hint = ae.RetryAfter
		}
		return false, hint
	}
	state := stateAnswered
	if err != nil {
		state = stateDropped
		b.c.Logger.Warn("backlog: held turn failed; dropped", "held", t.ID, "key", t.Key, "err", err)
	}
	if len(replies) > 0 {
		if derr := b.c.Deliver(ctx, t, replies); derr != nil {
			b.c.Logger.Error("backlog: answer not delivered", "held", t.ID, "key", t.Key, "err", derr)
		}
	}
	if _, uerr := b.c.DB.ExecContext(ctx, `UPDATE held_turns SET state = ?, done_at = ?, tries = tries + 1 WHERE id = ?`,
		state, b.c.Clock.Now().UnixMilli(), t.ID); uerr != nil {
		b.c.Logger.Error("backlog: marking a held turn done failed", "held", t.ID, "err", uerr)
		return false, 0
	}
	b.c.Logger.Info("backlog: held turn answered", "held", t.ID, "key", t.Key, "waited", b.c.Clock.Now().Sub(t.Held).Round(time.Second))
	return true, 0
}

// maxHeads bounds the conversations tried in one pass.
const maxHeads = 200

// heads are the oldest held turn of each conversation, oldest first.
func (b *Backlog) heads(ctx context.Context) ([]Turn, error) {
	rows, err := b.c.DB.QueryContext(ctx, `SELECT h.id, h.key, h.message, h.session_id, h.held_at, h.tries FROM held_turns h
		JOIN (SELECT min(id) AS id FROM held_turns WHERE state = 0 GROUP BY key) m ON h.id = m.id ORDER BY h.id LIMIT ?`, maxHeads)
	if err != nil {
		return nil, err
	}
	var out, bad []Turn
	for rows.Next() {
		var t Turn
		var raw string
		var held int64
		if err := rows.Scan(&t.ID, &t.Key, &raw, &t.Session, &held, &t.Tries); err != nil {
			rows.Close()
			return nil, err
		}
		t.Held = time.UnixMilli(held)
		if err := json.Unmarshal([]byte(raw), &t.Message); err != nil {
			bad = append(bad, t)
			continue
		}
		out = append(out, t)
	}
	rows.Close()
	for _, t := range bad { // not ours to read: dropped, not retried forever
		b.c.Logger.Error("backlog: held turn unreadable; dropped", "held", t.ID)
		if _, err := b.c.DB.ExecContext(ctx, `UPDATE held_turns SET state = ?, done_at = ? WHERE id = ?`, stateDropped, b.c.Clock.Now().UnixMilli(), t.ID); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}
