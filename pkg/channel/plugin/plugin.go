// Package plugin runs channels as processes of their own: a
// [channels.NAME] section names an executable that speaks agent.channel.v1,
// newline-delimited JSON over its stdin and stdout, and its users become
// "NAME:sender" like any channel's. A user adds a platform without
// recompiling the daemon.
//
// The daemon writes a hello first, then acks (a message is acked once it
// is durable in the inbox) and sends (a reply, or what the assistant sends
// unprompted); the plugin writes messages and answers sends with sent or
// error. Messages go through the same path as a built-in channel's: the
// inbox (deduplicated by the plugin's message id), the DM gate, one turn
// at a time per conversation, replies into the outbox (durable, retried
// with the same id until the plugin says sent, also across its restarts).
//
// A plugin that exits, writes garbage, writes a line over 1 MiB, does not
// take a line within 30 s or does not answer a send within 30 s has its
// connection reset: Run returns the reason and the channel Set restarts it
// with backoff (shown on /healthz as channel_NAME). The daemon never
// reads faster than it stores: the next line is read once the message
// before it is durable, and reading waits while the channel has too many
// messages not yet answered (the plugin's writes then block; nothing is
// lost, acks come later).
//
// host.go is the one file that knows channel.Host and the conversation
// pipeline; everything else uses Deps.
package plugin

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"agent/pkg/channel"
	"agent/pkg/channel/gate"
	"agent/pkg/channel/mailbox"
	"agent/pkg/clip"
	"agent/pkg/clock"
	"agent/pkg/textsplit"
)

// Defaults of Options.
const (
	// DefaultAnswerTimeout is how long a send waits for its sent or error
	// (and a line for the plugin to take it) before the connection is
	// reset and the send retried.
	DefaultAnswerTimeout = 30 * time.Second
	// DefaultMaxPending is how many of the channel's messages may wait for
	// their turn before reading from the plugin waits.
	DefaultMaxPending = 100
	// DefaultStopGrace is how long a stopping plugin has to exit after its
	// stdin is closed before it is killed.
	DefaultStopGrace = 2 * time.Second
)

// maxSendText bounds the text of one send line: a longer reply goes out as
// several sends (JSON escaping keeps the line under MaxLine).
const maxSendText = 128 << 10

// Request is a turn a stored message (or several from one sender in one
// chat) asks for, whatever the pipeline that runs it.
type Request struct {
	Sender string
	Chat   string // the chat the answer goes to (a direct chat's too)
	Group  bool
	Thread string // a group's thread ("" none)
	Text   string
	// MsgID identifies the stored message(s) the turn answers ("inbox:ID"):
	// a message processed again after a crash is held only once.
	MsgID string
}

// Asker runs a turn and returns at once; done closes after the turn and
// every reply (each given to reply, from the pipeline's worker).
type Asker func(ctx context.Context, r Request, reply func(ctx context.Context, text string) error) (done <-chan struct{}, err error)

