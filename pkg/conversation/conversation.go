// Package conversation is the pipeline from a normalised inbound message to
// the replies a user sees: the routing key, the per-key runner, slash
// commands, the agent turn, and a clear reply when a turn fails — never
// silence.
package conversation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"agent/pkg/agent"
	"agent/pkg/backlog"
	"agent/pkg/clip"
	"agent/pkg/clock"
	"agent/pkg/cmdcache"
	"agent/pkg/llm"
	"agent/pkg/memory"
	"agent/pkg/runner"
	"agent/pkg/session"
	"agent/pkg/turn"
)

// Chat types of an inbound message.
const (
	P2P    = "p2p"
	Group  = "group"
	Thread = "thread"
)

// Inbound is one message from any channel.
type Inbound struct {
	Channel  string // admin, wecom, voice, hardware
	Profile  string // tool profile, declared by the channel; "" = Channel
	Fast     bool   // a latency-first turn (voice and hardware devices)
	ChatType string // p2p (default), group, thread
	Sender   string
	Device   string // the device a voice or hardware turn comes from ("" when none)
	// MsgID identifies the stored message(s) the turn answers (the
	// channel's inbox row): a message processed again after a crash is
	// held only once.
	MsgID    string
	ChatID   string
	ThreadID string
	Text     string
	// Images are image parts (llm.ImagePart) given to the model with Text
	// (a channel sets them only when llm.vision is on).
	Images []llm.Part
	// Stream, when set, asks the model for a streamed reply and gets its
	// text fragments as they arrive (voice); the whole reply still goes
	// to Reply.
	Stream func(fragment string)
	// Progress, when set, is told when a tool starts and ends (a channel
	// shows short status lines while the reply is written). It gets the
	// tool's name, never its arguments or result.
	Progress func(ToolProgress)
	// ReplyChannel, ReplyTo and Due say where a held turn's answer goes
	// when it is not the sender on Channel (a scheduled task's
	// recipient), and when the task was due (pkg/backlog).
	ReplyChannel, ReplyTo string
	Due                   time.Time
	// OnHeld, when set, is called when the turn is held instead of
	// answered (a scheduled task then reports itself deferred).
	OnHeld func()

	replay *replay // set when the backlog runs a held turn again
}

// replay is a held turn run again: the session its message is stored in,
// and whether the model service failed again.
type replay struct {
	resume  int64
	stillDn bool
	err     error
	session int64 // where the failed run stored the message
}

// ToolProgress is one tool's step in a turn.
type ToolProgress = turn.Progress

// FromTurn is the pipeline's inbound message for a channel's normalised
// one: a group chat (a thread of one) is keyed by its chat, a direct chat
// by its sender; pictures with their bytes go to the model as image parts;
// the sink's stream, progress and held callbacks are the turn's.
func FromTurn(m turn.Message, out turn.Sink) Inbound {
	in := Inbound{Channel: m.Channel, Profile: m.Profile, Fast: m.Fast, ChatType: P2P, Sender: m.Sender, Device: m.Device,
		MsgID: m.ID, Text: m.Text, Stream: out.Stream, Progress: out.Progress, OnHeld: out.Held}
	if m.Group {
		in.ChatType, in.ChatID = Group, m.Chat
		if m.Thread != "" {
			in.ChatType, in.ThreadID = Thread, m.Thread
		}
	}
	for _, a := range m.Attachments {
		if a.Kind == "image" && a.Data != nil {
			in.Images = append(in.Images, llm.ImagePart(a.MIME, a.Data))
		}
	}
	return in
}

// Reply delivers one message to the user who wrote the inbound message.
type Reply func(ctx context.Context, text string) error

// Turner runs an agent turn (*agent.Agent).
type Turner interface {
	Turn(ctx context.Context, in agent.Input, emit func(agent.Event)) (agent.Output, error)
}

// Memory is the part of *memory.Store the slash commands use.
type Memory interface {
	ForgetMatching(ctx context.Context, scope, text string) ([]memory.Fact, error)
	Stats(ctx context.Context, scope string) (memory.Stats, error)
}

