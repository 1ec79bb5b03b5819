package wecombot

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"agent/pkg/channel"
	"agent/pkg/channel/gate"
	"agent/pkg/channel/mailbox"
	"agent/pkg/channel/upload"
	"agent/pkg/pairing"
	"agent/pkg/turn"
	"agent/pkg/wecom/aibot"
)

// processor turns pending inbox rows into turns, one turn at a time per
// conversation, in arrival order. Messages that queued up while a turn ran
// (at most maxBatch) make the next turn together, answered under the
// newest one: a flood from one user costs one turn, not one per message.
type processor struct {
	b      *Bot
	conv   channel.Turns
	policy gate.Gate
	every  time.Duration
	limit  time.Duration
	wakeCh chan struct{}

	turns *mailbox.Turns
}

// heldNote ends the stream of a message held behind earlier ones while
// the model service is unreachable (pkg/backlog answers it later).
const heldNote = "⏳ Kept: I will answer this as soon as the model service is back."

// maxBatch bounds the messages of one conversation in one turn.
const maxBatch = 20

// streamLimit is how long a reply stream may stay open.
func streamLimit(o Options) time.Duration {
	if o.StreamLimit <= 0 {
		return 5*time.Minute + 30*time.Second
	}
	return o.StreamLimit
}

func newProcessor(b *Bot, conv channel.Turns, o Options) *processor {
	if o.StreamEvery <= 0 {
		o.StreamEvery = 400 * time.Millisecond
	}
	p := &processor{b: b, conv: conv, policy: b.host.Gate, every: o.StreamEvery, limit: streamLimit(o), wakeCh: make(chan struct{}, 1)}
	p.turns = mailbox.NewTurns(b.clock, b.logger, p.wake)
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
			p.b.logger.Error("wecom_bot inbox: reading failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wakeCh:
		case <-p.b.clock.After(5 * time.Second):
		}
	}
}

func (p *processor) dispatch(ctx context.Context) error {
	busy := p.turns.Busy()
	rows, err := p.b.inbox.Pending(ctx)
	if err != nil {
		return err
	}
	var order []string
	batches := map[string][]mailbox.Row{}
	for _, r := range rows {
		k := r.Sender + "\x00" + r.ChatID
		if busy[k] {
			continue // the next turn of a conversation waits for the one before
		}
		if _, ok := batches[k]; !ok {
			order = append(order, k)
		}
		if len(batches[k]) < maxBatch {
			batches[k] = append(batches[k], r)
		}
	}
	for _, k := range order {
		batch := batches[k]
		p.turns.Start(ctx, k, batch[0].Sender, func() error { return p.turn(ctx, batch) })
	}
	return nil
}

// turn answers the stored messages of one conversation (in order) as one
// turn, streamed under the newest one's req_id.
func (p *processor) turn(ctx context.Context, rows []mailbox.Row) error {
	r := rows[len(rows)-1]
	var sr stored
	if err := json.Unmarshal([]byte(r.Raw), &sr); err != nil || sr.ReqID == "" {
		return p.commit(ctx, rows, mailbox.InIgnored, "")
	}
	user := scope + ":" + r.Sender
	group := ""
	if r.ChatID != "" {
		group = "group:" + scope + ":" + r.ChatID
	}
	if handled, err := p.gate(ctx, rows, user, group); err != nil || handled {
		return err
	}
	var texts, notices []string
	var images []turn.Attachment
	substantive := false // notes on failed media alone make no turn
	for _, row := range rows {
		if t := strings.TrimSpace(row.Content); t != "" {
			texts = append(texts, t)
			substantive = true
		}
		var rs stored
		_ = json.Unmarshal([]byte(row.Raw), &rs)
		for i, ref := range rs.Media {
			res := p.media(ctx, row, rs.MsgID, i, ref, len(images))
			if ctx.Err() != nil {
				return ctx.Err() // stopping: stays pending
			}
			if t := strings.TrimSpace(res.Text); t != "" {
				texts = append(texts, t)
				substantive = substantive || !res.Note
			}
			if res.Image != nil {
				images = append(images, *res.Image)
			}
			if res.Notice != "" {
				notices = append(notices, res.Notice)
			}
		}
	}
	if !substantive && len(images) == 0 {
		state := mailbox.InIgnored
		if len(notices) > 0 {
			state = mailbox.InDone
		}
		return p.commit(ctx, rows, state, strings.Join(notices, "\n\n"))
	}
	in := turn.Message{Channel: scope, Profile: scope, Sender: r.Sender, Text: strings.Join(texts, "\n"), Attachments: images,
		ID: fmt.Sprintf("inbox:%d", r.ID)}
	if r.ChatID != "" {
		in.Group, in.Chat = true, r.ChatID
	}
	var sink turn.Sink
	// A message that arrived on an earlier connection (answered after a
	// reconnect or a restart), or too long ago for a stream, is answered
	// by push: its req_id belonged to that connection.
	var st *stream
	if p.streamable(r, sr) {
		st = newStream(p.b, sr, "s_"+sr.MsgID, p.every, p.limit)
		st.start(ctx)
		sink.Stream = st.add
		sink.Progress = st.progress
	}
	var mu sync.Mutex
	replies := notices // the user reads why an attachment was not read first
	var held atomic.Bool
	sink.Held = func() { held.Store(true) }
	sink.Reply = func(_ context.Context, text string) error {
		mu.Lock()
		replies = append(replies, text)
		joined := strings.Join(replies, "\n\n")
		mu.Unlock()
		if st != nil {
			st.setReply(joined)
		}
		return nil
	}
	done, err := p.conv.Handle(ctx, in, sink)
	if err == nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	if ctx.Err() != nil {
		if st != nil {
			st.abandon()
		}
		return ctx.Err() // stopping: stays pending, answered after the restart
	}
	mu.Lock()
	full := strings.Join(replies, "\n\n")
	mu.Unlock()
	if full == "" && held.Load() {
		full = heldNote // held behind earlier ones: the stream still ends with a word
	}
	rest := full
	if st != nil {
		rest = st.finish(ctx, full) // what the stream could not carry
	}
	return p.commit(ctx, rows, mailbox.InDone, rest)
}

