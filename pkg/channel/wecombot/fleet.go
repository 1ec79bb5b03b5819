package wecombot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"agent/pkg/channel/mailbox"
	"agent/pkg/clip"
	"agent/pkg/fleet"
	"agent/pkg/wecom/aibot"
)

// The AI Bot in a fleet (pkg/fleet). WeCom keeps one live connection per
// bot, and the ingress box holds it. A message is answered on its sender's
// home box (where their memory is), as the WeCom app's are:
//
//   - The ingress stores each message in its forward queue (the inbox
//     "wecom_bot.fleet", deduplicated by msgid) and publishes it, in order,
//     to the fleet's stream on the WeCom conversation's subject (the
//     user's home and order are the app's: one user, one memory). A
//     message is never lost while NATS is down: it waits in the queue.
//   - The home box takes it into its own inbox (fromFleet) and runs the
//     turn. Its reply stream and its pushes go back to the ingress as
//     fleet calls (wecom_bot_reply to the ingress that received the
//     message, wecom_bot_push to whichever box holds the connection),
//     and the ingress sends them on the connection.
//   - The ingress answers a reply call only for a req_id it received on
//     its current connection (a reply on a later connection is refused,
//     and the home box sends the answer by push, as a single box does
//     after a reconnect).

// Service names of the ingress's calls.
const (
	svcReply = "wecom_bot_reply"
	svcPush  = "wecom_bot_push"
)

// forwardChannel is the ingress's forward queue (an inbox of its own).
const forwardChannel = Name + ".fleet"

// fleetChannel is the fleet channel of the bot's conversations: the WeCom
// app's (pkg/channel/wecom.Channel), so that a user has one home.
const fleetChannel = scope

// fleetMsg is a bot message on the fleet's stream.
type fleetMsg struct {
	MsgID   string     `json:"msgid"`
	ReqID   string     `json:"req_id"`
	Sender  string     `json:"sender"`
	Chat    string     `json:"chat,omitempty"`
	Kind    string     `json:"kind"`
	Content string     `json:"content"`
	Media   []mediaRef `json:"media,omitempty"`
	Ingress string     `json:"ingress"` // the box whose connection received it
	Conn    int64      `json:"conn"`    // that connection (its start, Unix ns)
	At      time.Time  `json:"at"`      // when it received it
}

// conversation is the message's fleet conversation: its group chat, or
// its sender (as wecom.FleetConversation).
func (m fleetMsg) conversation() string {
	if m.Chat != "" {
		return "group:" + m.Chat
	}
	return m.Sender
}

// replyCall asks the ingress to send one stream frame.
type replyCall struct {
	ReqID   string `json:"req_id"`
	Conn    int64  `json:"conn"`
	ID      string `json:"id"`
	Content string `json:"content"`
	Finish  bool   `json:"finish"`
}

// pushCall asks the box holding the connection to push a message.
type pushCall struct {
	Chat     string `json:"chat"`
	ChatType int    `json:"chat_type"` // 1 a user, 2 a group chat
	Content  string `json:"content"`
}

// errStale: the message came on an earlier connection; its req_id is
// gone (the answer goes by push).
var errStale = errors.New("wecom_bot: the message came on an earlier connection")

// connID is the current connection's identity (0 while there is none).
func connID(s aibot.Status) int64 {
	if s.State != aibot.StateReady {
		return 0
	}
	return s.Since.UnixNano()
}

// conn is the current connection's identity (0: none, or no client).
func (b *Bot) conn() int64 {
	if b.client == nil {
		return 0
	}
	return connID(b.client.Status())
}

// forward stores a callback in the forward queue (the ingress in a fleet).
func (b *Bot) forward(ctx context.Context, rec mailbox.Received, reqID string, media []mediaRef) {
	at := b.clock.Now()
	conn := b.conn()
	m := fleetMsg{MsgID: rec.DedupKey, ReqID: reqID, Sender: rec.Sender, Chat: rec.ChatID, Kind: rec.Kind, Content: rec.Content,
		Media: media, Ingress: b.fleet.Box(), Conn: conn, At: at.UTC()}
	raw, _ := json.Marshal(m)
	rec.Raw = string(raw)
	fresh, err := b.fwd.Put(ctx, rec)
	if err != nil {
		b.logger.Error("wecom_bot: message not stored", "msgid", rec.DedupKey, "err", err)
		return
	}
	if !fresh {
		b.logger.Info("wecom_bot: repeated message ignored", "msgid", rec.DedupKey)
		return
	}
	b.live.add(reqID, conn, at)
	select {
	case b.fwdWake <- struct{}{}:
	default:
	}
}

