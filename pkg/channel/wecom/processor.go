package wecom

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"agent/pkg/conversation"
	"agent/pkg/pairing"
)

// Channel is the name of this channel in routing keys and principals.
const Channel = "wecom"

// DefaultDebounce is wecom.debounce's default.
const DefaultDebounce = 3 * time.Second

// maxBatch bounds how many messages of one sender make one turn.
const maxBatch = 20

// Conversation runs turns (*conversation.Service).
type Conversation interface {
	Handle(ctx context.Context, in conversation.Inbound, reply conversation.Reply) (<-chan struct{}, error)
}

// ProcessorConfig configures a Processor.
type ProcessorConfig struct {
	Inbox        *Inbox
	Outbox       *Outbox
	Conversation Conversation
	Pairing      *pairing.Store
	// Policy returns the DM policy in force (read per turn, so a reload
	// applies at once).
	Policy   func() pairing.Policy
	Debounce time.Duration // messages of one sender this close together make one turn; 0 = none
	Clock    Clock
	Logger   *slog.Logger
}

// Processor turns pending inbox rows into turns, one sender at a time.
type Processor struct {
	cfg    ProcessorConfig
	db     *sql.DB
	clock  Clock
	logger *slog.Logger
	wake   chan struct{}

	mu       sync.Mutex
	inflight map[string]bool // conversation keys with a turn running
}

// NewProcessor returns a processor; Run starts it.
func NewProcessor(cfg ProcessorConfig) *Processor {
	if cfg.Clock == nil {
		cfg.Clock = RealClock
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Policy == nil {
		cfg.Policy = func() pairing.Policy { return pairing.Policy{Mode: pairing.Pairing} }
	}
	return &Processor{cfg: cfg, db: cfg.Inbox.db, clock: cfg.Clock, logger: cfg.Logger,
		wake: make(chan struct{}, 1), inflight: map[string]bool{}}
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
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		next, err := p.dispatch(ctx, &wg)
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
func (p *Processor) dispatch(ctx context.Context, wg *sync.WaitGroup) (time.Time, error) {
	// Which conversations are busy is read before the rows: a turn that
	// ends while the rows are read has committed rows the read may still
	// show as pending. Only dispatch starts turns, so a conversation idle
	// now stays idle until below.
	p.mu.Lock()
	busy := make(map[string]bool, len(p.inflight))
	for k := range p.inflight {
		busy[k] = true
	}
	p.mu.Unlock()
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
		p.mu.Lock()
		p.inflight[k] = true
		p.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				p.mu.Lock()
				delete(p.inflight, k)
				p.mu.Unlock()
				p.Wake()
			}()
			if err := p.turn(ctx, b); err != nil && ctx.Err() == nil {
				p.logger.Error("wecom turn not recorded; will retry", "sender", b.sender, "err", err)
				select { // not in a tight loop
				case <-p.clock.After(5 * time.Second):
				case <-ctx.Done():
				}
			}
		}()
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
	var texts []string
	for _, r := range b.rows {
		if t := strings.TrimSpace(r.content); t != "" {
			texts = append(texts, t)
		}
	}
	if len(texts) == 0 {
		return p.commit(ctx, b, inboxIgnored, nil)
	}
	in := conversation.Inbound{Channel: Channel, ChatType: conversation.P2P, Sender: b.sender, Text: strings.Join(texts, "\n")}
	if b.chatID != "" {
		in.ChatType, in.ChatID = conversation.Group, b.chatID
	}
	var mu sync.Mutex
	var replies []string
	done, err := p.cfg.Conversation.Handle(ctx, in, func(_ context.Context, text string) error {
		mu.Lock()
		replies = append(replies, text)
		mu.Unlock()
		return nil
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		// The pipeline refused (queue full: the user was told in replies).
		p.logger.Warn("wecom turn refused", "sender", b.sender, "err", err)
	} else {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err() // stopping: stays pending, runs again after the restart
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	mu.Lock()
	out := append([]string(nil), replies...)
	mu.Unlock()
	p.logger.Debug("wecom turn done", "sender", b.sender, "messages", len(b.rows), "replies", len(out))
	return p.commit(ctx, b, inboxDone, out)
}

// gate applies the DM policy; handled means the batch needs no turn.
func (p *Processor) gate(ctx context.Context, b *batch, user, group string) (handled bool, err error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("policy: %w", err)
	}
	defer tx.Rollback()
	v, code, err := p.cfg.Pairing.Decide(ctx, tx, p.cfg.Policy(), user, group)
	if err != nil {
		return false, err
	}
	switch v {
	case pairing.Allow:
		return false, nil
	case pairing.NewCode:
		p.logger.Info("wecom stranger got a pairing code", "user", user, "code", code)
		if err := p.cfg.Outbox.enqueueTx(ctx, tx, b.sender, pairing.CodeText(code)); err != nil {
			return false, err
		}
	default:
		p.logger.Info("wecom message dropped by the DM policy", "user", user, "group", group, "verdict", v.String(), "messages", len(b.rows))
	}
	if err := mark(ctx, tx, inboxIgnored, p.clock.Now(), b.rows); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("policy: commit: %w", err)
	}
	p.cfg.Outbox.Wake()
	return true, nil
}

// commit stores replies (to the sender; see the package docs on groups)
// and marks the batch's rows, in one transaction.
func (p *Processor) commit(ctx context.Context, b *batch, state int, replies []string) error {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("commit turn: %w", err)
	}
	defer tx.Rollback()
	if len(replies) > 0 {
		if err := p.cfg.Outbox.enqueueTx(ctx, tx, b.sender, replies...); err != nil {
			return err
		}
	}
	if err := mark(ctx, tx, state, p.clock.Now(), b.rows); err != nil {
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