// streamable reports whether a message can still be answered in a reply
// stream: it came on the connection that is up now (a req_id belongs to
// its connection) and not too long ago for a stream.
func (p *processor) streamable(r mailbox.Row, sr stored) bool {
	now := p.b.clock.Now()
	if !p.b.local(sr) {
		// Received by another box: it refuses a frame for a connection
		// it no longer has (the answer then goes by push).
		return sr.Conn != 0 && now.Sub(sr.At) < p.limit/2
	}
	if p.b.client == nil {
		return false // no connection here (a row from before the box joined a fleet)
	}
	cs := p.b.client.Status()
	if cs.State != aibot.StateReady {
		return false
	}
	received := r.Received
	if !sr.At.IsZero() {
		received = sr.At
	}
	if sr.Conn != 0 {
		return sr.Conn == connID(cs) && now.Sub(received) < p.limit/2
	}
	return !r.Received.Before(cs.Since.Truncate(time.Millisecond)) && now.Sub(received) < p.limit/2
}

// gate applies the DM policy, as the app channel does: handled means the
// row needs no turn (a stranger got a pairing code, or was dropped).
func (p *processor) gate(ctx context.Context, rows []mailbox.Row, user, group string) (bool, error) {
	handled, err := p.policy.Screen(ctx, p.b.host.DB, gate.Request{Principals: []string{user}, Group: group}, gate.Batch{
		Code: func(tx *sql.Tx, code string) error {
			return p.b.outbox.EnqueueTx(ctx, tx, rows[0].Sender, mailbox.Item{Kind: "markdown", Content: pairing.CodeText(code)})
		},
		Ignore: func(tx *sql.Tx) error {
			return p.b.inbox.Mark(ctx, tx, mailbox.InIgnored, p.b.clock.Now(), ids(rows)...)
		},
	}, p.b.logger)
	if handled {
		p.dropMedia(ctx, rows)
		p.b.outbox.Wake()
	}
	return handled, err
}

// commit marks the row and queues push (a reply the stream could not
// carry) in one transaction.
func (p *processor) commit(ctx context.Context, rows []mailbox.Row, state int, push string) error {
	r := rows[0]
	tx, err := p.b.host.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("commit turn: %w", err)
	}
	defer tx.Rollback()
	to := r.Sender
	if r.ChatID != "" {
		to = "group:" + scope + ":" + r.ChatID
	}
	if strings.TrimSpace(push) != "" {
		if err := p.b.outbox.EnqueueTx(ctx, tx, to, mailbox.Item{Kind: "markdown", Content: push}); err != nil {
			return err
		}
	}
	if err := p.b.inbox.Mark(ctx, tx, state, p.b.clock.Now(), ids(rows)...); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit turn: %w", err)
	}
	p.dropMedia(ctx, rows)
	if push != "" {
		p.b.outbox.Wake()
	}
	return nil
}

func ids(rows []mailbox.Row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// media fetches (or waits for) the i-th resource of a stored message and
// keeps it in the sender's uploads, as the app channel does.
func (p *processor) media(ctx context.Context, r mailbox.Row, msgID string, i int, ref mediaRef, images int) upload.Result {
	if p.b.keeper.Store == nil {
		return upload.Result{Text: fmt.Sprintf("[The user sent a %s that could not be kept.]", upload.What(ref.Kind)), Note: true}
	}
	p.b.media.wait(ctx, msgID)
	data, name, err := p.b.media.get(ctx, msgID, i, ref)
	if err != nil {
		if ctx.Err() != nil {
			return upload.Result{}
		}
		p.b.logger.Warn("wecom_bot media not read", "sender", r.Sender, "msgid", msgID, "kind", ref.Kind, "err", err)
		return mediaFailure(ref.Kind, err)
	}
	// Kept where the conversation's file tools look: the sender's folder
	// in a direct chat, the group's in a group (workspace.Scope).
	owner := scope + ":" + r.Sender
	if r.ChatID != "" {
		owner = "group:" + scope + ":" + r.ChatID
	}
	return p.b.keeper.Keep(owner, upload.Media{Kind: ref.Kind, MsgID: msgID, Part: i, Row: r.ID, Received: r.Received, FileName: name}, data, images)
}

// dropMedia deletes the spool entries of committed rows, once their
// downloads have ended (a refused stranger's message is committed before
// its download finishes).
func (p *processor) dropMedia(ctx context.Context, rows []mailbox.Row) {
	for _, r := range rows {
		var rs stored
		if json.Unmarshal([]byte(r.Raw), &rs) == nil && len(rs.Media) > 0 {
			p.b.media.wait(ctx, rs.MsgID)
			p.b.media.drop(rs.MsgID, len(rs.Media))
		}
	}
}