// Deps is what a plugin channel takes from its host (host.go fills it
// from channel.Host).
type Deps struct {
	Name    string   // the section's name: the channel part of "NAME:sender"
	Command string   // absolute path of the executable
	Args    []string // its arguments
	// Env is the plugin's environment besides PATH (which is LookupEnv's
	// unless Env sets it).
	Env map[string]string
	// Dir is the plugin's working directory (created 0700 at start).
	Dir    string
	DB     *sql.DB
	Logger *slog.Logger
	Clock  clock.Clock
	// Gate is the DM policy every message passes.
	Gate gate.Gate
	// Ask runs turns; nil while the pipeline is unavailable (messages are
	// kept and answered once it is back, after a restart).
	Ask Asker
	// AskErr is why Ask is nil.
	AskErr error
	// Scrub redacts secrets from the send errors the outbox stores.
	Scrub func(string) string
	// LookupEnv gives PATH; nil: os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Options are what tests change.
type Options struct {
	Start         Starter // nil: os/exec (the command in its own process group)
	AnswerTimeout time.Duration
	MaxPending    int
	StopGrace     time.Duration
}

// Channel is one [channels.NAME] plugin.
type Channel struct {
	d      Deps
	o      Options
	logger *slog.Logger
	clock  clock.Clock
	inbox  *mailbox.Inbox
	outbox *mailbox.Outbox
	proc   *processor // nil without a pipeline
	// space is signalled when messages leave the pending state (reading
	// may go on).
	space chan struct{}

	mu   sync.Mutex
	conn *conn // the live connection; nil between runs
	// unanswered counts, per send id, the connections that ended with
	// the send in flight (reset when it is answered).
	unanswered map[string]int
	// acking are the ids of messages stored but not yet acked: their
	// turns wait, so the ack of a message comes before any send that
	// answers it.
	acking map[string]bool

	pmu      sync.Mutex
	procDone chan struct{} // closed when the processor's run ends; nil: not running
}

var _ channel.Channel = (*Channel)(nil)

// MailboxPrefix is what the channel's rows in the inbox and outbox tables
// are keyed under ("plugin.NAME"): never a built-in channel's name.
const MailboxPrefix = "plugin."

// New makes the channel; nothing runs before Run.
func New(d Deps, o Options) (*Channel, error) {
	if d.Name == "" || d.Command == "" || d.DB == nil {
		return nil, errors.New("plugin: a name, a command and a database are required")
	}
	if o.Start == nil {
		o.Start = execStart
	}
	if o.AnswerTimeout <= 0 {
		o.AnswerTimeout = DefaultAnswerTimeout
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.LookupEnv == nil {
		d.LookupEnv = os.LookupEnv
	}
	c := &Channel{d: d, o: o, logger: d.Logger.With("component", "channel", "channel", d.Name), clock: clock.Or(d.Clock),
		space: make(chan struct{}, 1), acking: map[string]bool{}, unanswered: map[string]int{}}
	key := MailboxPrefix + d.Name
	c.inbox = mailbox.NewInbox(d.DB, key, c.clock)
	c.outbox = mailbox.NewOutbox(d.DB, mailbox.OutboxConfig{Channel: key, Send: c.deliver, Permanent: permanent,
		Redact: d.Scrub, Clock: c.clock, Logger: c.logger})
	if d.Ask != nil {
		c.proc = newProcessor(c)
	} else {
		c.logger.Error("messages of the channel are kept but not answered: the conversation pipeline is unavailable", "err", d.AskErr)
	}
	return c, nil
}

// Name is the section's name.
func (c *Channel) Name() string { return c.d.Name }

// Routes: none; the plugin is a process.
func (c *Channel) Routes() []channel.Route { return nil }

// Run starts the plugin and serves it until it exits, its connection is
// reset (the error says why: the Set restarts Run with backoff) or ctx
// ends (nil). The processor that answers stored messages runs on across
// plugin restarts, until ctx ends.
func (c *Channel) Run(ctx context.Context) error {
	c.startProcessor(ctx)
	if err := os.MkdirAll(c.d.Dir, 0o700); err != nil {
		return fmt.Errorf("%s: working directory: %w", c.d.Name, err)
	}
	p, err := c.o.Start(ctx, Spec{Command: c.d.Command, Args: c.d.Args, Env: c.env(), Dir: c.d.Dir})
	if err != nil {
		return fmt.Errorf("%s: start %s: %w", c.d.Name, c.d.Command, err)
	}
	cn := newConn(ctx, c, p)
	c.logger.Info("channel plugin started", "command", c.d.Command)
	if err := cn.write(encode(Hello{Type: TypeHello, Protocol: Protocol, Channel: c.d.Name})); err == nil {
		c.setConn(cn)
		octx, ocancel := context.WithCancel(ctx)
		outDone := make(chan struct{})
		go func() { defer close(outDone); _ = c.outbox.Run(octx) }()
		select {
		case <-ctx.Done():
		case <-cn.dead:
		}
		c.setConn(nil)
		ocancel()
		<-outDone
	}
	stopping := ctx.Err() != nil
	cn.stop(stopping)
	if stopping {
		c.waitProcessor()
		return nil
	}
	return fmt.Errorf("%s: %w", c.d.Name, cn.err()) // the Set logs it
}

// env is the plugin's environment: PATH (the daemon's, unless the section
// sets it) and the section's env, nothing else.
func (c *Channel) env() []string {
	env := make([]string, 0, len(c.d.Env)+1)
	if _, set := c.d.Env["PATH"]; !set {
		path, ok := c.d.LookupEnv("PATH")
		if !ok || path == "" {
			path = "/usr/local/bin:/usr/bin:/bin"
		}
		env = append(env, "PATH="+path)
	}
	for _, k := range slices.Sorted(maps.Keys(c.d.Env)) {
		env = append(env, k+"="+c.d.Env[k])
	}
	return env
}

func (c *Channel) setConn(cn *conn) {
	c.mu.Lock()
	c.conn = cn
	c.mu.Unlock()
}

// current is the live connection (nil: none).
func (c *Channel) current() *conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}

// setAcking marks a message id stored and not yet acked (on), or acked.
func (c *Channel) setAcking(id string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.acking[id] = true
	} else {
		delete(c.acking, id)
	}
}

