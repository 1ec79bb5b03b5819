package wecom

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"agent/pkg/channel/mailbox"
	"agent/pkg/clock"
	"agent/pkg/textsplit"
	wx "agent/pkg/wecom"
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
	DefaultMaxAttempts = mailbox.DefaultMaxAttempts
	DefaultParallel    = mailbox.DefaultParallel
	// DefaultDupWindow is the duplicate-check interval a row's attempts
	// carry: WeCom's maximum, so a resend after up to four hours of
	// downtime is still recognised.
	DefaultDupWindow = wx.MaxDuplicateCheck
)

// OutboxConfig configures an Outbox.
type OutboxConfig struct {
	API         API         // nil: rows are stored but Run cannot send
	Clock       clock.Clock // the wall clock when nil
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

// Outbox is the persisted queue of messages to send (the mailbox outbox,
// channel "wecom": the queue, order, claims, retries and recovery are
// mailbox.Outbox's; what a row means, how it is sent, which errors are
// permanent and the duplicate-check window are this file's). Messages to
// one user go out strictly in order; different users are served in
// parallel. Safe for concurrent use.
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
	q      *mailbox.Outbox
	cfg    OutboxConfig
	clock  clock.Clock
	logger *slog.Logger
}

// NewOutbox returns the outbox on db.
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
	switch {
	case cfg.DupWindow == 0:
		cfg.DupWindow = DefaultDupWindow
	case cfg.DupWindow < 0:
		cfg.DupWindow = 0
	}
	// Whole seconds, as WeCom takes them.
	cfg.DupWindow = min((cfg.DupWindow + time.Second - 1).Truncate(time.Second), wx.MaxDuplicateCheck)
	o := &Outbox{cfg: cfg, clock: cfg.Clock, logger: cfg.Logger}
	o.q = mailbox.NewOutbox(db, mailbox.OutboxConfig{
		Channel: Channel, Send: o.deliver, Permanent: Permanent, Redact: o.redact, DupWindow: cfg.DupWindow,
		Recovered: o.recovered, Clock: cfg.Clock, Logger: cfg.Logger, MaxAttempts: cfg.MaxAttempts, Parallel: cfg.Parallel,
	})
	return o
}

// Wake makes the sender look at the queue now.
func (o *Outbox) Wake() { o.q.Wake() }

// Enqueue stores text for toUser, split into pieces WeCom accepts, and
// wakes the sender.
func (o *Outbox) Enqueue(ctx context.Context, toUser, text string) error {
	items, err := o.items(toUser, textItems([]string{text}))
	if err != nil {
		return err
	}
	return o.q.Enqueue(ctx, toUser, items...)
}

// EnqueueMedia stores a media message for toUser (after what is already
// queued for them) and wakes the sender.
func (o *Outbox) EnqueueMedia(ctx context.Context, toUser string, m OutMedia) error {
	items, err := o.items(toUser, []outItem{{media: &m}})
	if err != nil {
		return err
	}
	return o.q.Enqueue(ctx, toUser, items...)
}

// enqueueTx stores texts for toUser inside tx, each split at 2048 bytes.
func (o *Outbox) enqueueTx(ctx context.Context, tx *sql.Tx, toUser string, texts ...string) error {
	return o.enqueueItemsTx(ctx, tx, toUser, textItems(texts))
}

// enqueueItemsTx stores items for toUser inside tx, in order; texts are
// split at 2048 bytes.
func (o *Outbox) enqueueItemsTx(ctx context.Context, tx *sql.Tx, toUser string, items []outItem) error {
	rows, err := o.items(toUser, items)
	if err != nil {
		return err
	}
	return o.q.EnqueueTx(ctx, tx, toUser, rows...)
}

