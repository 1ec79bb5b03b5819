package wecom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"agent/pkg/channel"
	"agent/pkg/channelhost"
	"agent/pkg/clip"
	"agent/pkg/egress"
	"agent/pkg/fleet"
	"agent/pkg/tools"
	"agent/pkg/turn"
	wx "agent/pkg/wecom"
)

// The WeCom app channel as the host sees it (pkg/channel): the callback at
// /wecom/callback, the inbox processor and the outbox in Run, text through
// the outbox, media (send_image, send_file, send_video, send_link) through
// the API's upload and the outbox.

var (
	_ channel.Channel          = (*App)(nil)
	_ channel.MediaSender      = (*App)(nil)
	_ channelhost.ToolProvider = (*App)(nil)
)

// sendAttempts is how often the API client itself retries a call (short
// pauses); the outbox retries beyond that with persisted backoff.
const sendAttempts = 2

// App is the running WeCom app channel.
type App struct {
	host    channelhost.Env
	handler *Handler
	client  *wx.Client
	inbox   *Inbox
	outbox  *Outbox
	proc    *Processor // nil while the conversation pipeline is unavailable
}

// Build makes the channel when wecom.enabled (channelhost.Build).
func Build(_ context.Context, h channelhost.Env) (channel.Channel, error) {
	cfg := h.Config()
	if !cfg.WeCom.Enabled {
		return nil, nil
	}
	logger := h.Logger.With("component", "wecom")
	if len(cfg.Server.AllowedHosts) == 0 && cfg.ListenIsLoopback() {
		logger.Warn("wecom is enabled on a loopback listener without server.allowed_hosts: callbacks through a proxy or tunnel that pass on your public host name get 421",
			"fix", "set server.allowed_hosts = [\"<public host name>\"] (agentctl doctor: http_access)")
	}
	crypto, err := wx.NewCrypto(cfg.WeCom.Token, cfg.WeCom.EncodingAESKey, cfg.WeCom.CorpID)
	if err != nil {
		return nil, err
	}
	client := &wx.Client{
		BaseURL:     cfg.WeCom.APIBase,
		CorpID:      cfg.WeCom.CorpID,
		CorpSecret:  cfg.WeCom.CorpSecret,
		AgentID:     int64(cfg.WeCom.AgentID),
		Logger:      logger,
		MaxAttempts: sendAttempts,
	}
	if h.Egress != nil {
		client.HTTP = h.Egress.Client(egress.WeCom, time.Minute)
	}
	c := &App{host: h, client: client, inbox: NewInbox(h.DB, nil)}
	c.outbox = NewOutbox(h.DB, OutboxConfig{API: client, Logger: logger, Scrub: h.Scrub})
	c.handler = &Handler{Crypto: crypto, Inbox: c.inbox, Logger: logger}
	var conv *Processor
	if h.Turns.Err() == nil {
		conv = NewProcessor(ProcessorConfig{
			Inbox: c.inbox, Outbox: c.outbox, Conversation: h.Turns,
			Pairing: h.Gate.Pairings, Policy: h.Gate.Policy,
			Debounce: cfg.WeCom.Debounce.Duration, Logger: logger,
			Media: client, Uploads: h.Files, ASR: c.recognizer,
			Vision:        func() bool { return h.Config().LLM.Vision },
			ProgressAfter: func() time.Duration { return h.Config().WeCom.ProgressAfter.Duration },
		})
		c.handler.Stored = conv.Wake
	} else {
		// Callbacks are still acknowledged and kept; they are answered
		// once the pipeline starts (after the cause is fixed).
		logger.Error("wecom messages are stored but not answered: the conversation pipeline is unavailable", "err", h.Turns.Err())
	}
	c.proc = conv
	if fl := h.Fleet; fl != nil {
		fl.Handle(Channel, c.fromFleet)
		if fl.Ingress() {
			c.handler.Fleet = fl
		} else {
			c.handler.NotIngress = true
		}
		logger.Info("wecom channel in a fleet", "box", fl.Box(), "ingress", fl.Ingress())
	}
	logger.Info("wecom channel started", "agent_id", cfg.WeCom.AgentID, "debounce", cfg.WeCom.Debounce.Duration,
		"dm_policy", cfg.Security.DMPolicy)
	return c, nil
}

