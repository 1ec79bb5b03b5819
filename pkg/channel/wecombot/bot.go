// Package wecombot is the WeCom AI Bot channel over the long connection
// the box dials itself (pkg/wecom/aibot): no public address, certificate or
// open port. A person is the same user here as on the app channel
// ("wecom:zhangsan": one memory, one pairing decision); group chats have a
// session per chat. Every message is stored in the inbox (deduplicated by
// msgid) before it is processed, so a restart mid-turn answers it after
// (by push when the original reply stream is gone). Replies stream: each
// frame carries the text so far, a few times a second, and the stream is
// finished before WeCom's 6-minute limit (the rest of a longer turn goes
// out by push).
package wecombot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/channel"
	"agent/pkg/channel/gate"
	"agent/pkg/channel/mailbox"
	"agent/pkg/channel/upload"
	"agent/pkg/channelhost"
	"agent/pkg/clip"
	"agent/pkg/clock"
	"agent/pkg/egress"
	"agent/pkg/fleet"
	"agent/pkg/wecom/aibot"
)

// Name is the channel's name in the Set. Its users are "wecom:USERID", as
// on the app channel.
const Name = "wecom_bot"

// scope is the channel part of its users' scopes and sessions.
const scope = "wecom"

var (
	_ channel.Channel = (*Bot)(nil)
	_ channel.Aliased = (*Bot)(nil)
	_ channel.Claimer = (*Bot)(nil)
)

// Bot is the running channel.
type Bot struct {
	host    channelhost.Env
	client  *aibot.Client // nil on a box of a fleet that is not its ingress
	inbox   *mailbox.Inbox
	outbox  *mailbox.Outbox // pushes: late replies, the message tool, jobs
	proc    *processor      // nil while the pipeline is unavailable
	media   *fetcher        // downloads pictures, files and videos (media.go)
	keeper  upload.Keeper   // saves them in their sender's uploads
	logger  *slog.Logger
	clock   clock.Clock
	welcome string

	// streams observes how long reply streams stayed open, by how they
	// ended (finished, limit, broken); nil without metrics.
	streams map[string]func(float64)

	// In a fleet (fleet.go): the link, the ingress's forward queue and
	// the req_ids its connection received.
	fleet   *fleet.Fleet
	fwd     *mailbox.Inbox
	fwdWake chan struct{}
	live    liveReqs

	mu     sync.Mutex
	runCtx context.Context // Run's: downloads outlive a connection
}

// Ends of a reply stream (the stream-duration metric's label).
const (
	endFinished = "finished" // the reply went out in the stream
	endLimit    = "limit"    // closed before WeCom's limit; the rest by push
	endBroken   = "broken"   // a frame failed; the reply by push
)

// streamBuckets are the stream-duration histogram's bounds, in seconds.
var streamBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 240, 330, 360}

// Build makes the channel when wecom_bot.enabled (channelhost.Build).
func Build(_ context.Context, h channelhost.Env) (channel.Channel, error) {
	cfg := h.Config()
	if h.Fleet != nil && !h.Fleet.Ingress() {
		// WeCom keeps one long connection per bot: the ingress box's.
		// This box answers the bot's messages of its users (whatever
		// its own [wecom_bot] says: the fleet decides where a user
		// lives), its replies going back through the ingress.
		return New(h, Options{})
	}
	if !cfg.WeComBot.Enabled {
		return nil, nil
	}
	return New(h, Options{})
}

// Options are the timing knobs tests shorten.
type Options struct {
	Heartbeat  time.Duration
	MinBackoff time.Duration
	// StreamEvery is how often a stream frame may go out (400 ms).
	StreamEvery time.Duration
	// StreamLimit is how long a reply stream may stay open (WeCom allows
	// 6 minutes from the first frame; 5 min 30 s leaves room).
	StreamLimit time.Duration
}