// runForward publishes the forward queue to the fleet, in order, until
// ctx ends; a message waits (in order) while NATS is down.
func (b *Bot) runForward(ctx context.Context) {
	wait := time.Duration(0)
	for {
		if wait > 0 {
			t := b.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
		err := b.forwardPending(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			wait = min(max(2*wait, time.Second), 30*time.Second)
			b.logger.Warn("wecom_bot: messages wait for the fleet", "err", err, "retry_in", wait)
			continue
		}
		wait = 0
		select {
		case <-ctx.Done():
			return
		case <-b.fwdWake:
		case <-b.clock.After(5 * time.Second):
		}
	}
}

// forwardPending publishes every queued message; it stops at the first
// that cannot be published (the later ones wait behind it).
func (b *Bot) forwardPending(ctx context.Context) error {
	rows, err := b.fwd.Pending(ctx)
	if err != nil {
		return err
	}
	for _, r := range rows {
		var m fleetMsg
		state := mailbox.InDone
		if err := json.Unmarshal([]byte(r.Raw), &m); err != nil {
			b.logger.Error("wecom_bot: unreadable queued message dropped", "row", r.ID, "err", err)
			state = mailbox.InIgnored
		} else {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = b.fleet.PublishVia(pctx, Name, fleetChannel, m.conversation(), m.MsgID, []byte(r.Raw))
			cancel()
			switch {
			case errors.Is(err, fleet.ErrBadName):
				b.logger.Error("wecom_bot: a message the fleet cannot carry dropped", "msgid", m.MsgID, "err", err)
				state = mailbox.InIgnored
			case err != nil:
				return err
			}
		}
		if err := b.fwd.Mark(ctx, b.host.DB, state, b.clock.Now(), r.ID); err != nil {
			return err // published again later: the stream drops the duplicate
		}
	}
	return nil
}

// fromFleet takes a bot message of conversation conv (homed here) from
// the fleet's stream into the inbox (deduplicated by msgid).
func (b *Bot) fromFleet(ctx context.Context, conv string, payload []byte) error {
	var m fleetMsg
	if err := json.Unmarshal(payload, &m); err != nil {
		return fmt.Errorf("%w: %v", fleet.ErrRejected, err)
	}
	switch {
	case m.MsgID == "" || m.Sender == "" || m.ReqID == "":
		return fmt.Errorf("%w: a bot message without msgid, req_id or sender", fleet.ErrRejected)
	case m.conversation() != conv:
		return fmt.Errorf("%w: a bot message of %q on the subject of %q", fleet.ErrRejected, clip.String(m.conversation(), 64), clip.String(conv, 64))
	case !fleet.ValidBox(m.Ingress):
		return fmt.Errorf("%w: a bot message from ingress %q", fleet.ErrRejected, clip.String(m.Ingress, 64))
	case len(m.Media) > maxResources || len(m.MsgID) > 256 || len(m.ReqID) > 256:
		return fmt.Errorf("%w: a bot message out of bounds", fleet.ErrRejected)
	}
	raw, _ := json.Marshal(stored{ReqID: m.ReqID, MsgID: m.MsgID, Media: m.Media, Ingress: m.Ingress, Conn: m.Conn, At: m.At})
	return b.take(ctx, mailbox.Received{DedupKey: m.MsgID, Sender: m.Sender, ChatID: m.Chat, Kind: m.Kind,
		Content: clip.Bytes(m.Content, maxContent), Raw: string(raw)}, m.Media)
}

// local reports whether a message's reply goes on this box's own
// connection: it came on one (not through a fleet), or this box is the
// ingress that received it, or this box has no fleet link (any more: the
// connection's identity then decides).
func (b *Bot) local(sr stored) bool {
	return sr.Ingress == "" || b.fleet == nil || (b.client != nil && sr.Ingress == b.fleet.Box())
}

// respond sends one stream frame of a reply: on the connection when this
// box holds the one the message came on, else through that box.
func (b *Bot) respond(ctx context.Context, sr stored, id, text string, finish bool) error {
	if b.local(sr) {
		if b.client == nil {
			return aibot.ErrNotConnected
		}
		if sr.Conn != 0 && b.conn() != sr.Conn {
			return errStale
		}
		return b.client.Reply(ctx, sr.ReqID, aibot.CmdRespond, aibot.StreamBody(id, text, finish))
	}
	data, _ := json.Marshal(replyCall{ReqID: sr.ReqID, Conn: sr.Conn, ID: id, Content: text, Finish: finish})
	_, err := b.fleet.Call(ctx, sr.Ingress, svcReply, data)
	return err
}

// serve answers the home boxes' calls (the ingress, until ctx ends).
func (b *Bot) serve(ctx context.Context) error {
	if err := b.fleet.Serve(ctx, svcReply, false, b.serveReply); err != nil {
		return err
	}
	return b.fleet.Serve(ctx, svcPush, true, b.servePush)
}

func (b *Bot) serveReply(ctx context.Context, data []byte) ([]byte, error) {
	var c replyCall
	if err := json.Unmarshal(data, &c); err != nil || c.ReqID == "" || c.ID == "" {
		return nil, fmt.Errorf("%w: a reply call without req_id or stream id", fleet.ErrPermanent)
	}
	if len(c.Content) > maxStreamBytes+1024 {
		return nil, fmt.Errorf("%w: a stream frame of %d bytes", fleet.ErrPermanent, len(c.Content))
	}
	// Only a message this box received on its current connection is
	// answered in a stream: its req_id is that connection's.
	if !b.live.has(c.ReqID, c.Conn, b.clock.Now()) || b.conn() != c.Conn {
		return nil, fmt.Errorf("%w: %w", fleet.ErrPermanent, errStale)
	}
	return nil, aibotErr(b.client.Reply(ctx, c.ReqID, aibot.CmdRespond, aibot.StreamBody(c.ID, c.Content, c.Finish)))
}

func (b *Bot) servePush(ctx context.Context, data []byte) ([]byte, error) {
	var c pushCall
	if err := json.Unmarshal(data, &c); err != nil || c.Chat == "" || (c.ChatType != 1 && c.ChatType != 2) || strings.TrimSpace(c.Content) == "" {
		return nil, fmt.Errorf("%w: a push call without a chat or a text", fleet.ErrPermanent)
	}
	return nil, aibotErr(b.client.Push(ctx, aibot.MarkdownPush(c.Chat, c.ChatType, c.Content)))
}

// aibotErr marks WeCom's refusal permanent (a lost connection is not).
func aibotErr(err error) error {
	if permanent(err) {
		return fmt.Errorf("%w: %w", fleet.ErrPermanent, err)
	}
	return err
}

// liveReqs are the req_ids of messages received on the ingress's
// connections, for as long as a reply stream may use them.
type liveReqs struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]liveReq
}

type liveReq struct {
	conn int64
	at   time.Time
}

// liveTTL is how long a received req_id may take replies: a stream may
// start up to half its limit after the message came, and stays open up
// to its limit from its first frame.
func liveTTL(o Options) time.Duration { return 2 * streamLimit(o) }

// maxLive bounds the req_ids kept (a message beyond it is answered by
// push).
const maxLive = 20_000

func (l *liveReqs) add(reqID string, conn int64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]liveReq{}
	}
	if len(l.m) >= maxLive {
		for k, v := range l.m {
			if at.Sub(v.at) > l.ttl {
				delete(l.m, k)
			}
		}
		if len(l.m) >= maxLive {
			return
		}
	}
	l.m[reqID] = liveReq{conn: conn, at: at}
}

func (l *liveReqs) has(reqID string, conn int64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[reqID]
	return ok && v.conn == conn && conn != 0 && now.Sub(v.at) <= l.ttl
}