// isAcking reports whether id is stored but not yet acked.
func (c *Channel) isAcking(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acking[id]
}

// startProcessor runs the processor unless it runs already (it outlives
// one Run: a plugin restart does not stop the turns in flight).
func (c *Channel) startProcessor(ctx context.Context) {
	if c.proc == nil {
		return
	}
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.procDone != nil {
		return
	}
	done := make(chan struct{})
	c.procDone = done
	go func() {
		defer func() {
			c.pmu.Lock()
			c.procDone = nil
			c.pmu.Unlock()
			close(done)
		}()
		c.proc.run(ctx)
	}()
}

// waitProcessor waits for a stopping processor.
func (c *Channel) waitProcessor() {
	c.pmu.Lock()
	done := c.procDone
	c.pmu.Unlock()
	if done != nil {
		<-done
	}
}

// signalSpace tells a reader waiting for room in the inbox to look again.
func (c *Channel) signalSpace() {
	select {
	case c.space <- struct{}{}:
	default:
	}
}

// stored is an inbox row's raw part: what answering needs besides the
// sender and the text.
type stored struct {
	ID        string `json:"id"`
	Chat      string `json:"chat"`
	Display   string `json:"display,omitempty"`
	Group     bool   `json:"group,omitempty"`
	Mentioned bool   `json:"mentioned,omitempty"`
	Thread    string `json:"thread,omitempty"`
}

// Kinds of inbox rows.
const (
	kindDirect = "direct"
	kindGroup  = "group"
)

// receive stores a message the plugin wrote and acks it. It returns once
// the ack is written: the reader takes the next line only then. An error
// resets the connection (the plugin sends again what was not acked).
func (c *Channel) receive(ctx context.Context, cn *conn, m Message) error {
	if m.ID == "" || len(m.ID) > maxID {
		cn.note("message without a usable id ignored (not acked)", "id", clip.String(m.ID, 64))
		return nil
	}
	if err := c.room(ctx, cn); err != nil {
		return err
	}
	chat := m.Chat
	if chat == "" && !m.Group {
		chat = m.Sender // a platform without direct-chat ids: the sender is the chat
	}
	state, why := mailbox.InPending, m.Check()
	switch {
	case why != "":
		state = mailbox.InIgnored
		cn.note("invalid message acked and ignored", "id", m.ID, "why", why)
	case strings.TrimSpace(m.Text) == "":
		state = mailbox.InIgnored // nothing to answer
	case m.Group && !m.Mentioned:
		state = mailbox.InIgnored // a group's talk not addressed to the assistant
	}
	kind := kindDirect
	if m.Group {
		kind = kindGroup
	}
	raw, _ := json.Marshal(stored{ID: m.ID, Chat: clip.Bytes(chat, maxID), Display: clip.Bytes(m.Display, maxDisplay),
		Group: m.Group, Mentioned: m.Mentioned, Thread: clip.Bytes(m.Thread, maxID)})
	c.setAcking(m.ID, true)
	defer c.setAcking(m.ID, false)
	fresh, err := c.inbox.Put(ctx, mailbox.Received{DedupKey: m.ID, Sender: clip.Bytes(m.Sender, maxID), ChatID: clip.Bytes(chat, maxID),
		Kind: kind, Content: clip.Bytes(m.Text, maxText), Raw: string(raw), State: state})
	if err != nil {
		return fmt.Errorf("message %s not stored: %w", clip.String(m.ID, 64), err)
	}
	if !fresh {
		c.logger.Info("repeated message acked, not processed again", "id", m.ID)
	}
	if err := cn.write(encode(Ack{Type: TypeAck, ID: m.ID})); err != nil {
		return err
	}
	c.setAcking(m.ID, false)
	if c.proc != nil {
		c.proc.wake()
	}
	return nil
}

