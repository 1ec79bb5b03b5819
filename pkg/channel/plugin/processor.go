package plugin

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"agent/pkg/channel/gate"
	"agent/pkg/channel/mailbox"
	"agent/pkg/pairing"
)

// maxBatch bounds the messages of one conversation that make one turn
// (those that queued up while its previous turn ran).
const maxBatch = 20

// processor turns pending inbox rows into turns, one at a time per
// conversation (a direct chat, a group chat or a thread of one), in
// arrival order. Messages from one sender that queued up while a turn ran
// make the next turn together, answered with reply_to the newest.
type processor struct {
	c      *Channel
	wakeCh chan struct{}
	turns  *mailbox.Turns
}

func newProcessor(c *Channel) *processor {
	p := &processor{c: c, wakeCh: make(chan struct{}, 1)}
	p.turns = mailbox.NewTurns(c.clock, c.logger, p.wake)
	return p
}

func (p *processor) wake() {
	select {
	case p.wakeCh <- struct{}{}:
	default:
	}
}

func (p *processor) run(ctx context.Context) {
	defer p.turns.Wait()
	for {
		if err := p.dispatch(ctx); err != nil && ctx.Err() == nil {
			p.c.logger.Error("inbox: reading failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wakeCh:
		case <-p.c.clock.After(5 * time.Second):
		}
	}
}

// conversationOf is the key of a row's conversation: a group chat (a
// thread of one) whoever writes, a sender's direct chat.
func conversationOf(r mailbox.Row, s stored) string {
	if s.Group {
		return strings.Join([]string{kindGroup, s.Chat, s.Thread}, "\x00")
	}
	return strings.Join([]string{kindDirect, s.Chat, r.Sender}, "\x00")
}

// dispatch starts a turn for every conversation with pending messages and
// none running: its oldest messages from one sender (those that follow
// each other, at most maxBatch) make the turn.
func (p *processor) dispatch(ctx context.Context) error {
	busy := p.turns.Busy()
	rows, err := p.c.inbox.Pending(ctx)
	if err != nil {
		return err
	}
	var order []string
	batches := map[string][]mailbox.Row{}
	full := map[string]bool{}
	for _, r := range rows {
		var s stored
		_ = json.Unmarshal([]byte(r.Raw), &s)
		k := conversationOf(r, s)
		if busy[k] || full[k] {
			continue // the next turn of a conversation waits for the one before
		}
		b := batches[k]
		switch {
		case len(b) > 0 && (b[0].Sender != r.Sender || len(b) >= maxBatch):
			// Another sender's message (a turn is one sender's) or
			// enough: the next turn.
			full[k] = true
			continue
		case p.c.isAcking(s.ID):
			// Its ack is being written (the reader wakes us after): a
			// send answering it must not come first, nor may later
			// messages of its conversation overtake it.
			full[k] = true
			continue
		}
		if len(b) == 0 {
			order = append(order, k)
		}
		batches[k] = append(b, r)
	}
	for _, k := range order {
		batch := batches[k]
		p.turns.Start(ctx, k, batch[0].Sender, func() error { return p.turn(ctx, batch) })
	}
	return nil
}

// turn answers the stored messages of one conversation (in order) as one
// turn; its replies go to the chat they came from, answering the newest.
func (p *processor) turn(ctx context.Context, rows []mailbox.Row) error {
	r := rows[len(rows)-1]
	var s stored
	if err := json.Unmarshal([]byte(r.Raw), &s); err != nil || s.Chat == "" {
		return p.commit(ctx, rows, mailbox.InIgnored, "", "", nil)
	}
	name := p.c.d.Name
	req := gate.Request{Principals: []string{name + ":" + r.Sender}}
	if s.Group {
		req.Group = "group:" + name + ":" + s.Chat
	}
	handled, err := p.c.d.Gate.Screen(ctx, p.c.d.DB, req, gate.Batch{
		Code: func(tx *sql.Tx, code string) error {
			return p.c.outbox.EnqueueTx(ctx, tx, s.Chat, items(pairing.CodeText(code), s.ID)...)
		},
		Ignore: func(tx *sql.Tx) error {
			return p.c.inbox.Mark(ctx, tx, mailbox.InIgnored, p.c.clock.Now(), ids(rows)...)
		},
	}, p.c.logger)
	if err != nil || handled {
		if handled {
			p.c.outbox.Wake()
			p.c.signalSpace()
		}
		return err
	}
	var texts []string
	for _, row := range rows {
		if t := strings.TrimSpace(row.Content); t != "" {
			texts = append(texts, t)
		}
	}
	var mu sync.Mutex
	var replies []string
	done, err := p.c.d.Ask(ctx, Request{Sender: r.Sender, Chat: s.Chat, Group: s.Group, Thread: s.Thread,
		Text: strings.Join(texts, "\n"), MsgID: fmt.Sprintf("inbox:%d", r.ID)},
		func(_ context.Context, text string) error {
			mu.Lock()
			replies = append(replies, text)
			mu.Unlock()
			return nil
		})
	if err == nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	} else if ctx.Err() == nil {
		// Not queued (the sender's queue is full: they were told so in
		// replies): the messages are answered by that.
		p.c.logger.Warn("turn not run", "sender", r.Sender, "err", err)
	}
	if ctx.Err() != nil {
		return ctx.Err() // stopping: stays pending, answered after the restart
	}
	mu.Lock()
	out := replies
	mu.Unlock()
	return p.commit(ctx, rows, mailbox.InDone, s.Chat, s.ID, out)
}

// commit marks the rows and queues the replies to chat in one transaction.
func (p *processor) commit(ctx context.Context, rows []mailbox.Row, state int, chat, replyTo string, replies []string) error {
	tx, err := p.c.d.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("commit turn: %w", err)
	}
	defer tx.Rollback()
	queued := false
	for _, text := range replies {
		if strings.TrimSpace(text) == "" {
			continue
		}
		if err := p.c.outbox.EnqueueTx(ctx, tx, chat, items(text, replyTo)...); err != nil {
			return err
		}
		queued = true
	}
	if err := p.c.inbox.Mark(ctx, tx, state, p.c.clock.Now(), ids(rows)...); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit turn: %w", err)
	}
	if queued {
		p.c.outbox.Wake()
	}
	p.c.signalSpace()
	return nil
}

func ids(rows []mailbox.Row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}