// New builds the channel on h's [wecom_bot].
func New(h channelhost.Env, o Options) (*Bot, error) {
	cfg := h.Config().WeComBot
	logger := h.Logger.With("component", Name)
	clk := h.TimerClock()
	b := &Bot{host: h, logger: logger, clock: clk, welcome: cfg.Welcome}
	b.inbox = mailbox.NewInbox(h.DB, Name, clk)
	b.media = newFetcher(filepath.Join(h.Config().Agent.StateDir, Name, "media"), cfg.URL, h.Egress, clk, logger)
	if h.Files != nil {
		b.keeper = upload.Keeper{Store: h.Files, Vision: func() bool { return h.Config().LLM.Vision }, Logger: logger}
	}
	b.fleet = h.Fleet
	if b.fleet == nil || b.fleet.Ingress() {
		var dialer *websocket.Dialer
		if h.Egress != nil { // the ledger checks WeCom's host (also through a proxy) and counts
			dialer = &websocket.Dialer{HandshakeTimeout: 20 * time.Second, NetDialContext: h.Egress.Dialer(egress.WeComBot), Proxy: h.Egress.ProxyFor(egress.WeComBot)}
		}
		b.client = aibot.New(aibot.Config{URL: cfg.URL, BotID: cfg.BotID, Secret: cfg.Secret, Dialer: dialer,
			Handle: b.handle, Heartbeat: o.Heartbeat, MinBackoff: o.MinBackoff, Clock: clk, Logger: logger})
	}
	if b.fleet != nil {
		b.fleet.Handle(Name, b.fromFleet)
		if b.client != nil {
			b.fwd = mailbox.NewInbox(h.DB, forwardChannel, clk)
			b.fwdWake = make(chan struct{}, 1)
			b.live.ttl = liveTTL(o)
		}
		logger.Info("wecom_bot in a fleet", "box", b.fleet.Box(), "holds_connection", b.client != nil)
	}
	b.outbox = mailbox.NewOutbox(h.DB, mailbox.OutboxConfig{Channel: Name, Send: b.push, Permanent: permanent,
		Redact: h.Scrub, Clock: clk, Logger: logger})
	if err := h.Turns.Err(); err == nil {
		b.proc = newProcessor(b, h.Turns, o)
	} else {
		logger.Error("wecom_bot messages are stored but not answered: the conversation pipeline is unavailable", "err", err)
	}
	if b.client == nil {
		return b, nil // the connection's checks and figures are the ingress's
	}
	if h.Health != nil {
		h.Health.Register("channel_"+Name+"_connection", b.healthCheck)
	}
	if h.Metrics != nil {
		h.Metrics.GaugeFunc("agent_wecom_bot_frames_in", "Frames received on the WeCom AI Bot connection since start.", nil,
			func() float64 { return float64(b.client.Status().FramesIn) })
		h.Metrics.GaugeFunc("agent_wecom_bot_frames_out", "Frames sent on the WeCom AI Bot connection since start.", nil,
			func() float64 { return float64(b.client.Status().FramesOut) })
		h.Metrics.GaugeFunc("agent_wecom_bot_reconnects", "Reconnections of the WeCom AI Bot connection since start.", nil,
			func() float64 { return float64(b.client.Status().Reconnects) })
		b.streams = map[string]func(float64){}
		for _, end := range []string{endFinished, endLimit, endBroken} {
			b.streams[end] = h.Metrics.Histogram("agent_wecom_bot_stream_seconds", "How long WeCom AI Bot reply streams stayed open (first frame to the last), by how they ended.",
				streamBuckets, map[string]string{"end": end})
		}
		h.Metrics.GaugeFunc("agent_wecom_bot_connected", "1 while the WeCom AI Bot connection is subscribed.", nil,
			func() float64 {
				if b.client.Status().State == aibot.StateReady {
					return 1
				}
				return 0
			})
	}
	return b, nil
}

// Name is "wecom_bot".
func (b *Bot) Name() string { return Name }

// Aliases: with no app channel, "wecom" users are reached through the bot
// (the message tool, scheduled jobs, notices).
func (b *Bot) Aliases() []string { return []string{scope} }

// Claims the "wecom" recipients only the bot reaches: group chats (the app
// channel messages users, never groups), even when the app channel is on.
func (b *Bot) Claims(ctx context.Context, name, to string) bool {
	if name != scope {
		return false
	}
	to = strings.TrimPrefix(to, scope+":")
	return strings.HasPrefix(to, "group:"+scope+":") || (to != "" && !strings.HasPrefix(to, "group:") && b.isGroup(ctx, to))
}

// Routes: none; the bot dials out.
func (b *Bot) Routes() []channel.Route { return nil }

// Status is the connection's state (in a fleet, on a box that is not
// its ingress, the state "fleet": the ingress holds the connection).
func (b *Bot) Status() aibot.Status {
	if b.client == nil {
		return aibot.Status{State: StateFleet}
	}
	return b.client.Status()
}

// StateFleet is the Status of the bot on a box of a fleet that is not
// its ingress.
const StateFleet = "fleet"

func (b *Bot) healthCheck(context.Context) error {
	s := b.client.Status()
	if s.State == aibot.StateReady {
		return nil
	}
	if s.LastError != "" {
		return fmt.Errorf("%w: the WeCom AI Bot connection is %s since %s: %s", channel.ErrDegraded, s.State, s.Since.Format(time.RFC3339), s.LastError)
	}
	return fmt.Errorf("%w: the WeCom AI Bot connection is %s since %s", channel.ErrDegraded, s.State, s.Since.Format(time.RFC3339))
}

