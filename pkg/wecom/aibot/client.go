package aibot

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"agent/pkg/clock"
)

// Config of a Client.
type Config struct {
	URL    string // DefaultURL when empty
	BotID  string
	Secret string
	// Handle receives every callback (aibot_msg_callback and
	// aibot_event_callback), in order, from the connection's reader: it
	// should store what it needs and return (a slow Handle delays pings'
	// answers). ctx ends with the connection.
	Handle func(ctx context.Context, f Frame)
	// Heartbeat is the ping interval (30 s); two pings without an answer
	// end the connection.
	Heartbeat time.Duration
	// AckTimeout bounds the wait for the answer to a reply or a push (5 s)
	// and for the subscription's (10 s: twice it).
	AckTimeout time.Duration
	// MinBackoff and MaxBackoff bound the waits between reconnections
	// after a dropped connection (1 s doubling to 30 s, jittered).
	MinBackoff, MaxBackoff time.Duration
	// RejectedBackoff is the wait after WeCom refused the subscription (a
	// wrong bot_id or secret: retrying sooner would only hammer it; 5 min).
	RejectedBackoff time.Duration
	// ReplacedBackoff is the wait after a newer connection with the same
	// bot replaced this one (another box or process holds the bot; 10 min).
	ReplacedBackoff time.Duration
	Dialer          *websocket.Dialer // nil: a dialer with a 20 s handshake, proxies from the environment
	Clock           clock.Clock
	Logger          *slog.Logger
}

// States of the connection.
const (
	StateConnecting = "connecting"
	StateReady      = "subscribed"
	StateRetrying   = "retrying"
	StateRejected   = "rejected" // WeCom refused bot_id/secret
	StateReplaced   = "replaced" // a newer connection of this bot took over
	StateStopped    = "stopped"
)

// Status is the connection's state for /healthz, doctor and /metrics.
type Status struct {
	State      string
	Since      time.Time
	LastError  string
	Reconnects int
	FramesIn   int64
	FramesOut  int64
	BadFrames  int64
}

// Errors of the Client.
var (
	// ErrNotConnected: no subscribed connection (a reply then goes out
	// later by push).
	ErrNotConnected = errors.New("wecom aibot: not connected")
	// ErrAckTimeout: WeCom did not answer a reply or push in time.
	ErrAckTimeout = errors.New("wecom aibot: no answer in time")
	// ErrRejected wraps the *Error of a refused subscription.
	ErrRejected = errors.New("wecom aibot: subscription refused")
	// ErrReplaced: WeCom sent disconnected_event (a newer connection of
	// the same bot replaced this one).
	ErrReplaced = errors.New("wecom aibot: replaced by a newer connection of the same bot")
)

// Client holds the long connection: dial, subscribe, ping, reconnect,
// and the replies and pushes sent over it. Safe for concurrent use.
type Client struct {
	cfg    Config
	clock  clock.Clock
	logger *slog.Logger

	framesIn, framesOut, badFrames atomic.Int64

	mu     sync.Mutex
	cur    *conn
	status Status
	reqs   map[string]*reqLock // replies to one req_id go one at a time
	// subscribed: the current session got as far as a subscription.
	subscribed bool
}

type reqLock struct {
	mu   sync.Mutex
	refs int
}

// New returns a client; Run connects it.
func New(cfg Config) *Client {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Heartbeat, 30*time.Second)
	def(&cfg.AckTimeout, 5*time.Second)
	def(&cfg.MinBackoff, time.Second)
	def(&cfg.MaxBackoff, 30*time.Second)
	def(&cfg.RejectedBackoff, 5*time.Minute)
	def(&cfg.ReplacedBackoff, 10*time.Minute)
	if cfg.Dialer == nil {
		cfg.Dialer = &websocket.Dialer{HandshakeTimeout: 20 * time.Second, Proxy: http.ProxyFromEnvironment}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Handle == nil {
		cfg.Handle = func(context.Context, Frame) {}
	}
	c := &Client{cfg: cfg, clock: clock.Or(cfg.Clock), logger: cfg.Logger, reqs: map[string]*reqLock{}}
	c.status = Status{State: StateConnecting, Since: c.clock.Now()}
	return c
}

// Status returns the connection's state.
func (c *Client) Status() Status {
	c.mu.Lock()
	s := c.status
	c.mu.Unlock()
	s.FramesIn, s.FramesOut, s.BadFrames = c.framesIn.Load(), c.framesOut.Load(), c.badFrames.Load()
	return s
}

func (c *Client) setState(state string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.State != state {
		c.status.State, c.status.Since = state, c.clock.Now()
	}
	if err != nil {
		c.status.LastError = err.Error()
	}
}