// recognizer is the loaded speech recogniser, or nil.
func (c *App) recognizer() Recognizer {
	if c.host.Models != nil {
		if r := c.host.Models.Recognizer(); r != nil {
			return r
		}
	}
	return nil
}

// Name is "wecom".
func (c *App) Name() string { return Channel }

// Routes serve the callback (GET: URL verification, POST: messages).
func (c *App) Routes() []channel.Route {
	return []channel.Route{{Pattern: "/wecom/callback", Handler: c.handler}}
}

// Run runs the inbox processor and the outbox until ctx ends. A turn in
// flight when ctx ends stays pending and runs again after the restart; a
// send in flight is recorded.
func (c *App) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	if c.proc != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.proc.Run(ctx)
		}()
	}
	err := c.outbox.Run(ctx)
	cancel() // the processor stops with the outbox it feeds
	wg.Wait()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("wecom outbox stopped: %w", err)
	}
	return nil
}

// Send queues text for a WeCom user (the message tool, jobs, notices).
func (c *App) Send(ctx context.Context, to, text string) error {
	to = strings.TrimPrefix(to, Channel+":")
	if to == "" || strings.TrimSpace(text) == "" {
		return errors.New("message: a recipient and a text are required")
	}
	return c.outbox.Enqueue(ctx, to, text)
}

// SendMedia uploads a file (image, file, video) and queues it, or queues a
// link card, in order with the user's text replies (the send_* tools'
// path).
func (c *App) SendMedia(ctx context.Context, to string, m turn.Media) error {
	return c.toolDeps().sendMedia(ctx, strings.TrimPrefix(to, Channel+":"), m)
}

// deliver joins a running turn's replies (Processor.Deliver) or goes to
// the outbox.
func (c *App) deliver(ctx context.Context, to string, m OutMedia) error {
	if c.proc != nil {
		return c.proc.Deliver(ctx, to, m)
	}
	return c.outbox.EnqueueMedia(ctx, to, m)
}

// Tools are send_image, send_file, send_video and send_link on the
// callers' folders.
func (c *App) Tools() []tools.Tool {
	if c.host.Spaces == nil {
		return nil
	}
	return MediaTools(c.toolDeps())
}

// toolDeps are the media tools' (and SendMedia's) way out: WeCom's upload
// and the channel's delivery.
func (c *App) toolDeps() ToolDeps {
	d := ToolDeps{
		Recipients: c.host.Recipients,
		Upload: func(ctx context.Context, kind, name string, r io.Reader, size int64) (string, error) {
			return c.client.UploadMedia(ctx, kind, name, r, size)
		},
		Deliver: c.deliver,
	}
	if sp := c.host.Spaces; sp != nil {
		d.Open = sp.Open
	}
	return d
}

// fromFleet takes a message of conversation conv from the fleet's stream
// into the local inbox (deduplicated by its key, as a callback is).
func (c *App) fromFleet(ctx context.Context, conv string, payload []byte) error {
	var m wx.Message
	if err := json.Unmarshal(payload, &m); err != nil {
		return fmt.Errorf("%w: %v", fleet.ErrRejected, err)
	}
	if m.FromUserName == "" || !Known(m.MsgType) || FleetConversation(&m) != conv {
		return fmt.Errorf("%w: a %q message from %q on the subject of %q", fleet.ErrRejected, clip.String(m.MsgType, 32), clip.String(m.FromUserName, 64), conv)
	}
	fresh, err := c.inbox.Put(ctx, &m)
	if err != nil {
		return err
	}
	if fresh && c.proc != nil {
		c.proc.Wake()
	}
	return nil
}

// Outbox is the channel's outbox (tests, stats).
func (c *App) Outbox() *Outbox { return c.outbox }