// Run keeps the connection, the processor and the push queue going until
// ctx ends.
func (b *Bot) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.media.sweep()
	b.mu.Lock()
	b.runCtx = ctx
	b.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = b.outbox.Run(ctx) }()
	if b.client != nil {
		wg.Add(1)
		go func() { defer wg.Done(); _ = b.client.Run(ctx) }()
	}
	if b.fwd != nil {
		if err := b.serve(ctx); err != nil {
			b.logger.Error("wecom_bot: the fleet's replies cannot be sent", "err", err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); b.runForward(ctx) }()
	}
	if b.proc != nil {
		wg.Add(1)
		go func() { defer wg.Done(); b.proc.run(ctx) }()
	}
	<-ctx.Done()
	wg.Wait()
	b.media.close()
	return nil
}

// handle stores a callback (the connection's reader calls it): messages go
// to the inbox, deduplicated by msgid; enter_chat is answered with the
// welcome text.
func (b *Bot) handle(ctx context.Context, f aibot.Frame) {
	m, err := aibot.ParseMessage(f.Body)
	if err != nil {
		b.logger.Warn("wecom_bot: callback ignored", "err", err)
		return
	}
	if f.Cmd == aibot.CmdEventCallback {
		if m.Event != nil && m.Event.EventType == aibot.EventEnterChat && b.welcome != "" {
			go func() { // answered within seconds, off the reader
				if err := b.client.Reply(context.WithoutCancel(ctx), f.Headers.ReqID, aibot.CmdRespondWelcome,
					map[string]any{"msgtype": "text", "text": map[string]string{"content": b.welcome}}); err != nil {
					b.logger.Warn("wecom_bot: welcome not sent", "err", err)
				}
			}()
		}
		return
	}
	if m.MsgID == "" || m.From.UserID == "" {
		b.logger.Warn("wecom_bot: message without msgid or sender ignored")
		return
	}
	chat := ""
	switch {
	case m.ChatType == "group" && m.ChatID != "":
		chat = m.ChatID
	case m.ChatType == "single" || (m.ChatType == "" && m.ChatID == ""):
	default:
		// Neither a direct message nor a group with its id: answering it
		// in the sender's private session could show their history to
		// a group.
		b.logger.Warn("wecom_bot: message of an unknown chat kind ignored", "msgid", m.MsgID, "chattype", m.ChatType)
		return
	}
	// Only what answering needs is kept: the whole frame (up to 4 MiB)
	// re-read with every pending row would let one user fill memory.
	media, dropped := refs(m)
	text := content(m, chat != "")
	if dropped > 0 {
		text = strings.TrimSpace(text + fmt.Sprintf("\n[%d more attachment(s) not read: one message may carry %d]", dropped, maxResources))
	}
	rec := mailbox.Received{DedupKey: m.MsgID, Sender: m.From.UserID, ChatID: chat, Kind: m.MsgType, Content: clip.Bytes(text, maxContent)}
	if b.fleet != nil {
		b.forward(ctx, rec, f.Headers.ReqID, media) // answered on the sender's home box
		return
	}
	raw, _ := json.Marshal(stored{ReqID: f.Headers.ReqID, MsgID: m.MsgID, Media: media, Conn: b.conn()})
	rec.Raw = string(raw)
	if err := b.take(ctx, rec, media); err != nil {
		b.logger.Error("wecom_bot: message not stored", "msgid", m.MsgID, "err", err)
	}
}

// take stores a message in the inbox (deduplicated by msgid), starts its
// downloads and wakes the processor.
func (b *Bot) take(ctx context.Context, rec mailbox.Received, media []mediaRef) error {
	fresh, err := b.inbox.Put(ctx, rec)
	if err != nil {
		return err
	}
	if !fresh {
		b.logger.Info("wecom_bot: repeated message ignored", "msgid", rec.DedupKey)
		return nil
	}
	if len(media) > 0 && b.fetchFor(ctx, rec.Sender, rec.ChatID) {
		b.mu.Lock()
		runCtx := b.runCtx
		b.mu.Unlock()
		if runCtx == nil {
			runCtx = ctx
		}
		b.media.start(runCtx, rec.DedupKey, media)
	}
	if b.proc != nil {
		b.proc.wake()
	}
	return nil
}