// Run keeps the connection up until ctx ends (then it returns nil):
// dial, subscribe, ping, and after a failure wait (jittered backoff; much
// longer after a refused subscription or a takeover) and dial again.
func (c *Client) Run(ctx context.Context) error {
	attempt := 0
	for {
		c.setState(StateConnecting, nil)
		c.mu.Lock()
		c.subscribed = false
		c.mu.Unlock()
		err := c.session(ctx)
		if ctx.Err() != nil {
			c.setState(StateStopped, nil)
			return nil
		}
		var wait time.Duration
		state := StateRetrying
		switch {
		case errors.Is(err, ErrRejected):
			state, wait = StateRejected, c.cfg.RejectedBackoff
			c.logger.Error("wecom_bot: WeCom refused the subscription; check wecom_bot.bot_id and wecom_bot.secret (the bot's API mode must be 长连接)", "err", err, "retry_in", wait)
		case errors.Is(err, ErrReplaced):
			state, wait = StateReplaced, c.cfg.ReplacedBackoff
			c.logger.Error("wecom_bot: another connection of this bot took over (one live connection per bot: another box or process uses the same bot_id)", "retry_in", wait)
		default:
			c.mu.Lock()
			if c.subscribed {
				attempt = 0 // it was up: the first retry is quick again
			}
			c.mu.Unlock()
			attempt++
			wait = c.backoff(attempt)
			c.logger.Warn("wecom_bot: connection lost", "err", err, "retry_in", wait.Round(time.Millisecond))
		}
		c.setState(state, err)
		if clock.Sleep(ctx, c.clock, wait) != nil {
			c.setState(StateStopped, nil)
			return nil
		}
		c.mu.Lock()
		c.status.Reconnects++
		c.mu.Unlock()
	}
}

// backoff is MinBackoff doubling per attempt up to MaxBackoff, with the
// upper half jittered (boxes restarted together do not dial together).
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.MinBackoff
	for i := 1; i < attempt && d < c.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.cfg.MaxBackoff)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// transient reports whether a subscription's error code is WeCom being
// busy rather than the bot's credentials (-1: "system busy"; 45009 and
// 45033: API rate limits): those retry on the normal backoff.
func transient(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case -1, 45009, 45033:
		return true
	}
	return false
}

// conn is one subscribed connection.
type conn struct {
	ws     *websocket.Conn
	subID  string // the subscription's req_id
	wmu    sync.Mutex
	missed atomic.Int32 // pings without an answer

	pmu     sync.Mutex
	pending map[string]chan Frame // req_id -> the waiter of its answer
	done    chan struct{}
}

func (cn *conn) expect(reqID string) chan Frame {
	ch := make(chan Frame, 1)
	cn.pmu.Lock()
	cn.pending[reqID] = ch
	cn.pmu.Unlock()
	return ch
}

func (cn *conn) forget(reqID string) {
	cn.pmu.Lock()
	delete(cn.pending, reqID)
	cn.pmu.Unlock()
}

func (cn *conn) deliver(f Frame) bool {
	cn.pmu.Lock()
	ch, ok := cn.pending[f.Headers.ReqID]
	delete(cn.pending, f.Headers.ReqID)
	cn.pmu.Unlock()
	if ok {
		ch <- f
	}
	return ok
}

// write sends one frame (writes are serialised; 10 s at most each).
func (c *Client) write(cn *conn, data []byte) error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	_ = cn.ws.SetWriteDeadline(time.Now().Add(10 * time.Second)) // a socket deadline: the wall clock
	if err := cn.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		return fmt.Errorf("wecom aibot: write: %w", err)
	}
	c.framesOut.Add(1)
	return nil
}

