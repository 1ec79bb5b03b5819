package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"agent/pkg/clip"
	"agent/pkg/clock"
)

// Outbox row states.
const (
	OutPending = 0
	OutSent    = 1
	OutFailed  = 2
	OutSending = 3 // claimed; in doubt after a crash
)

// Outbox defaults.
const (
	DefaultMaxAttempts = 20
	DefaultParallel    = 4
	retryBase          = time.Second
	retryCap           = 5 * time.Minute
	sendTimeout        = 2 * time.Minute
	maxErrorText       = 1024
)

// retrySpan bounds how long a row's attempts can go on (DefaultMaxAttempts
// pauses of at most retryCap, with margin).
const retrySpan = 2 * time.Hour

// Item is one message to queue: its kind (the channel's message type) and
// content (what the channel's Send reads).
type Item struct {
	Kind    string
	Content string
}

// Message is a row being sent.
type Message struct {
	ID       int64
	To       string
	Kind     string
	Content  string
	Attempts int // failed attempts before this one
	// FirstTry is when the row's first attempt began (this one's, for a
	// first attempt).
	FirstTry time.Time
	// Window is the duplicate-check interval every attempt of the row
	// carries; 0: none (the row repeats an identical message the
	// recipient had within the window, which the API would drop, or the
	// outbox has no window).
	Window time.Duration
}

// Recovery counts the rows Run found in doubt (claimed when the process
// stopped) and put back in the queue.
type Recovery struct {
	InDoubt int
	// Covered rows carry a duplicate check whose window is still open: the
	// API drops their resend if the first attempt arrived.
	Covered int
	// Unchecked rows carry none (legitimate repeats, or no window): they
	// may arrive twice.
	Unchecked int
	// PastWindow rows carry a check whose window has closed: they may
	// arrive twice.
	PastWindow int
}

// OutboxConfig configures an Outbox.
type OutboxConfig struct {
	Channel string // the rows' channel; required
	// Send delivers one row. Required for Run.
	Send func(ctx context.Context, m Message) error
	// Permanent reports whether a send error will not go away by
	// retrying (the row fails at once); nil: every error is retried.
	Permanent func(error) bool
	// Redact removes secrets from an error text before it is stored
	// (last_error); the text is clipped after.
	Redact func(string) string
	// DupWindow is the duplicate-check interval a row's attempts carry,
	// in whole seconds (rounded up); 0: none.
	DupWindow time.Duration
	// Recovered reports the rows in doubt Run found (at most once per Run,
	// when there are any); nil: logged.
	Recovered   func(Recovery)
	Clock       clock.Clock // the wall clock when nil
	Logger      *slog.Logger
	MaxAttempts int // transient failures before a row fails; DefaultMaxAttempts when 0
	Parallel    int // recipients served at once; DefaultParallel when 0
}

// Outbox is one channel's queue of messages to send (table outbox).
// Messages to one recipient go out strictly in order; different
// recipients are served in parallel. Safe for concurrent use.
type Outbox struct {
	db     *sql.DB
	cfg    OutboxConfig
	ch     string
	clock  clock.Clock
	logger *slog.Logger
	wake   chan struct{}
}

// NewOutbox returns the outbox of cfg.Channel on db.
func NewOutbox(db *sql.DB, cfg OutboxConfig) *Outbox {
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	cfg.DupWindow = max(0, (cfg.DupWindow + time.Second - 1).Truncate(time.Second))
	return &Outbox{db: db, cfg: cfg, ch: cfg.Channel, clock: cfg.Clock, logger: cfg.Logger, wake: make(chan struct{}, 1)}
}

// Wake makes the sender look at the queue now.
func (o *Outbox) Wake() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Enqueue stores items for to, after what is already queued for them, and
// wakes the sender.
func (o *Outbox) Enqueue(ctx context.Context, to string, items ...Item) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s outbox: enqueue: %w", o.ch, err)
	}
	defer tx.Rollback()
	if err := o.EnqueueTx(ctx, tx, to, items...); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s outbox: enqueue: %w", o.ch, err)
	}
	o.Wake()
	return nil
}

// EnqueueTx stores items for to inside q, in order (a transaction that
// commits them with what produced them); the caller wakes the sender
// after the commit.
func (o *Outbox) EnqueueTx(ctx context.Context, q Execer, to string, items ...Item) error {
	if to == "" {
		return fmt.Errorf("%s outbox: enqueue: empty recipient", o.ch)
	}
	now := o.clock.Now().UnixMilli()
	for _, it := range items {
		if _, err := q.ExecContext(ctx, `INSERT INTO outbox(channel, to_user, msg_type, content, created_at, next_at) VALUES (?, ?, ?, ?, ?, 0)`,
			o.ch, to, it.Kind, it.Content, now); err != nil {
			return fmt.Errorf("%s outbox: enqueue: %w", o.ch, err)
		}
	}
	return nil
}