// fetchFor reports whether a message's media are downloaded at once: only
// when its turn will run (the pipeline is up and the DM policy admits the
// sender now), so a stranger's files cannot take the download slots or
// the spool from admitted users. A message not fetched now is fetched at
// its turn, if the policy admits it by then.
func (b *Bot) fetchFor(ctx context.Context, sender, chat string) bool {
	if b.proc == nil {
		return false
	}
	if b.host.DB == nil || b.host.Gate.Pairings == nil {
		return true
	}
	req := gate.Request{Principals: []string{scope + ":" + sender}}
	if chat != "" {
		req.Group = "group:" + scope + ":" + chat
	}
	ok, err := b.host.Gate.Admits(ctx, b.host.DB, req)
	if err != nil {
		b.logger.Warn("wecom_bot: DM policy not read; media fetched at the turn", "err", err)
	}
	return ok
}

// stored is an inbox row's raw part: the callback's req_id (a reply
// stream answers under it) and msgid.
type stored struct {
	ReqID string     `json:"req_id"`
	MsgID string     `json:"msgid"`
	Media []mediaRef `json:"media,omitempty"` // pictures, files, videos to fetch
	// Conn is the connection the message came on (its start, Unix ns; 0
	// in rows stored before it was kept): its req_id is that
	// connection's.
	Conn int64 `json:"conn,omitempty"`
	// Ingress is the box that received the message, in a fleet (its
	// reply goes back through it), and At when.
	Ingress string    `json:"ingress,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

// maxContent bounds the text kept of one message (WeCom's own messages
// are far shorter).
const maxContent = 16 << 10

// content is what a message says in text: its text, WeCom's transcript of
// a voice message, the text parts of a mixed one (its pictures, and
// files and videos, are fetched: refs). In a group, the @mention of the
// bot that made WeCom deliver the message is taken off its start.
func content(m aibot.Message, group bool) string {
	var parts []string
	switch m.MsgType {
	case "text":
		if m.Text != nil {
			parts = append(parts, m.Text.Content)
		}
	case "voice":
		parts = append(parts, m.VoiceText())
	case "mixed":
		if m.Mixed != nil {
			for _, it := range m.Mixed.Items {
				if it.Text != nil {
					parts = append(parts, it.Text.Content)
				}
			}
		}
	}
	text := strings.TrimSpace(strings.Join(parts, "\n"))
	if group {
		text = stripMention(text)
	}
	return text
}

// stripMention takes a leading "@name" (the bot's mention) off a group
// message: WeCom delivers a group message to the bot only when it is
// mentioned, and the mention is not part of the question.
func stripMention(text string) string {
	if !strings.HasPrefix(text, "@") {
		return text
	}
	i := strings.IndexAny(text, " \u2005\u00a0\n\t")
	if i < 0 {
		return text // only a mention: kept, so the turn is not empty
	}
	if rest := strings.TrimSpace(strings.TrimLeft(text[i:], " \u2005\u00a0")); rest != "" {
		return rest
	}
	return text
}

// Send queues text for a user ("zhangsan") or a group chat
// ("group:wecom:CHAT", or the bare chat id a turn in that chat addresses
// as its own conversation) by push.
func (b *Bot) Send(ctx context.Context, to, text string) error {
	to = strings.TrimPrefix(to, scope+":")
	if to == "" || strings.TrimSpace(text) == "" {
		return errors.New("message: a recipient and a text are required")
	}
	if !strings.HasPrefix(to, "group:") && b.isGroup(ctx, to) {
		to = "group:" + scope + ":" + to
	}
	return b.outbox.Enqueue(ctx, to, mailbox.Item{Kind: "markdown", Content: text})
}

// isGroup reports whether id is a group chat the bot has had messages
// from (chat ids and user ids are different namespaces in WeCom; a chat
// the bot never saw cannot be told from a user).
func (b *Bot) isGroup(ctx context.Context, id string) bool {
	var one int
	err := b.host.DB.QueryRowContext(ctx, `SELECT 1 FROM inbox WHERE channel = ? AND chat_id = ? LIMIT 1`, Name, id).Scan(&one)
	return err == nil
}

// push sends one outbox row with aibot_send_msg (in a fleet, through the
// box that holds the connection).
func (b *Bot) push(ctx context.Context, m mailbox.Message) error {
	chatType, chat := 1, m.To
	if g, ok := strings.CutPrefix(m.To, "group:"+scope+":"); ok {
		chatType, chat = 2, g
	}
	if b.client == nil {
		data, _ := json.Marshal(pushCall{Chat: chat, ChatType: chatType, Content: m.Content})
		_, err := b.fleet.Call(ctx, "", svcPush, data)
		return err
	}
	return b.client.Push(ctx, aibot.MarkdownPush(chat, chatType, m.Content))
}

// permanent: WeCom refused the push itself (not a lost connection), or
// the box holding the connection said so.
func permanent(err error) bool {
	var e *aibot.Error
	var ce *fleet.CallError
	return errors.As(err, &e) || (errors.As(err, &ce) && ce.Permanent)
}
