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

	wx "agent/pkg/wecom"
)

// Outbox row states.
const (
	outPending = 0
	outSent    = 1
	outFailed  = 2
	outSending = 3
)

// API sends a text message (*wecom.Client).
type API interface {
	SendText(ctx context.Context, toUser, text string) error
}

// MediaAPI sends media messages (*wecom.Client). The outbox's API must
// implement it for media rows to go out.
type MediaAPI interface {
	SendMedia(ctx context.Context, toUser, kind, mediaID string) error
	SendVideo(ctx context.Context, toUser, mediaID, title, description string) error
	SendLink(ctx context.Context, toUser, title, description, link, picURL string) error
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
	retryBase          = time.Second
	retryCap           = 5 * time.Minute
	sendTimeout        = 2 * time.Minute
)

// OutboxConfig configures an Outbox.
type OutboxConfig struct {
	API         API // nil: rows are stored but Run cannot send
	Clock       Clock
	Logger      *slog.Logger
	MaxAttempts int // transient failures before a row fails; DefaultMaxAttempts when 0
	Parallel    int // recipients served at once; DefaultParallel when 0
}

// Outbox is the persisted queue of messages to send (table wecom_outbox).
// Messages to one user go out strictly in order; different users are
// served in parallel. Safe for concurrent use.
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
}

// Run sends queued messages until ctx ends, then waits for sends in
// flight. Rows left "being sent" by a crash are sent again (at least once:
// WeCom has no idempotency key).
func (o *Outbox) Run(ctx context.Context) error {
	if o.cfg.API == nil {
		return errors.New("wecom outbox: no API client")
	}
	res, err := o.db.ExecContext(ctx, `UPDATE wecom_outbox SET state = 0 WHERE state = 3`)
	if err != nil {
		return fmt.Errorf("wecom outbox: recover: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		o.logger.Warn("wecom messages in doubt after a crash are sent again (the user may see them twice)", "in_doubt", n)
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
			if err := o.setState(ctx, h.id, outSending, h.attempts, 0, ""); err != nil {
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
		SELECT o.id, o.to_user, o.msg_type, o.content, o.attempts, o.next_at FROM wecom_outbox o
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
		if err := rows.Scan(&r.id, &r.to, &r.kind, &r.content, &r.attempts, &at); err != nil {
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

func (o *Outbox) setState(ctx context.Context, id int64, state, attempts int, nextAt int64, lastErr string) error {
	var sentAt any
	if state == outSent {
		sentAt = o.clock.Now().UnixMilli()
	}
	_, err := o.db.ExecContext(ctx, `UPDATE wecom_outbox SET state = ?, attempts = ?, next_at = ?, last_error = ?, sent_at = ? WHERE id = ?`,
		state, attempts, nextAt, lastErr, sentAt, id)
	return err
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
		serr = o.setState(dbctx, h.id, outFailed, h.attempts+1, 0, err.Error())
		o.logger.Error("wecom message not deliverable; dropped", "id", h.id, "to", h.to, "err", err)
	default:
		n := h.attempts + 1
		if n >= o.cfg.MaxAttempts {
			serr = o.setState(dbctx, h.id, outFailed, n, 0, err.Error())
			o.logger.Error("wecom message failed too often; dropped", "id", h.id, "to", h.to, "attempts", n, "err", err)
			break
		}
		d := retryDelay(n)
		serr = o.setState(dbctx, h.id, outPending, n, o.clock.Now().Add(d).UnixMilli(), err.Error())
		o.logger.Warn("wecom send failed; will retry", "id", h.id, "to", h.to, "attempt", n, "in", d, "err", err)
	}
	if serr != nil {
		o.logger.Error("wecom outbox: recording a send failed", "id", h.id, "err", serr)
	}
}

// errNotSendable marks a row that can never be sent.
var errNotSendable = errors.New("not sendable")

// deliver sends one row by its kind.
func (o *Outbox) deliver(ctx context.Context, h outRow) error {
	if h.kind == "" || h.kind == "text" {
		return o.cfg.API.SendText(ctx, h.to, h.content)
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
		return api.SendMedia(ctx, h.to, m.Kind, m.MediaID)
	case wx.MediaVideo:
		return api.SendVideo(ctx, h.to, m.MediaID, m.Title, m.Description)
	case kindLink:
		return api.SendLink(ctx, h.to, m.Title, m.Description, m.URL, m.PicURL)
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