// Deps of a Service.
type Deps struct {
	Runner   *runner.Runner
	Agent    Turner
	Sessions *session.Store
	Memory   Memory // nil: no long-term memory (/forget says so)
	// Closed is told the id of a session /new closed (memory compresses
	// its rest). It must not block.
	Closed func(sessionID int64)
	Model  string
	Logger *slog.Logger
	// Clock bounds the delivery of a cancelled turn's last word; nil: the
	// wall clock.
	Clock clock.Clock
	// Commands are more slash commands ("/tools"), each given the sender
	// ("wecom:alice") and the message's words; the reply goes back as is.
	Commands map[string]Command
	// Backlog keeps the turns the model service could not answer and runs
	// them again when it is back (*backlog.Backlog); nil: such a turn
	// gets FailureText.
	Backlog Backlog
	// Cache answers repeated fast (voice, hardware) commands without the
	// model (*cmdcache.Cache); nil: none. ModelDown reports the model
	// client's breaker open (the cache then answers what it can).
	Cache     CommandCache
	ModelDown func() bool
}

// CommandCache is the command cache (*cmdcache.Cache).
type CommandCache interface {
	Lookup(ctx context.Context, r cmdcache.Request, modelDown bool) (cmdcache.Answer, cmdcache.Probe, bool, error)
	Learn(ctx context.Context, r cmdcache.Request, p cmdcache.Probe, steps []cmdcache.Step, reply string) error
}

// Backlog is the held turns (*backlog.Backlog).
type Backlog interface {
	Hold(ctx context.Context, key string, m backlog.Message, session int64) (first, dup bool, err error)
	Waiting(ctx context.Context, key string) (int, error)
	Cancel(ctx context.Context, key string) (int, error)
	Resumed(ctx context.Context, id, session int64) error
	Wake()
}

// Command is a slash command a host adds.
type Command func(ctx context.Context, user string, fields []string) string

// Service routes inbound messages. Safe for concurrent use.
type Service struct {
	d      Deps
	logger *slog.Logger

	usage llm.Accounting // tokens per user (turns, not individual calls)

	mu      sync.Mutex
	verbose map[session.Key]bool
}

// Usage returns the tokens used per user since start.
func (s *Service) Usage() map[string]llm.UserUsage { return s.usage.Snapshot() }

// New returns a Service.
func New(d Deps) *Service {
	logger := d.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	d.Clock = clock.Or(d.Clock)
	return &Service{d: d, logger: logger.With("component", "conversation"), verbose: map[session.Key]bool{}}
}

// Key is the routing key of an inbound message.
func Key(in Inbound) (session.Key, error) {
	switch in.ChatType {
	case "", P2P:
		return session.P2P(in.Channel, in.Sender)
	case Group:
		return session.Group(in.Channel, in.ChatID)
	case Thread:
		return session.Thread(in.Channel, in.ChatID, in.ThreadID)
	}
	return "", fmt.Errorf("conversation: unknown chat type %q", in.ChatType)
}

// QueueFullText is the reply to a user whose own backlog is full.
const QueueFullText = "I still have several of your messages to answer; please wait for those replies before sending more."

// Handle queues in on its routing key's worker (strict order per key) and
// returns; done is closed after the turn and every reply for it. reply is
// called from the worker. When the user's queue is full they are told so
// at once and Handle returns runner.ErrQueueFull.
func (s *Service) Handle(ctx context.Context, in Inbound, reply Reply) (done <-chan struct{}, err error) {
	key, err := Key(in)
	if err != nil {
		return nil, err
	}
	ch := make(chan struct{})
	err = s.d.Runner.Submit(string(key), func(jobCtx context.Context) {
		defer close(ch)
		s.turn(jobCtx, key, in, reply)
	})
	if errors.Is(err, runner.ErrQueueFull) {
		s.send(ctx, reply, QueueFullText)
	}
	if err != nil {
		return nil, err
	}
	return ch, nil
}

// NotAnsweredText is the reply to a message that was still queued when the
// daemon stopped.
const NotAnsweredText = "I was restarting and could not answer this message; please send it again in a minute."

// RetryingText tells the user a slow answer is on its way.
const RetryingText = "The model service is busy; retrying…"