// session is one connection, from the dial to its end.
func (c *Client) session(ctx context.Context) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws, resp, err := c.cfg.Dialer.DialContext(sctx, c.cfg.URL, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return fmt.Errorf("wecom aibot: dial: %w", err)
	}
	ws.SetReadLimit(MaxFrame)
	cn := &conn{ws: ws, pending: map[string]chan Frame{}, done: make(chan struct{})}
	readErr := make(chan error, 1)
	defer func() {
		c.mu.Lock()
		close(cn.done) // under c.mu: the reader cannot make cn current after this
		if c.cur == cn {
			c.cur = nil
		}
		c.mu.Unlock()
		ws.Close()
		cancel()
		<-readErr
	}()
	subID := newReqID(CmdSubscribe)
	cn.subID = subID
	answer := cn.expect(subID)
	data, _ := Encode(CmdSubscribe, subID, map[string]string{"bot_id": c.cfg.BotID, "secret": c.cfg.Secret})
	if err := c.write(cn, data); err != nil {
		readErr <- nil
		return err
	}
	go func() { readErr <- c.read(sctx, cn) }()
	t := c.clock.NewTimer(2 * c.cfg.AckTimeout)
	select {
	case f := <-answer:
		t.Stop()
		if err := f.Err(); err != nil {
			if transient(err) {
				return fmt.Errorf("wecom aibot: subscription answered: %w", err)
			}
			return fmt.Errorf("%w: %w", ErrRejected, err)
		}
	case err := <-readErr:
		t.Stop()
		readErr <- err
		return fmt.Errorf("wecom aibot: before the subscription was answered: %w", err)
	case <-t.C():
		return errors.New("wecom aibot: the subscription was not answered in time")
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
	c.logger.Info("wecom_bot: connected and subscribed", "url", c.cfg.URL)
	for {
		t := c.clock.NewTimer(c.cfg.Heartbeat)
		select {
		case err := <-readErr:
			t.Stop()
			readErr <- err
			return err
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
		if cn.missed.Load() >= 2 {
			return errors.New("wecom aibot: two pings went unanswered")
		}
		cn.missed.Add(1)
		data, _ := Encode(CmdPing, newReqID(CmdPing), nil)
		if err := c.write(cn, data); err != nil {
			return err
		}
	}
}

// read takes frames until the connection ends: answers go to their
// waiters, callbacks to Handle. A disconnected_event ends the session.
func (c *Client) read(ctx context.Context, cn *conn) error {
	for {
		_, data, err := cn.ws.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("wecom aibot: read: %w", err)
		}
		c.framesIn.Add(1)
		f, err := Decode(data)
		if err != nil {
			c.badFrames.Add(1)
			c.logger.Warn("wecom_bot: frame ignored", "err", err, "bytes", len(data))
			continue
		}
		switch {
		case f.IsAnswer() && f.Headers.ReqID == cn.subID && f.Err() == nil:
			// Subscribed: ready before the next frame is read (WeCom may
			// push a message right after the answer).
			c.mu.Lock()
			select {
			case <-cn.done: // the session gave up on this answer already
				c.mu.Unlock()
				continue
			default:
			}
			c.cur, c.subscribed = cn, true
			c.mu.Unlock()
			c.setState(StateReady, nil)
			cn.deliver(f)
		case f.IsAnswer():
			if strings.HasPrefix(f.Headers.ReqID, CmdPing+"_") {
				cn.missed.Store(0)
				continue
			}
			if !cn.deliver(f) {
				c.logger.Debug("wecom_bot: answer to nothing waiting", "req_id", f.Headers.ReqID)
			}
		case f.Cmd == CmdEventCallback && eventType(f) == EventDisconnected:
			return ErrReplaced
		case f.Cmd == CmdMsgCallback || f.Cmd == CmdEventCallback:
			c.cfg.Handle(ctx, f)
		default:
			c.logger.Debug("wecom_bot: unknown command ignored", "cmd", f.Cmd)
		}
	}
}

func eventType(f Frame) string {
	m, err := ParseMessage(f.Body)
	if err != nil || m.Event == nil {
		return ""
	}
	return m.Event.EventType
}

// Reply sends cmd (aibot_respond_msg, aibot_respond_welcome_msg) under an
// inbound frame's req_id and waits for WeCom's answer. Replies to one
// req_id go one at a time, each after the previous one's answer.
func (c *Client) Reply(ctx context.Context, reqID, cmd string, body any) error {
	if reqID == "" {
		return errors.New("wecom aibot: reply without a req_id")
	}
	unlock := c.lockReq(reqID)
	defer unlock()
	return c.exchange(ctx, cmd, reqID, body)
}

// Push sends aibot_send_msg (body: MarkdownPush) and waits for the answer.
func (c *Client) Push(ctx context.Context, body any) error {
	return c.exchange(ctx, CmdSend, newReqID(CmdSend), body)
}

func (c *Client) exchange(ctx context.Context, cmd, reqID string, body any) error {
	c.mu.Lock()
	cn := c.cur
	c.mu.Unlock()
	if cn == nil {
		return ErrNotConnected
	}
	data, err := Encode(cmd, reqID, body)
	if err != nil {
		return err
	}
	answer := cn.expect(reqID)
	defer cn.forget(reqID)
	if err := c.write(cn, data); err != nil {
		return err
	}
	t := c.clock.NewTimer(c.cfg.AckTimeout)
	defer t.Stop()
	select {
	case f := <-answer:
		return f.Err()
	case <-t.C():
		return fmt.Errorf("%w (%s, %s)", ErrAckTimeout, cmd, c.cfg.AckTimeout)
	case <-cn.done:
		return ErrNotConnected
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) lockReq(reqID string) func() {
	c.mu.Lock()
	l := c.reqs[reqID]
	if l == nil {
		l = &reqLock{}
		c.reqs[reqID] = l
	}
	l.refs++
	c.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		c.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(c.reqs, reqID)
		}
		c.mu.Unlock()
	}
}

// newReqID is prefix_<unix ms>_<8 hex digits>.
func newReqID(prefix string) string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return prefix + "_" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "_" + hex.EncodeToString(b[:])
}