// Run sends queued messages until ctx ends, then waits for sends in
// flight. Rows left "being sent" by a crash are sent again first (with
// the duplicate check their first attempt carried).
func (o *Outbox) Run(ctx context.Context) error {
	if o.cfg.Send == nil {
		return fmt.Errorf("%s outbox: no sender", o.ch)
	}
	if err := o.recover(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, o.cfg.Parallel)
	done := make(chan struct{}, o.cfg.Parallel)
	for {
		heads, next, err := o.due(ctx)
		if err != nil && ctx.Err() == nil {
			o.logger.Error(o.ch+" outbox: reading the queue failed", "err", err)
			next = o.clock.Now().Add(5 * time.Second)
		}
		for _, h := range heads {
			select {
			case sem <- struct{}{}:
			default:
				continue // all slots busy; a finishing send wakes us
			}
			if err := o.claim(ctx, &h); err != nil {
				<-sem
				o.logger.Error(o.ch+" outbox: claim failed", "id", h.ID, "err", err)
				continue
			}
			wg.Add(1)
			go func(h Message) {
				defer wg.Done()
				o.send(ctx, h)
				<-sem
				select {
				case done <- struct{}{}:
				default:
				}
			}(h)
		}
		var timer <-chan time.Time
		if !next.IsZero() {
			timer = o.clock.After(max(next.Sub(o.clock.Now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-o.wake:
		case <-done:
		case <-timer:
		}
	}
}

// due returns the head row of every recipient whose head is due, and when
// the next head becomes due.
func (o *Outbox) due(ctx context.Context) ([]Message, time.Time, error) {
	now := o.clock.Now().UnixMilli()
	// state IN (0, 3) lets the partial index outbox_pending serve the scan.
	rows, err := o.db.QueryContext(ctx, `
		SELECT o.id, o.to_user, o.msg_type, o.content, o.attempts, o.next_at, coalesce(o.first_try_at, 0), o.dup_window FROM outbox o
		WHERE o.channel = ? AND o.state IN (0, 3) AND o.state = 0
			AND o.id = (SELECT min(id) FROM outbox p WHERE p.channel = o.channel AND p.to_user = o.to_user AND p.state IN (0, 3))
		ORDER BY o.id LIMIT 256`, o.ch)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer rows.Close()
	var out []Message
	var next int64
	for rows.Next() {
		var m Message
		var at, first, window int64
		if err := rows.Scan(&m.ID, &m.To, &m.Kind, &m.Content, &m.Attempts, &at, &first, &window); err != nil {
			return nil, time.Time{}, err
		}
		if at > now {
			if next == 0 || at < next {
				next = at
			}
			continue
		}
		m.FirstTry, m.Window = unixMilli(first), time.Duration(window)*time.Second
		out = append(out, m)
	}
	var nextT time.Time
	if next != 0 {
		nextT = time.UnixMilli(next)
	}
	return out, nextT, rows.Err()
}

func unixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// recover puts rows left "being sent" by a crash back in the queue, and
// reports how many of them the duplicate check covers. (state IN (0, 3)
// lets outbox_pending serve these reads.)
func (o *Outbox) recover(ctx context.Context) error {
	now := o.clock.Now().UnixMilli()
	var r Recovery
	err := o.db.QueryRowContext(ctx, `SELECT count(*),
		coalesce(sum(dup_window > 0 AND first_try_at IS NOT NULL AND ? - first_try_at < dup_window * 1000), 0),
		coalesce(sum(dup_window = 0 OR first_try_at IS NULL), 0)
		FROM outbox WHERE channel = ? AND state IN (0, 3) AND state = 3`, now, o.ch).Scan(&r.InDoubt, &r.Covered, &r.Unchecked)
	if err != nil {
		return fmt.Errorf("%s outbox: recover: %w", o.ch, err)
	}
	if r.InDoubt == 0 {
		return nil
	}
	if _, err := o.db.ExecContext(ctx, `UPDATE outbox SET state = 0 WHERE channel = ? AND state IN (0, 3) AND state = 3`, o.ch); err != nil {
		return fmt.Errorf("%s outbox: recover: %w", o.ch, err)
	}
	r.PastWindow = r.InDoubt - r.Covered - r.Unchecked
	if o.cfg.Recovered != nil {
		o.cfg.Recovered(r)
		return nil
	}
	level := slog.LevelInfo
	if r.Covered != r.InDoubt {
		level = slog.LevelWarn
	}
	o.logger.Log(ctx, level, o.ch+" messages in doubt after a crash are sent again", "in_doubt", r.InDoubt, "covered", r.Covered,
		"repeats_without_check", r.Unchecked, "past_window", r.PastWindow)
	return nil
}

// claim marks h as being sent. Before its first attempt the row is
// stamped and its duplicate-check interval fixed: the configured window,
// or none when the recipient already had an identical message attempted
// within the window (the API would drop this legitimate repeat). Later
// attempts keep both, so they send the same request.
func (o *Outbox) claim(ctx context.Context, h *Message) error {
	now := o.clock.Now()
	window := int64(o.cfg.DupWindow / time.Second)
	cut := now.Add(-o.cfg.DupWindow).UnixMilli()
	var first, win int64
	err := o.db.QueryRowContext(ctx, `UPDATE outbox SET state = 3,
		dup_window = CASE
			WHEN first_try_at IS NOT NULL THEN dup_window
			WHEN ? = 0 OR EXISTS (SELECT 1 FROM outbox p WHERE p.channel = outbox.channel AND p.to_user = outbox.to_user
				AND p.msg_type = outbox.msg_type AND p.content = outbox.content
				AND p.id <> outbox.id AND p.first_try_at IS NOT NULL
				-- The window runs from when the API accepted p, which can
				-- be long after p's first attempt (retries, a stop): p
				-- counts when it was accepted within the window, may still
				-- be (pending, in flight), or failed after retries that can
				-- have reached into it.
				AND (p.first_try_at >= ? OR p.sent_at >= ? OR p.state IN (0, 3)
					OR (p.state = 2 AND p.first_try_at >= ?))) THEN 0
			ELSE ? END,
		first_try_at = coalesce(first_try_at, ?)
		WHERE id = ? AND channel = ? AND state = 0
		RETURNING first_try_at, dup_window`, window, cut, cut, cut-retrySpan.Milliseconds(), window, now.UnixMilli(), h.ID, o.ch).Scan(&first, &win)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("row %d is no longer pending", h.ID)
	}
	if err != nil {
		return err
	}
	h.FirstTry, h.Window = unixMilli(first), time.Duration(win)*time.Second
	return nil
}

func (o *Outbox) setState(ctx context.Context, id int64, state, attempts int, nextAt int64, lastErr string) error {
	var sentAt any
	if state == OutSent {
		sentAt = o.clock.Now().UnixMilli()
	}
	_, err := o.db.ExecContext(ctx, `UPDATE outbox SET state = ?, attempts = ?, next_at = ?, last_error = ?, sent_at = ? WHERE id = ?`,
		state, attempts, nextAt, lastErr, sentAt, id)
	return err
}

// storedError is err's text as it may be stored: redacted, clipped.
func (o *Outbox) storedError(err error) string {
	s := err.Error()
	if o.cfg.Redact != nil {
		s = o.cfg.Redact(s)
	}
	return clip.String(s, maxErrorText)
}

func (o *Outbox) permanent(err error) bool {
	return o.cfg.Permanent != nil && o.cfg.Permanent(err)
}

// send delivers one row and records the outcome.
func (o *Outbox) send(ctx context.Context, h Message) {
	sctx, cancel := context.WithTimeout(ctx, sendTimeout)
	err := o.cfg.Send(sctx, h)
	cancel()
	// The outcome is recorded even when ctx ended meanwhile.
	dbctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer dcancel()
	var serr error
	switch {
	case err == nil:
		serr = o.setState(dbctx, h.ID, OutSent, h.Attempts+1, 0, "")
		o.logger.Debug(o.ch+" message sent", "id", h.ID, "to", h.To, "kind", h.Kind, "bytes", len(h.Content))
	case ctx.Err() != nil:
		// Stopping: not an attempt; it goes out after the restart.
		serr = o.setState(dbctx, h.ID, OutPending, h.Attempts, 0, "")
	case o.permanent(err):
		serr = o.setState(dbctx, h.ID, OutFailed, h.Attempts+1, 0, o.storedError(err))
		o.logger.Error(o.ch+" message not deliverable; dropped", "id", h.ID, "to", h.To, "err", err)
	default:
		n := h.Attempts + 1
		if n >= o.cfg.MaxAttempts {
			serr = o.setState(dbctx, h.ID, OutFailed, n, 0, o.storedError(err))
			o.logger.Error(o.ch+" message failed too often; dropped", "id", h.ID, "to", h.To, "attempts", n, "err", err)
			break
		}
		d := RetryDelay(n)
		serr = o.setState(dbctx, h.ID, OutPending, n, o.clock.Now().Add(d).UnixMilli(), o.storedError(err))
		o.logger.Warn(o.ch+" send failed; will retry", "id", h.ID, "to", h.To, "attempt", n, "in", d, "err", err)
	}
	if serr != nil {
		o.logger.Error(o.ch+" outbox: recording a send failed", "id", h.ID, "err", serr)
	}
}

// RetryDelay is the pause after the n-th failed attempt (1-based): 1 s,
// doubling, at most 5 min.
func RetryDelay(n int) time.Duration {
	return min(retryBase<<min(n-1, 20), retryCap)
}

// Stats counts the channel's outbox rows by state (pending includes rows
// being sent).
func (o *Outbox) Stats(ctx context.Context) (pending, sent, failed int, err error) {
	err = o.db.QueryRowContext(ctx, `SELECT
		coalesce(sum(state IN (0, 3)), 0), coalesce(sum(state = 1), 0), coalesce(sum(state = 2), 0) FROM outbox WHERE channel = ?`, o.ch).
		Scan(&pending, &sent, &failed)
	return
}