func (s *Service) turn(ctx context.Context, key session.Key, in Inbound, reply Reply) {
	if ctx.Err() != nil { // queued when the runner closed
		s.send(ctx, reply, NotAnsweredText)
		return
	}
	text := strings.TrimSpace(in.Text)
	if strings.HasPrefix(text, "/") {
		s.send(ctx, reply, s.command(ctx, key, in.Channel+":"+in.Sender, text))
		return
	}
	if s.d.Backlog != nil && in.replay == nil && !in.Fast {
		// Turns of this conversation wait for the model service: this
		// one waits behind them (the user was told at the first).
		if n, err := s.d.Backlog.Waiting(ctx, string(key)); err == nil && n > 0 {
			first, dup, err := s.d.Backlog.Hold(ctx, string(key), heldMessage(in), 0)
			if err == nil {
				if dup {
					s.logger.Info("message held already; not held again", "key", key, "msg", in.MsgID)
					return
				}
				s.logger.Info("turn held behind the conversation's earlier ones", "key", key, "held", n+1)
				if in.OnHeld != nil {
					in.OnHeld()
				}
				if first { // what is held before it was a scheduled task: nobody was told
					s.send(ctx, reply, HeldText)
				}
				return
			}
			s.logger.Error("turn could not be held", "key", key, "err", err)
		}
	}
	s.mu.Lock()
	verbose := s.verbose[key]
	s.mu.Unlock()
	profile := in.Profile
	if profile == "" {
		profile = in.Channel
	}
	// A fast command answered before from the cache: no model.
	var cache *cacheTurn
	if s.d.Cache != nil && in.Fast && in.replay == nil && !verbose {
		cache = &cacheTurn{req: cmdcache.Request{Channel: in.Channel, Sender: in.Sender, Device: in.Device, Profile: profile, Session: string(key), Text: text}}
		if s.cached(ctx, key, cache, reply, s.d.ModelDown != nil && s.d.ModelDown()) {
			return
		}
	}
	var emit func(agent.Event)
	if verbose {
		emit = func(e agent.Event) {
			if line := describe(e); line != "" {
				s.send(ctx, reply, line)
			}
		}
	}
	if in.Stream != nil || in.Progress != nil || cache != nil {
		verboseEmit := emit
		emit = func(e agent.Event) {
			cache.observe(e)
			switch {
			case e.Kind == agent.EventText && in.Stream != nil:
				in.Stream(e.Text)
				return
			case e.Kind == agent.EventToolCall && in.Progress != nil:
				in.Progress(ToolProgress{Tool: e.Tool})
			case e.Kind == agent.EventToolResult && in.Progress != nil:
				in.Progress(ToolProgress{Tool: e.Tool, Done: true, Failed: e.IsError, Took: e.Duration})
			}
			if verboseEmit != nil {
				verboseEmit(e)
			}
		}
	}
	if in.replay == nil { // a held turn's answer comes whole, later: no notice
		var once sync.Once
		ctx = llm.WithRetryNotice(ctx, func(int, time.Duration, error) {
			once.Do(func() { s.send(ctx, reply, RetryingText) })
		})
	}
	start := time.Now()
	out, err := s.d.Agent.Turn(ctx, agent.Input{
		Key: key, User: in.Sender, Channel: in.Channel, Profile: profile, Fast: in.Fast, Text: text, Verbose: verbose,
		Stream: in.Stream != nil, Progress: in.Progress != nil || cache != nil, Images: in.Images, Resume: resumeOf(in),
	}, emit)
	userID := in.Channel + ":" + in.Sender
	s.usage.Add(userID, out.Usage)
	if err != nil {
		s.logger.Warn("turn failed", "key", key, "err", err, "steps", out.Steps, "took", time.Since(start).Round(time.Millisecond))
		if cache != nil && Outage(err) && ctx.Err() == nil && s.cached(ctx, key, cache, reply, true) {
			return // the model is down; the cache knew this command
		}
		if s.hold(ctx, key, in, reply, out.Session, err) {
			return
		}
		s.send(ctx, reply, FailureText(err))
		return
	}
	defer func() { // after the reply: remembering it may embed the utterance
		if cache != nil && cache.probed {
			if lerr := s.d.Cache.Learn(ctx, cache.req, cache.probe, cache.steps, out.Text); lerr != nil {
				s.logger.Warn("command cache: not remembered", "key", key, "err", lerr)
			}
		}
	}()
	if s.d.Backlog != nil && in.replay == nil {
		s.d.Backlog.Wake() // the service answers: held turns can run
	}
	s.logger.Info("turn", "key", key, "steps", out.Steps, "tools", out.ToolCalls,
		"tokens", out.Usage.TotalTokens, "stopped", out.Stopped, "took", time.Since(start).Round(time.Millisecond))
	s.send(ctx, reply, out.Text)
}

// cacheTurn is a fast turn's dealings with the command cache.
type cacheTurn struct {
	req    cmdcache.Request
	probe  cmdcache.Probe
	probed bool // Lookup ran (Learn may use its probe)
	steps  []cmdcache.Step
}