// items are the outbox rows of items for toUser: a media message as its
// kind and JSON, a text as its pieces of at most wecom.MaxTextBytes
// (blank ones dropped).
func (o *Outbox) items(toUser string, items []outItem) ([]mailbox.Item, error) {
	if toUser == "" {
		return nil, errors.New("wecom outbox: enqueue: empty recipient")
	}
	var out []mailbox.Item
	for _, it := range items {
		if it.media != nil {
			if err := it.media.check(); err != nil {
				return nil, err
			}
			raw, err := json.Marshal(it.media)
			if err != nil {
				return nil, fmt.Errorf("wecom outbox: enqueue: %w", err)
			}
			out = append(out, mailbox.Item{Kind: it.media.Kind, Content: string(raw)})
			continue
		}
		for _, piece := range textsplit.Split(it.text, wx.MaxTextBytes) {
			if strings.TrimSpace(piece) == "" {
				continue
			}
			out = append(out, mailbox.Item{Kind: "text", Content: piece})
		}
	}
	return out, nil
}

// Run sends queued messages until ctx ends, then waits for sends in
// flight. Rows left "being sent" by a crash are sent again with the
// duplicate check their first attempt carried, so WeCom drops the resend
// if the first attempt arrived (see Outbox).
func (o *Outbox) Run(ctx context.Context) error {
	if o.cfg.API == nil {
		return errors.New("wecom outbox: no API client")
	}
	return o.q.Run(ctx)
}

// recovered logs the rows in doubt after a crash, and how many of them
// the duplicate check covers.
func (o *Outbox) recovered(r mailbox.Recovery) {
	if r.Covered == r.InDoubt {
		o.logger.Info("wecom messages in doubt after a crash are sent again; WeCom's duplicate check drops any that already arrived",
			"in_doubt", r.InDoubt)
		return
	}
	o.logger.Warn("wecom messages in doubt after a crash are sent again; some are not covered by WeCom's duplicate check and may arrive twice",
		"in_doubt", r.InDoubt, "covered", r.Covered, "repeats_without_check", r.Unchecked, "past_window", r.PastWindow)
}

// redact removes credentials named in an error text and configured
// secrets, before the text is stored.
func (o *Outbox) redact(s string) string {
	s = wx.RedactCredentials(s)
	if o.cfg.Scrub != nil {
		s = o.cfg.Scrub(s)
	}
	return s
}

// errNotSendable marks a row that can never be sent.
var errNotSendable = errors.New("not sendable")

// deliver sends one row by its kind, with the row's duplicate check.
func (o *Outbox) deliver(ctx context.Context, h mailbox.Message) error {
	var opts []wx.SendOption
	if h.Window > 0 {
		opts = append(opts, wx.DuplicateCheck(h.Window))
		if late := time.UnixMilli(o.clock.Now().UnixMilli()).Sub(h.FirstTry); late >= h.Window {
			o.logger.Warn("wecom message sent again after WeCom's duplicate-check window; if an earlier attempt arrived, the user sees it twice",
				"id", h.ID, "to", h.To, "first_attempt_ago", late, "window", h.Window)
		}
	}
	if h.Kind == "" || h.Kind == "text" {
		return o.cfg.API.SendText(ctx, h.To, h.Content, opts...)
	}
	api, ok := o.cfg.API.(MediaAPI)
	if !ok {
		return fmt.Errorf("wecom outbox: this API client cannot send %s messages: %w", h.Kind, errNotSendable)
	}
	var m OutMedia
	if err := json.Unmarshal([]byte(h.Content), &m); err != nil {
		return fmt.Errorf("wecom outbox: bad %s row: %v: %w", h.Kind, err, errNotSendable)
	}
	switch m.Kind {
	case wx.MediaImage, wx.MediaFile:
		return api.SendMedia(ctx, h.To, m.Kind, m.MediaID, opts...)
	case wx.MediaVideo:
		return api.SendVideo(ctx, h.To, m.MediaID, m.Title, m.Description, opts...)
	case kindLink:
		return api.SendLink(ctx, h.To, m.Title, m.Description, m.URL, m.PicURL, opts...)
	}
	return fmt.Errorf("wecom outbox: unknown kind %q: %w", m.Kind, errNotSendable)
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
	return o.q.Stats(ctx)
}
