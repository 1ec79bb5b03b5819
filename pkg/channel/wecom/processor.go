package wecom

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"agent/pkg/channel"
	"agent/pkg/channel/gate"
	"agent/pkg/channel/mailbox"
	"agent/pkg/clock"
	"agent/pkg/pairing"
	"agent/pkg/turn"
	wx "agent/pkg/wecom"
)

// Channel is the name of this channel in routing keys and principals.
const Channel = "wecom"

// DefaultDebounce is wecom.debounce's default.
const DefaultDebounce = 3 * time.Second

// maxBatch bounds how many messages of one sender make one turn.
const maxBatch = 20

// ProcessorConfig configures a Processor.
type ProcessorConfig struct {
	Inbox        *Inbox
	Outbox       *Outbox
	Conversation channel.Turns
	Pairing      *pairing.Store
	// Policy returns the DM policy in force (read per turn, so a reload
	// applies at once).
	Policy   func() pairing.Policy
	Debounce time.Duration // messages of one sender this close together make one turn; 0 = none
	Clock    clock.Clock   // the wall clock when nil
	Logger   *slog.Logger
	// Media downloads inbound pictures, voice, videos and files into the
	// sender's own folder through Uploads (media.go); when either is nil,
	// media are only described to the model.
	Media   MediaGetter
	Uploads Uploads
	// Vision reports whether pictures go to the model as image content
	// (llm.vision); nil means no.
	Vision func() bool
	// ASR returns the speech recogniser for voice messages, or nil while
	// none is loaded.
	ASR    func() Recognizer
	FFmpeg string // the ffmpeg binary; "ffmpeg" (from PATH) when empty
	// ProgressAfter returns wecom.progress_after (read per turn): a turn
	// still running that long after it started sends its user one
	// ProgressText, so nobody waits in silence. nil or 0: never.
	ProgressAfter func() time.Duration
}

// ProgressText is what a user reads while a long turn runs.
const ProgressText = "Working on it, one moment…"

// Processor turns pending inbox rows into turns, one sender at a time.
type Processor struct {
	cfg    ProcessorConfig
	policy gate.Gate
	db     *sql.DB
	clock  clock.Clock
	logger *slog.Logger
	wake   chan struct{}

	turns *mailbox.Turns // conversations with a turn running

	mu    sync.Mutex
	sinks map[string][]*turnSink // sender -> the outputs of their running turns
}

// turnSink collects what a running turn sends its user, texts and media
// in order; they are committed to the outbox with the turn.
type turnSink struct {
	mu    sync.Mutex
	items []outItem
}

func (s *turnSink) add(it outItem) {
	s.mu.Lock()
	s.items = append(s.items, it)
	s.mu.Unlock()
}

func (s *turnSink) take() []outItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]outItem(nil), s.items...)
}

// NewProcessor returns a processor; Run starts it.
func NewProcessor(cfg ProcessorConfig) *Processor {
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Policy == nil {
		cfg.Policy = func() pairing.Policy { return pairing.Policy{Mode: pairing.Pairing} }
	}
	p := &Processor{cfg: cfg, policy: gate.Gate{Pairings: cfg.Pairing, Policy: cfg.Policy}, db: cfg.Inbox.db, clock: cfg.Clock, logger: cfg.Logger,
		wake: make(chan struct{}, 1), sinks: map[string][]*turnSink{}}
	p.turns = mailbox.NewTurns(cfg.Clock, cfg.Logger, p.Wake)
	return p
}