// observe records the turn's tool calls (for Learn).
func (c *cacheTurn) observe(e agent.Event) {
	if c == nil {
		return
	}
	switch e.Kind {
	case agent.EventToolCall:
		c.steps = append(c.steps, cmdcache.Step{Tool: e.Tool, Args: e.Args})
	case agent.EventToolResult:
		for i := len(c.steps) - 1; i >= 0; i-- {
			if c.steps[i].Tool == e.Tool && c.steps[i].Result == "" && !c.steps[i].Failed {
				c.steps[i].Result, c.steps[i].Failed = e.Text, e.IsError
				break
			}
		}
	}
}

// cached answers a fast turn from the command cache when it can: the
// exchange is stored in the conversation like any other.
func (s *Service) cached(ctx context.Context, key session.Key, c *cacheTurn, reply Reply, modelDown bool) bool {
	ans, probe, ok, err := s.d.Cache.Lookup(ctx, c.req, modelDown)
	if err == nil {
		c.probe, c.probed = probe, true
	} else if !errors.Is(err, cmdcache.ErrOff) {
		s.logger.Warn("command cache lookup failed", "key", key, "err", err)
	}
	if !ok {
		return false
	}
	s.logger.Info("turn answered from the command cache", "key", key, "tool", ans.Entry.Tool, "entry", ans.Entry.ID,
		"similarity", fmt.Sprintf("%.3f", ans.Similarity), "model_down", modelDown)
	if sess, err := s.d.Sessions.Current(ctx, key); err == nil {
		if err := s.d.Sessions.Append(ctx, sess.ID, llm.Message{Role: llm.RoleUser, Content: c.req.Text},
			llm.Message{Role: llm.RoleAssistant, Content: ans.Reply}); err != nil {
			s.logger.Warn("command cache: exchange not stored", "key", key, "err", err)
		}
	}
	s.send(ctx, reply, ans.Reply)
	return true
}

// HeldText tells a user their message waits for the model service.
const HeldText = "I cannot reach the model service right now (network or service down). I have kept your message and will answer it here as soon as the service is back; /new drops it."

// Outage reports whether err means the model service is unreachable or
// failing for now (down, breaker open, 5xx, rate limit or quota): a turn
// that failed so is held and run again, not answered with an error.
func Outage(err error) bool {
	return errors.Is(err, llm.ErrUnavailable) || errors.Is(err, llm.ErrServer) || errors.Is(err, llm.ErrRateLimited)
}

// hold keeps a turn the model service could not answer (Backlog); it
// reports whether it did. The user is told once per outage; a held turn
// run again that fails again stays held, silently.
func (s *Service) hold(ctx context.Context, key session.Key, in Inbound, reply Reply, sess int64, err error) bool {
	if s.d.Backlog == nil || !Outage(err) || in.Fast || ctx.Err() != nil {
		return false
	}
	if in.replay != nil {
		in.replay.stillDn, in.replay.err, in.replay.session = true, err, sess
		return true
	}
	first, dup, herr := s.d.Backlog.Hold(ctx, string(key), heldMessage(in), sess)
	if herr != nil {
		s.logger.Error("turn could not be held", "key", key, "err", herr)
		return false
	}
	if dup { // processed again after a crash: held (or answered) already
		s.logger.Info("message held already; not held again", "key", key, "msg", in.MsgID)
		return true
	}
	s.logger.Warn("model service unreachable; turn held", "key", key, "err", err)
	if in.OnHeld != nil {
		in.OnHeld()
	}
	if first {
		s.send(ctx, reply, HeldText)
	}
	return true
}

// heldMessage is what the backlog keeps of in.
func heldMessage(in Inbound) backlog.Message {
	return backlog.Message{Channel: in.Channel, Profile: in.Profile, ChatType: in.ChatType, Sender: in.Sender, ChatID: in.ChatID,
		ThreadID: in.ThreadID, Text: clip.Bytes(in.Text, backlog.MaxText), MsgID: in.MsgID, ReplyChannel: in.ReplyChannel, ReplyTo: in.ReplyTo, Due: in.Due}
}

func resumeOf(in Inbound) int64 {
	if in.replay == nil {
		return 0
	}
	return in.replay.resume
}

