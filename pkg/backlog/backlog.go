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
	return &Backlog{c: cfg, wake: make(chan struct{}, 1)}
}

// States of a held turn.
const (
	stateHeld      = 0
	stateAnswered  = 1
	stateCancelled = 2
	stateDropped   = 3 // failed for another reason
)

// Hold keeps a turn. first reports whether the conversation had none held
// before (the user is told once per outage).
func (b *Backlog) Hold(ctx context.Context, key string, m Message, session int64) (first bool, err error) {
	if len(m.Text) > MaxText {
		return false, fmt.Errorf("backlog: message of %d bytes is over %d", len(m.Text), MaxText)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	tx, err := b.c.DB.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("backlog: %w", err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM held_turns WHERE key = ? AND state = 0`, key).Scan(&n); err != nil {
		return false, fmt.Errorf("backlog: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO held_turns(key, message, session_id, held_at) VALUES (?, ?, ?, ?)`,
		key, string(raw), session, b.c.Clock.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("backlog: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("backlog: %w", err)
	}
	b.Wake()
	return n == 0, nil
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

// Run tries the held turns until ctx ends: the oldest first, one at a
// time (so each conversation's order holds); while the service stays
// down it pauses, longer each time, and a Wake cuts the pause short.
func (b *Backlog) Run(ctx context.Context) error {
	pause := b.c.MinPause
	for {
		t, ok, err := b.oldest(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			b.c.Logger.Error("backlog: reading held turns failed", "err", err)
		case !ok:
			pause = b.c.MinPause
			if !b.sleep(ctx, 0) {
				return nil
			}
			continue
		default:
			settled, hint := b.try(ctx, t)
			if settled {
				pause = b.c.MinPause
				continue
			}
			if hint > 0 {
				// The model client says when it tries again (its
				// breaker's probe): retry right then.
				if !b.sleep(ctx, min(hint+10*time.Millisecond, b.c.MaxPause)) {
					return nil
				}
				continue
			}
		}
		if !b.sleep(ctx, pause) {
			return nil
		}
		pause = min(pause*2, b.c.MaxPause)
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

// oldest is the first held turn.
func (b *Backlog) oldest(ctx context.Context) (Turn, bool, error) {
	var t Turn
	var raw string
	var held int64
	err := b.c.DB.QueryRowContext(ctx, `SELECT id, key, message, session_id, held_at, tries FROM held_turns WHERE state = 0 ORDER BY id LIMIT 1`).
		Scan(&t.ID, &t.Key, &raw, &t.Session, &held, &t.Tries)
	if errors.Is(err, sql.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, err
	}
	t.Held = time.UnixMilli(held)
	if err := json.Unmarshal([]byte(raw), &t.Message); err != nil {
		// Not ours to read: dropped, not retried forever.
		b.c.DB.ExecContext(ctx, `UPDATE held_turns SET state = ? WHERE id = ?`, stateDropped, t.ID)
		return t, false, fmt.Errorf("held turn %d unreadable: %w", t.ID, err)
	}
	return t, true, nil
}