// room waits while the channel has MaxPending messages or more not yet
// answered: the plugin's next line stays unread (its writes block), and
// the time does not count against the sends waiting for an answer.
func (c *Channel) room(ctx context.Context, cn *conn) error {
	waited := false
	defer func() {
		if waited {
			cn.pause(false)
		}
	}()
	for {
		var n int
		err := c.d.DB.QueryRowContext(ctx, `SELECT count(*) FROM inbox WHERE channel = ? AND state = 0`, c.inbox.Channel()).Scan(&n)
		if err != nil {
			return fmt.Errorf("inbox: %w", err)
		}
		if n < c.o.MaxPending {
			return nil
		}
		if !waited {
			waited = true
			cn.pause(true)
			c.logger.Info("inbox full: reading from the plugin waits for turns to finish", "pending", n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.space:
		case <-c.clock.After(5 * time.Second):
		}
	}
}

// Send queues text for a chat ("CHAT"), or for a user ("SENDER": their
// direct chat, the last one they wrote in), as sends with no reply_to.
func (c *Channel) Send(ctx context.Context, to, text string) error {
	to = strings.TrimPrefix(to, c.d.Name+":")
	to = strings.TrimPrefix(to, "group:"+c.d.Name+":")
	if to == "" || strings.TrimSpace(text) == "" {
		return errors.New("message: a recipient and a text are required")
	}
	return c.outbox.Enqueue(ctx, c.chatOf(ctx, to), items(text, "")...)
}

// chatOf is where a message to `to` goes: to itself when it is a chat the
// plugin has reported, else the direct chat a sender called `to` last
// wrote in, else to as given (the plugin decides).
func (c *Channel) chatOf(ctx context.Context, to string) string {
	var one int
	if c.d.DB.QueryRowContext(ctx, `SELECT 1 FROM inbox WHERE channel = ? AND chat_id = ? LIMIT 1`, c.inbox.Channel(), to).Scan(&one) == nil {
		return to
	}
	var chat string
	if c.d.DB.QueryRowContext(ctx, `SELECT chat_id FROM inbox WHERE channel = ? AND sender = ? AND msg_type = ? ORDER BY id DESC LIMIT 1`,
		c.inbox.Channel(), to, kindDirect).Scan(&chat) == nil && chat != "" {
		return chat
	}
	return to
}

// outItem is an outbox row's content: the send's id (fixed when queued,
// so every attempt, after a restart too, carries it), its text and the
// message it answers.
type outItem struct {
	ID      string `json:"id"`
	Text    string `json:"text"`
	ReplyTo string `json:"reply_to,omitempty"`
}

// items are the outbox rows of one reply: a text over maxSendText is cut
// into several sends.
func items(text, replyTo string) []mailbox.Item {
	var out []mailbox.Item
	for _, part := range textsplit.Split(text, maxSendText) {
		b, _ := json.Marshal(outItem{ID: newSendID(), Text: part, ReplyTo: replyTo})
		out = append(out, mailbox.Item{Kind: "text", Content: string(b)})
	}
	return out
}

// newSendID is a send's id: random, so a plugin that remembers what it
// delivered never takes a new send for an old one (a fresh database).
func newSendID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "s" + hex.EncodeToString(b[:])
}

// errCorrupt is a row the outbox cannot send (not JSON): it fails at once.
var errCorrupt = errors.New("outbox row is not a send")

// maxUnanswered is how many connections may end with one send in flight
// (the plugin exited, or stopped answering) before the send is given up:
// a plugin that dies on a send must not get it forever, holding back the
// chat's later messages.
const maxUnanswered = 5

// errGivenUp is a send given up after maxUnanswered connections ended
// with it in flight: it fails at once.
var errGivenUp = errors.New("given up")

// errNotConnected: the plugin is not running; the send is retried.
var errNotConnected = errors.New("the channel plugin is not running")

func permanent(err error) bool { return errors.Is(err, errCorrupt) || errors.Is(err, errGivenUp) }

// deliver sends one outbox row to the plugin and waits for its answer.
// A send the connection ended under (the plugin exited, was reset, did
// not answer) is not a failed attempt: it goes out again, at once, to the
// next run of the plugin; after maxUnanswered such runs it is given up.
func (c *Channel) deliver(ctx context.Context, m mailbox.Message) error {
	var it outItem
	if err := json.Unmarshal([]byte(m.Content), &it); err != nil || it.ID == "" {
		return fmt.Errorf("%w: row %d", errCorrupt, m.ID)
	}
	c.mu.Lock()
	n := c.unanswered[it.ID]
	if n >= maxUnanswered {
		delete(c.unanswered, it.ID)
	}
	c.mu.Unlock()
	if n >= maxUnanswered {
		return fmt.Errorf("send %s %w: %d runs of the plugin ended with it unanswered", it.ID, errGivenUp, n)
	}
	cn := c.current()
	if cn == nil {
		return errNotConnected
	}
	err := cn.send(ctx, Send{Type: TypeSend, ID: it.ID, Chat: m.To, Text: it.Text, ReplyTo: it.ReplyTo})
	c.mu.Lock()
	if errors.Is(err, ErrUnanswered) {
		c.unanswered[it.ID]++
	} else {
		delete(c.unanswered, it.ID)
	}
	c.mu.Unlock()
	if errors.Is(err, ErrUnanswered) {
		// The connection is gone and Run stops the outbox: waiting for
		// that makes this no attempt (the next run sends it at once).
		<-ctx.Done()
	}
	return err
}