// Replay runs a held turn again, in its conversation's order, and returns
// its replies; StillDown when the model service fails again (the turn
// stays held). It is the backlog's Runner.
func (s *Service) Replay(ctx context.Context, t backlog.Turn) ([]string, backlog.Outcome, error) {
	m := t.Message
	rp := &replay{resume: t.Session}
	in := Inbound{Channel: m.Channel, Profile: m.Profile, ChatType: m.ChatType, Sender: m.Sender, ChatID: m.ChatID, ThreadID: m.ThreadID,
		Text: m.Text, ReplyChannel: m.ReplyChannel, ReplyTo: m.ReplyTo, Due: m.Due, replay: rp}
	var mu sync.Mutex
	var replies []string
	done, err := s.Handle(ctx, in, func(_ context.Context, text string) error {
		mu.Lock()
		replies = append(replies, text)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, backlog.StillDown, err // the conversation's queue is full: later
	}
	select {
	case <-done:
	case <-ctx.Done():
		return nil, backlog.StillDown, ctx.Err()
	}
	if rp.stillDn {
		if rp.session != 0 && rp.session != t.Session && s.d.Backlog != nil {
			// The message is stored now: the next run continues it.
			if err := s.d.Backlog.Resumed(ctx, t.ID, rp.session); err != nil {
				s.logger.Warn("backlog: session of a held turn not recorded", "held", t.ID, "err", err)
			}
		}
		return nil, backlog.StillDown, rp.err
	}
	mu.Lock()
	defer mu.Unlock()
	return replies, backlog.Answered, nil
}

// lastWordTimeout bounds the delivery of a cancelled turn's last word.
const lastWordTimeout = 10 * time.Second

// send delivers text, logging (not dropping silently) a failed delivery.
func (s *Service) send(ctx context.Context, reply Reply, text string) {
	if text == "" {
		return
	}
	// A cancelled turn still owes the user its last word.
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = clock.WithTimeout(context.WithoutCancel(ctx), s.d.Clock, lastWordTimeout)
		defer cancel()
	}
	if err := reply(ctx, text); err != nil {
		s.logger.Error("reply not delivered", "err", err)
	}
}

// FailureText is what the user reads when a turn fails.
func FailureText(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "Stopped."
	case errors.Is(err, context.DeadlineExceeded):
		return "That took too long and I stopped. Please try again, perhaps with a smaller request."
	case errors.Is(err, llm.ErrAuth):
		return "The model service rejected my credentials, so I cannot answer. An operator needs to check llm.api_key (agentctl doctor)."
	case errors.Is(err, llm.ErrRateLimited), errors.Is(err, llm.ErrServer):
		return "The model service is overloaded; I retried several times without success. Please try again in a minute."
	case errors.Is(err, llm.ErrUnavailable):
		return "I cannot reach the model service right now (network or service down). Your message is kept in this conversation; please ask again later."
	case errors.Is(err, llm.ErrBadRequest):
		return "The model service refused this request. Try /new to start a fresh conversation."
	}
	return "Something went wrong while answering, sorry. Please try again."
}

func describe(e agent.Event) string {
	switch e.Kind {
	case agent.EventToolCall:
		return fmt.Sprintf("[step %d] calling %s %s", e.Step, e.Tool, clip.Line(e.Args, 200))
	case agent.EventToolResult:
		mark := "ok"
		if e.IsError {
			mark = "error"
		}
		return fmt.Sprintf("[step %d] %s %s (%s): %s", e.Step, e.Tool, mark, e.Duration.Round(time.Millisecond), clip.Line(e.Text, 300))
	}
	return ""
}

// HelpText lists the slash commands.
const HelpText = `Commands:
/new — start a new conversation (the old one is kept)
/status — this conversation, the model, message counts
/verbose on|off — show each tool step as it happens
/forget TEXT — forget what I remember that matches TEXT (or #ID for one fact)
/tools — custom tools waiting for approval (owners: /tools show|approve|reject NAME)
/help — this list`