// Wake makes the processor look at the inbox now (after a message is
// stored).
func (p *Processor) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run processes the inbox until ctx ends. A turn still running then is
// abandoned uncommitted: its messages stay pending and are processed again
// after the restart.
func (p *Processor) Run(ctx context.Context) error {
	defer p.turns.Wait()
	for {
		next, err := p.dispatch(ctx)
		if err != nil && ctx.Err() == nil {
			p.logger.Error("wecom inbox: reading failed", "err", err)
			next = p.clock.Now().Add(5 * time.Second)
		}
		var timer <-chan time.Time
		if !next.IsZero() {
			timer = p.clock.After(max(next.Sub(p.clock.Now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake:
		case <-timer:
		}
	}
}

// batch is the pending messages of one conversation, in order.
type batch struct {
	key    string
	sender string
	chatID string
	rows   []row
}

func convKey(sender, chatID string) string { return sender + "\x00" + chatID }

// dispatch starts a turn for every conversation whose messages have
// settled, and returns when the next one settles.
func (p *Processor) dispatch(ctx context.Context) (time.Time, error) {
	// Which conversations are busy is read before the rows (Turns.Busy).
	// Only dispatch starts turns, so a conversation idle now stays idle
	// until below.
	busy := p.turns.Busy()
	rows, err := p.cfg.Inbox.pending(ctx)
	if err != nil {
		return time.Time{}, err
	}
	var order []string
	batches := map[string]*batch{}
	for _, r := range rows {
		k := convKey(r.sender, r.chatID)
		b := batches[k]
		if b == nil {
			b = &batch{key: k, sender: r.sender, chatID: r.chatID}
			batches[k] = b
			order = append(order, k)
		}
		if len(b.rows) < maxBatch {
			b.rows = append(b.rows, r)
		}
	}
	now := p.clock.Now()
	deb := p.cfg.Debounce
	var next time.Time
	for _, k := range order {
		b := batches[k]
		if busy[k] {
			continue // woken when the running turn ends
		}
		first, last := b.rows[0].received, b.rows[len(b.rows)-1].received
		// Wait for the sender to pause, but not forever.
		ready := last.Add(deb)
		if limit := first.Add(4 * deb); limit.Before(ready) {
			ready = limit
		}
		if len(b.rows) == maxBatch {
			ready = now
		}
		if now.Before(ready) {
			if next.IsZero() || ready.Before(next) {
				next = ready
			}
			continue
		}
		p.turns.Start(ctx, k, b.sender, func() error { return p.turn(ctx, b) })
	}
	return next, nil
}

// turn applies the DM policy to a batch and, when allowed, runs it as one
// turn; the replies and the rows' new state are committed together.
func (p *Processor) turn(ctx context.Context, b *batch) error {
	user := Channel + ":" + b.sender
	group := ""
	if b.chatID != "" {
		group = "group:" + Channel + ":" + b.chatID
	}
	handled, err := p.gate(ctx, b, user, group)
	if err != nil || handled {
		return err
	}
	var texts, notices []string
	var images []turn.Attachment
	substantive := false // notes on failed media alone make no turn
	for _, r := range b.rows {
		t, note := r.content, false
		switch r.msgType {
		case wx.MsgImage, wx.MsgVoice, wx.MsgVideo, wx.MsgFile:
			res := p.media(ctx, b, r, len(images))
			if ctx.Err() != nil {
				return ctx.Err() // stopping: stays pending
			}
			t, note = res.Text, res.Note
			if res.Image != nil {
				images = append(images, *res.Image)
			}
			if res.Notice != "" {
				notices = append(notices, res.Notice)
			}
		}
		if t := strings.TrimSpace(t); t != "" {
			texts = append(texts, t)
			substantive = substantive || !note
		}
	}
	if !substantive && len(images) == 0 {
		state := inboxIgnored
		if len(notices) > 0 {
			state = inboxDone
		}
		return p.commit(ctx, b, state, textItems(notices))
	}
	in := turn.Message{Channel: Channel, Sender: b.sender, Text: strings.Join(texts, "\n"), Attachments: images,
		ID: fmt.Sprintf("inbox:%d", b.rows[len(b.rows)-1].id)}
	if b.chatID != "" {
		in.Group, in.Chat = true, b.chatID
	}
	sink := &turnSink{items: textItems(notices)}
	p.mu.Lock()
	p.sinks[b.sender] = append(p.sinks[b.sender], sink)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		list := p.sinks[b.sender]
		for i, s := range list {
			if s == sink {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(p.sinks, b.sender)
		} else {
			p.sinks[b.sender] = list
		}
	}()
	done, err := p.cfg.Conversation.Handle(ctx, in, turn.Sink{Reply: func(_ context.Context, text string) error {
		sink.add(outItem{text: text})
		return nil
	}})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		// The pipeline refused (queue full: the user was told in replies).
		p.logger.Warn("wecom turn refused", "sender", b.sender, "err", err)
	} else if err := p.await(ctx, b, done); err != nil {
		return err // stopping: stays pending, runs again after the restart
	}
	out := sink.take()
	p.logger.Debug("wecom turn done", "sender", b.sender, "messages", len(b.rows), "replies", len(out))
	return p.commit(ctx, b, inboxDone, out)
}

// await waits for a turn to end. When it runs past ProgressAfter, its
// user gets one ProgressText at once (queued ahead of the replies, which
// come with the turn's commit).
func (p *Processor) await(ctx context.Context, b *batch, done <-chan struct{}) error {
	var progress <-chan time.Time
	if p.cfg.ProgressAfter != nil {
		if d := p.cfg.ProgressAfter(); d > 0 {
			t := p.clock.NewTimer(d)
			defer t.Stop()
			progress = t.C()
		}
	}
	for {
		select {
		case <-done:
			return ctx.Err()
		case <-ctx.Done():
			return ctx.Err()
		case <-progress:
			progress = nil
			if err := p.cfg.Outbox.Enqueue(ctx, b.sender, ProgressText); err != nil {
				p.logger.Warn("wecom: progress note not queued", "sender", b.sender, "err", err)
			} else {
				p.logger.Debug("wecom: long turn, progress note queued", "sender", b.sender)
			}
		}
	}
}

// gate applies the DM policy (gate.Gate, in the batch's transaction: a
// stranger's code and its message are committed together); handled means
// the batch needs no turn.
func (p *Processor) gate(ctx context.Context, b *batch, user, group string) (handled bool, err error) {
	handled, err = p.policy.Screen(ctx, p.db, gate.Request{Principals: []string{user}, Group: group}, gate.Batch{
		Code: func(tx *sql.Tx, code string) error {
			return p.cfg.Outbox.enqueueTx(ctx, tx, b.sender, pairing.CodeText(code))
		},
		Ignore: func(tx *sql.Tx) error { return p.cfg.Inbox.mark(ctx, tx, inboxIgnored, p.clock.Now(), b.rows) },
	}, p.logger)
	if handled {
		p.cfg.Outbox.Wake()
	}
	return handled, err
}

// Deliver sends a media message to a WeCom user. While a turn of that
// user runs (the send_* tools), it joins the turn's replies, in order, and
// is committed with them; otherwise it goes to the outbox at once.
func (p *Processor) Deliver(ctx context.Context, toUser string, m OutMedia) error {
	if err := m.check(); err != nil {
		return err
	}
	p.mu.Lock()
	var sink *turnSink
	if list := p.sinks[toUser]; len(list) > 0 {
		sink = list[len(list)-1]
	}
	p.mu.Unlock()
	if sink != nil {
		sink.add(outItem{media: &m})
		return nil
	}
	return p.cfg.Outbox.EnqueueMedia(ctx, toUser, m)
}

// commit stores replies (to the sender; see the package docs on groups)
// and marks the batch's rows, in one transaction.
func (p *Processor) commit(ctx context.Context, b *batch, state int, replies []outItem) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("commit turn: %w", err)
	}
	defer tx.Rollback()
	if len(replies) > 0 {
		if err := p.cfg.Outbox.enqueueItemsTx(ctx, tx, b.sender, replies); err != nil {
			return err
		}
	}
	if err := p.cfg.Inbox.mark(ctx, tx, state, p.clock.Now(), b.rows); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit turn: %w", err)
	}
	if len(replies) > 0 {
		p.cfg.Outbox.Wake()
	}
	return nil
}
