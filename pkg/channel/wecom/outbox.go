package wecom

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"agent/pkg/clip"
	wx "agent/pkg/wecom"
)

// Outbox row states.
const (
	outPending = 0
	outSent    = 1
	outFailed  = 2
	outSending = 3
)

// API sends a text message (*wecom.Client). The options carry WeCom's
// duplicate check (wecom.DuplicateCheck).
type API interface {
	SendText(ctx context.Context, toUser, text string, opts ...wx.SendOption) error
}

// MediaAPI sends media messages (*wecom.Client). The outbox's API must
// implement it for media rows to go out.
type MediaAPI interface {
	SendMedia(ctx context.Context, toUser, kind, mediaID string, opts ...wx.SendOption) error
	SendVideo(ctx context.Context, toUser, mediaID, title, description string, opts ...wx.SendOption) error
	SendLink(ctx context.Context, toUser, title, description, link, picURL string, opts ...wx.SendOption) error
}

// OutMedia is a media message in the outbox: an uploaded image, file or
// video (MediaID), or a link card. Its row's msg_type is Kind and its
// content this struct as JSON.
type OutMedia struct {
	Kind        string `json:"kind"` // image, file, video or link
	MediaID     string `json:"media_id,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	URL         string `json:"url,omitempty"`
	PicURL      string `json:"pic_url,omitempty"`
}

func (m OutMedia) check() error {
	switch m.Kind {
	case wx.MediaImage, wx.MediaFile, wx.MediaVideo:
		if m.MediaID == "" {
			return fmt.Errorf("wecom outbox: %s without a media id", m.Kind)
		}
	case kindLink:
		if m.Title == "" || m.URL == "" {
			return errors.New("wecom outbox: a link needs a title and a url")
		}
	default:
		return fmt.Errorf("wecom outbox: unknown media kind %q", m.Kind)
	}
	return nil
}

// kindLink is the outbox kind of a link card.
const kindLink = "link"

// outItem is one message of a turn for the outbox: a text (split when
// stored) or a media message.
type outItem struct {
	text  string
	media *OutMedia
}

func textItems(texts []string) []outItem {
	out := make([]outItem, len(texts))
	for i, t := range texts {
		out[i] = outItem{text: t}
	}
	return out
}

// Outbox defaults.
const (
	DefaultMaxAttempts = 20
	DefaultParallel    = 4
	// DefaultDupWindow is the duplicate-check interval a row's attempts
	// carry: WeCom's maximum, so a resend after up to four hours of
	// downtime is still recognised.
	DefaultDupWindow = wx.MaxDuplicateCheck
	retryBase        = time.Second
	retryCap         = 5 * time.Minute
	sendTimeout      = 2 * time.Minute
	maxErrorText     = 1024
)

// OutboxConfig configures an Outbox.
type OutboxConfig struct {
	API         API // nil: rows are stored but Run cannot send
	Clock       Clock
	Logger      *slog.Logger
	MaxAttempts int // transient failures before a row fails; DefaultMaxAttempts when 0
	Parallel    int // recipients served at once; DefaultParallel when 0
	// DupWindow is the duplicate_check_interval of a row's attempts
	// (DefaultDupWindow when 0, at most wecom.MaxDuplicateCheck; negative
	// turns the duplicate check off). See Outbox.
	DupWindow time.Duration
	// Scrub redacts secrets from error texts before they are stored
	// (last_error), the same redaction as the logs (logging.Scrubber).
	// Access tokens and corp secrets named in a text are removed even
	// without it.
	Scrub func(string) string
}

// Outbox is the persisted queue of messages to send (table wecom_outbox).
// Messages to one user go out strictly in order; different users are
// served in parallel. Safe for concurrent use.
//
// Exactly once: WeCom has no idempotency key, but message/send has a
// duplicate check (enable_duplicate_check, duplicate_check_interval): a
// request whose JSON equals one WeCom accepted within the interval is not
// delivered again. Before a row's first attempt the outbox stamps it
// (first_try_at) and fixes its interval (dup_window); every attempt of the
// row (the client's own retries, the outbox's retries, the resend of a row
// left in doubt by a crash) sends the same JSON with the check on, so
// WeCom drops the repeat when an earlier attempt got through. The check
// must be on from the first attempt: it compares whole requests, so a
// resend that alone carried it would not match the first one.
//
// Legitimate repeats: a row whose recipient already had an identical
// message (same type and content) attempted within the window goes out
// without the check, so WeCom never drops it ("OK" twice is delivered
// twice). Such a row, and a row whose resend comes later than the window
// after its first attempt, is sent at least once: if it was in flight at
// a crash it may arrive twice (logged).
type Outbox struct {
	db     *sql.DB
	cfg    OutboxConfig
	clock  Clock
	logger *slog.Logger
	wake   chan struct{}
}

// NewOutbox returns the outbox on db.
func NewOutbox(db *sql.DB, cfg OutboxConfig) *Outbox {
	if cfg.Clock == nil {
		cfg.Clock = RealClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	switch {
	case cfg.DupWindow == 0:
		cfg.DupWindow = DefaultDupWindow
	case cfg.DupWindow < 0:
		cfg.DupWindow = 0
	}
	// Whole seconds, as WeCom takes them.
	cfg.DupWindow = min((cfg.DupWindow + time.Second - 1).Truncate(time.Second), wx.MaxDuplicateCheck)
	return &Outbox{db: db, cfg: cfg, clock: cfg.Clock, logger: cfg.Logger, wake: make(chan struct{}, 1)}
}

// Wake makes the sender look at the queue now.
func (o *Outbox) Wake() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Enqueue stores text for toUser, split into pieces WeCom accepts, and
// wakes the sender.
func (o *Outbox) Enqueue(ctx context.Context, toUser, text string) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("wecom outbox: enqueue: %w", err)
	}
	defer tx.Rollback()
	if err := o.enqueueTx(ctx, tx, toUser, text); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("wecom outbox: enqueue: %w", err)
	}
	o.Wake()
	return nil
}

// EnqueueMedia stores a media message for toUser (after what is already
// queued for them) and wakes the sender.
func (o *Outbox) EnqueueMedia(ctx context.Context, toUser string, m OutMedia) error {
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("wecom outbox: enqueue: %w", err)
	}
	defer tx.Rollback()
	if err := o.enqueueItemsTx(ctx, tx, toUser, []outItem{{media: &m}}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("wecom outbox: enqueue: %w", err)
	}
	o.Wake()
	return nil
}

// enqueueTx stores texts for toUser inside tx, each split at 2048 bytes.
func (o *Outbox) enqueueTx(ctx context.Context, tx *sql.Tx, toUser string, texts ...string) error {
	return o.enqueueItemsTx(ctx, tx, toUser, textItems(texts))
}

// enqueueItemsTx stores items for toUser inside tx, in order; texts are
// split at 2048 bytes.
func (o *Outbox) enqueueItemsTx(ctx context.Context, tx *sql.Tx, toUser string, items []outItem) error {
	if toUser == "" {
		return errors.New("wecom outbox: enqueue: empty recipient")
	}
	now := o.clock.Now().UnixMilli()
	for _, it := range items {
		if it.media != nil {
			if err := it.media.check(); err != nil {
				return err
			}
			raw, err := json.Marshal(it.media)
			if err != nil {
				return fmt.Errorf("wecom outbox: enqueue: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO wecom_outbox(to_user, msg_type, content, created_at, next_at) VALUES (?, ?, ?, ?, 0)`,
				toUser, it.media.Kind, string(raw), now); err != nil {
				return fmt.Errorf("wecom outbox: enqueue: %w", err)
			}
			continue
		}
		for _, piece := range wx.Split(it.text, wx.MaxTextBytes) {
			if strings.TrimSpace(piece) == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO wecom_outbox(to_user, msg_type, content, created_at, next_at) VALUES (?, 'text', ?, ?, 0)`,
				toUser, piece, now); err != nil {
				return fmt.Errorf("wecom outbox: enqueue: %w", err)
			}
		}
	}
	return nil
}

// outRow is the head of one recipient's queue.
type outRow struct {
	id       int64
	to       string
	kind     string // text, or an OutMedia kind
	content  string
	attempts int
	firstTry int64 // Unix ms of the first attempt; 0 before it
	window   int64 // duplicate_check_interval in seconds; 0: no check
}

// Run sends queued messages until ctx ends, then waits for sends in
// flight. Rows left "being sent" by a crash are sent again with the
// duplicate check their first attempt carried, so WeCom drops the resend
// if the first attempt arrived (see Outbox).
func (o *Outbox) Run(ctx context.Context) error {
	if o.cfg.API == nil {
		return errors.New("wecom outbox: no API client")
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
			o.logger.Error("wecom outbox: reading the queue failed", "err", err)
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
				o.logger.Error("wecom outbox: claim failed", "id", h.id, "err", err)
				continue
			}
			wg.Add(1)
			go func(h outRow) {
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
func (o *Outbox) due(ctx context.Context) ([]outRow, time.Time, error) {
	now := o.clock.Now().UnixMilli()
	rows, err := o.db.QueryContext(ctx, `
		SELECT o.id, o.to_user, o.msg_type, o.content, o.attempts, o.next_at, coalesce(o.first_try_at, 0), o.dup_window FROM wecom_outbox o
		WHERE o.state = 0 AND o.id = (SELECT min(id) FROM wecom_outbox p WHERE p.to_user = o.to_user AND p.state IN (0, 3))
		ORDER BY o.id LIMIT 256`)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer rows.Close()
	var out []outRow
	var next int64
	for rows.Next() {
		var r outRow
		var at int64
		if err := rows.Scan(&r.id, &r.to, &r.kind, &r.content, &r.attempts, &at, &r.firstTry, &r.window); err != nil {
			return nil, time.Time{}, err
		}
		if at > now {
			if next == 0 || at < next {
				next = at
			}
			continue
		}
		out = append(out, r)
	}
	var nextT time.Time
	if next != 0 {
		nextT = time.UnixMilli(next)
	}
	return out, nextT, rows.Err()
}

// recover puts rows left "being sent" by a crash back in the queue, and
// says how many of them the duplicate check covers.
func (o *Outbox) recover(ctx context.Context) error {
	now := o.clock.Now().UnixMilli()
	var n, covered, unchecked int
	err := o.db.QueryRowContext(ctx, `SELECT count(*),
		coalesce(sum(dup_window > 0 AND first_try_at IS NOT NULL AND ? - first_try_at < dup_window * 1000), 0),
		coalesce(sum(dup_window = 0 OR first_try_at IS NULL), 0)
		FROM wecom_outbox WHERE state = 3`, now).Scan(&n, &covered, &unchecked)
	if err != nil {
		return fmt.Errorf("wecom outbox: recover: %w", err)
	}
	if n == 0 {
		return nil
	}
	if _, err := o.db.ExecContext(ctx, `UPDATE wecom_outbox SET state = 0 WHERE state = 3`); err != nil {
		return fmt.Errorf("wecom outbox: recover: %w", err)
	}
	expired := n - covered - unchecked
	if covered == n {
		o.logger.Info("wecom messages in doubt after a crash are sent again; WeCom's duplicate check drops any that already arrived",
			"in_doubt", n)
		return nil
	}
	o.logger.Warn("wecom messages in doubt after a crash are sent again; some are not covered by WeCom's duplicate check and may arrive twice",
		"in_doubt", n, "covered", covered, "repeats_without_check", unchecked, "past_window", expired)
	return nil
}

// retrySpan bounds how long a row's attempts can go on (DefaultMaxAttempts
// pauses of at most retryCap, with margin).
const retrySpan = 2 * time.Hour

// claim marks h as being sent. Before its first attempt the row is
// stamped and its duplicate-check interval fixed: the configured window,
// or none when the recipient already had an identical message attempted
// within the window (WeCom would drop this legitimate repeat). Later
// attempts keep both, so they send the same JSON.
func (o *Outbox) claim(ctx context.Context, h *outRow) error {
	now := o.clock.Now()
	window := int64(o.cfg.DupWindow / time.Second)
	cut := now.Add(-o.cfg.DupWindow).UnixMilli()
	err := o.db.QueryRowContext(ctx, `UPDATE wecom_outbox SET state = 3,
		dup_window = CASE
			WHEN first_try_at IS NOT NULL THEN dup_window
			WHEN ? = 0 OR EXISTS (SELECT 1 FROM wecom_outbox p WHERE p.to_user = wecom_outbox.to_user
				AND p.msg_type = wecom_outbox.msg_type AND p.content = wecom_outbox.content
				AND p.id <> wecom_outbox.id AND p.first_try_at IS NOT NULL
				-- WeCom's window runs from when it accepted p, which can be
				-- long after p's first attempt (retries, a stop): p counts
				-- when it was accepted within the window, may still be
				-- (pending, in flight), or failed after retries that can
				-- have reached into it.
				AND (p.first_try_at >= ? OR p.sent_at >= ? OR p.state IN (0, 3)
					OR (p.state = 2 AND p.first_try_at >= ?))) THEN 0
			ELSE ? END,
		first_try_at = coalesce(first_try_at, ?)
		WHERE id = ? AND state = 0
		RETURNING first_try_at, dup_window`, window, cut, cut, cut-retrySpan.Milliseconds(), window, now.UnixMilli(), h.id).Scan(&h.firstTry, &h.window)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("row %d is no longer pending", h.id)
	}
	return err
}

func (o *Outbox) setState(ctx context.Context, id int64, state, attempts int, nextAt int64, lastErr string) error {
	var sentAt any
	if state == outSent {
		sentAt = o.clock.Now().UnixMilli()
	}
	_, err := o.db.ExecContext(ctx, `UPDATE wecom_outbox SET state = ?, attempts = ?, next_at = ?, last_error = ?, sent_at = ? WHERE id = ?`,
		state, attempts, nextAt, lastErr, sentAt, id)
	return err
}

// storedError is err's text as it may be stored: credentials named in it
// and configured secrets removed, clipped.
func (o *Outbox) storedError(err error) string {
	s := wx.RedactCredentials(err.Error())
	if o.cfg.Scrub != nil {
		s = o.cfg.Scrub(s)
	}
	return clip.String(s, maxErrorText)
}

// send delivers one row and records the outcome.
func (o *Outbox) send(ctx context.Context, h outRow) {
	sctx, cancel := context.WithTimeout(ctx, sendTimeout)
	err := o.deliver(sctx, h)
	cancel()
	// The outcome is recorded even when ctx ended meanwhile.
	dbctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer dcancel()
	var serr error
	switch {
	case err == nil:
		serr = o.setState(dbctx, h.id, outSent, h.attempts+1, 0, "")
		o.logger.Debug("wecom message sent", "id", h.id, "to", h.to, "kind", h.kind, "bytes", len(h.content))
	case ctx.Err() != nil:
		// Stopping: not an attempt; it goes out after the restart.
		serr = o.setState(dbctx, h.id, outPending, h.attempts, 0, "")
	case Permanent(err):
		serr = o.setState(dbctx, h.id, outFailed, h.attempts+1, 0, o.storedError(err))
		o.logger.Error("wecom message not deliverable; dropped", "id", h.id, "to", h.to, "err", err)
	default:
		n := h.attempts + 1
		if n >= o.cfg.MaxAttempts {
			serr = o.setState(dbctx, h.id, outFailed, n, 0, o.storedError(err))
			o.logger.Error("wecom message failed too often; dropped", "id", h.id, "to", h.to, "attempts", n, "err", err)
			break
		}
		d := retryDelay(n)
		serr = o.setState(dbctx, h.id, outPending, n, o.clock.Now().Add(d).UnixMilli(), o.storedError(err))
		o.logger.Warn("wecom send failed; will retry", "id", h.id, "to", h.to, "attempt", n, "in", d, "err", err)
	}
	if serr != nil {
		o.logger.Error("wecom outbox: recording a send failed", "id", h.id, "err", serr)
	}
}

// errNotSendable marks a row that can never be sent.
var errNotSendable = errors.New("not sendable")

// deliver sends one row by its kind, with the row's duplicate check.
func (o *Outbox) deliver(ctx context.Context, h outRow) error {
	var opts []wx.SendOption
	if h.window > 0 {
		opts = append(opts, wx.DuplicateCheck(time.Duration(h.window)*time.Second))
		if late := o.clock.Now().UnixMilli() - h.firstTry; late >= h.window*1000 {
			o.logger.Warn("wecom message sent again after WeCom's duplicate-check window; if an earlier attempt arrived, the user sees it twice",
				"id", h.id, "to", h.to, "first_attempt_ago", time.Duration(late)*time.Millisecond, "window", time.Duration(h.window)*time.Second)
		}
	}
	if h.kind == "" || h.kind == "text" {
		return o.cfg.API.SendText(ctx, h.to, h.content, opts...)
	}
	api, ok := o.cfg.API.(MediaAPI)
	if !ok {
		return fmt.Errorf("wecom outbox: this API client cannot send %s messages: %w", h.kind, errNotSendable)
	}
	var m OutMedia
	if err := json.Unmarshal([]byte(h.content), &m); err != nil {
		return fmt.Errorf("wecom outbox: bad %s row: %v: %w", h.kind, err, errNotSendable)
	}
	switch m.Kind {
	case wx.MediaImage, wx.MediaFile:
		return api.SendMedia(ctx, h.to, m.Kind, m.MediaID, opts...)
	case wx.MediaVideo:
		return api.SendVideo(ctx, h.to, m.MediaID, m.Title, m.Description, opts...)
	case kindLink:
		return api.SendLink(ctx, h.to, m.Title, m.Description, m.URL, m.PicURL, opts...)
	}
	return fmt.Errorf("wecom outbox: unknown kind %q: %w", m.Kind, errNotSendable)
}

// retryDelay is the pause after the n-th failed attempt (1-based).
func retryDelay(n int) time.Duration {
	return min(retryBase<<min(n-1, 20), retryCap)
}

// Permanent reports whether a send error will not go away by retrying:
// content WeCom refuses, an unknown recipient, or an API error that is
// neither a rate limit, a busy system nor a token problem.
func Permanent(err error) bool {
	if errors.Is(err, wx.ErrContentTooLong) || errors.Is(err, wx.ErrInvalidUser) || errors.Is(err, wx.ErrMediaSize) ||
		errors.Is(err, errNotSendable) {
		return true
	}
	var api *wx.APIError
	if errors.As(err, &api) {
		return !api.Retryable() && !errors.Is(api, wx.ErrTokenInvalid)
	}
	return false
}

// Stats counts outbox rows by state (pending, sent, failed).
func (o *Outbox) Stats(ctx context.Context) (pending, sent, failed int, err error) {
	err = o.db.QueryRowContext(ctx, `SELECT
		coalesce(sum(state IN (0, 3)), 0), coalesce(sum(state = 1), 0), coalesce(sum(state = 2), 0) FROM wecom_outbox`).
		Scan(&pending, &sent, &failed)
	return
}