func (s *Service) command(ctx context.Context, key session.Key, user, text string) string {
	fields := strings.Fields(text)
	switch strings.ToLower(fields[0]) {
	case "/new":
		old, oldErr := s.d.Sessions.Current(ctx, key)
		sess, err := s.d.Sessions.Reset(ctx, key)
		if err != nil {
			s.logger.Error("/new failed", "key", key, "err", err)
			return "Could not start a new conversation, sorry; please try again."
		}
		if oldErr == nil && s.d.Closed != nil {
			s.d.Closed(old.ID)
		}
		dropped := ""
		if s.d.Backlog != nil {
			if n, err := s.d.Backlog.Cancel(ctx, string(key)); err != nil {
				s.logger.Error("/new: dropping held turns failed", "key", key, "err", err)
			} else if n > 0 {
				dropped = fmt.Sprintf(" %d message(s) waiting for the model service were dropped.", n)
			}
		}
		return fmt.Sprintf("New conversation started (#%d). The previous one is kept.%s", sess.ID, dropped)
	case "/status":
		cur, err := s.d.Sessions.Current(ctx, key)
		var sess session.Summary
		if err == nil {
			sess, err = s.d.Sessions.Summarize(ctx, cur.ID)
		}
		if err != nil {
			return "Could not read this conversation's status, sorry."
		}
		s.mu.Lock()
		verbose := s.verbose[key]
		s.mu.Unlock()
		used := s.usage.Snapshot()[user] // the asker's, also in a group chat
		held := ""
		if s.d.Backlog != nil {
			if n, err := s.d.Backlog.Waiting(ctx, string(key)); err == nil && n > 0 {
				held = fmt.Sprintf(" Waiting for the model service: %d message(s) of this conversation (answered when it is back; /new drops them).", n)
			}
		}
		return fmt.Sprintf("Conversation #%d since %s, %d messages. Model: %s. Verbose: %s. Your usage since start: %d tokens in %d turns.%s%s",
			sess.ID, sess.CreatedAt.Format("2006-01-02 15:04"), sess.Messages, s.d.Model, onOff(verbose), used.TotalTokens, used.Requests,
			s.memoryStatus(ctx, key), held)
	case "/forget":
		return s.forget(ctx, key, strings.TrimSpace(text[len(fields[0]):]))
	case "/verbose":
		if len(fields) != 2 || (fields[1] != "on" && fields[1] != "off") {
			return "Usage: /verbose on|off"
		}
		if p, err := key.Parts(); err != nil || p.Kind != session.KindP2P {
			// Tool steps carry arguments and results (a member's files,
			// what they searched): not for everyone in a group.
			return "/verbose is for direct chats only: in a group it would show everyone the details of each member's tool steps."
		}
		s.mu.Lock()
		s.verbose[key] = fields[1] == "on"
		s.mu.Unlock()
		return "Verbose " + fields[1] + "."
	case "/help":
		return HelpText
	}
	if c, ok := s.d.Commands[strings.ToLower(fields[0])]; ok {
		return c(ctx, user, fields)
	}
	return fmt.Sprintf("Unknown command %s.\n%s", fields[0], HelpText)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// memoryStatus is the memory part of /status.
func (s *Service) memoryStatus(ctx context.Context, key session.Key) string {
	if s.d.Memory == nil {
		return " Memory: off."
	}
	scope, err := key.MemoryScope()
	if err != nil {
		return ""
	}
	st, err := s.d.Memory.Stats(ctx, scope)
	if err != nil {
		s.logger.Warn("memory stats failed", "key", key, "err", err)
		return " Memory: unavailable."
	}
	mode := "semantic and keyword search"
	if !st.Semantic {
		mode = "keyword search only (no embedding model)"
	}
	return fmt.Sprintf(" Memory: %d facts (%d older versions), %s.", st.Facts, st.Superseded, mode)
}

// forget is /forget TEXT: drop the facts of this conversation's memory
// scope that match, and say which.
func (s *Service) forget(ctx context.Context, key session.Key, text string) string {
	if s.d.Memory == nil {
		return "Long-term memory is not enabled here, so there is nothing to forget."
	}
	if text == "" {
		return "Usage: /forget TEXT — forget what I remember that matches TEXT, or /forget #ID for one fact."
	}
	scope, err := key.MemoryScope()
	if err != nil {
		return "Could not tell whose memory this is, sorry."
	}
	facts, err := s.d.Memory.ForgetMatching(ctx, scope, text)
	switch {
	case errors.Is(err, memory.ErrTooMany):
		return fmt.Sprintf("%q matches more than %d remembered facts; nothing was forgotten. Please be more specific, or use /forget #ID.", text, memory.MaxForget)
	case errors.Is(err, memory.ErrNotFound):
		return fmt.Sprintf("I have no fact %s in this conversation's memory.", text)
	case err != nil:
		s.logger.Error("/forget failed", "key", key, "err", err)
		return "Could not update my memory, sorry; please try again."
	case len(facts) == 0:
		return fmt.Sprintf("I remember nothing matching %q.", text)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Forgotten (%d):", len(facts))
	for _, f := range facts {
		fmt.Fprintf(&b, "\n- #%d %s", f.ID, f.Text)
	}
	return b.String()
}
