package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"agent/pkg/admin"
	"agent/pkg/asr"
	wch "agent/pkg/channel/wecom"
	"agent/pkg/config"
	"agent/pkg/pairing"
	"agent/pkg/tools"
	wx "agent/pkg/wecom"
	"agent/pkg/workspace"
)

// wecomChannel is the running WeCom channel: the callback handler, the
// inbox processor and the outbox sender.
type wecomChannel struct {
	handler http.Handler
	client  *wx.Client
	outbox  *wch.Outbox
	proc    *wch.Processor
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// wecomSendAttempts is how often the API client itself retries a call
// (short pauses); the outbox retries beyond that with persisted backoff.
const wecomSendAttempts = 2

// startWeCom starts the channel when wecom.enabled. A failure disables the
// channel, not the daemon; health says why.
func (d *Daemon) startWeCom(cfg *config.Config) {
	if !cfg.WeCom.Enabled {
		return
	}
	logger := d.logger.With("component", "wecom")
	crypto, err := wx.NewCrypto(cfg.WeCom.Token, cfg.WeCom.EncodingAESKey, cfg.WeCom.CorpID)
	if err != nil {
		logger.Error("wecom channel unavailable", "err", err)
		d.checker.Register("wecom", func(context.Context) error { return err })
		return
	}
	client := &wx.Client{
		BaseURL:     cfg.WeCom.APIBase,
		CorpID:      cfg.WeCom.CorpID,
		CorpSecret:  cfg.WeCom.CorpSecret,
		AgentID:     int64(cfg.WeCom.AgentID),
		Logger:      logger,
		MaxAttempts: wecomSendAttempts,
	}
	db := d.store.DB()
	inbox := wch.NewInbox(db, nil)
	ocfg := wch.OutboxConfig{API: client, Logger: logger}
	if d.opts.Scrubber != nil {
		ocfg.Scrub = d.opts.Scrubber.Scrub // last_error is redacted like the logs
	}
	c := &wecomChannel{client: client, outbox: wch.NewOutbox(db, ocfg)}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	h := &wch.Handler{Crypto: crypto, Inbox: inbox, Logger: logger}
	if d.brain != nil {
		c.proc = wch.NewProcessor(wch.ProcessorConfig{
			Inbox: inbox, Outbox: c.outbox, Conversation: d.brain.conv,
			Pairing: pairing.New(db, d.now), Policy: d.dmPolicy,
			Debounce: cfg.WeCom.Debounce.Duration, Logger: logger,
			Media: client, Uploads: d.brain.spaces, ASR: d.wecomRecognizer,
			Vision: func() bool { return d.config().LLM.Vision },
		})
		h.Stored = c.proc.Wake
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.proc.Run(ctx)
		}()
	} else {
		// Callbacks are still acknowledged and kept; they are answered
		// once the pipeline starts (after the cause is fixed).
		logger.Error("wecom messages are stored but not answered: the conversation pipeline is unavailable", "err", d.brainErr)
	}
	c.handler = h
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := c.outbox.Run(ctx); err != nil {
			logger.Error("wecom outbox stopped", "err", err)
		}
	}()
	d.wecom = c
	logger.Info("wecom channel started", "agent_id", cfg.WeCom.AgentID, "debounce", cfg.WeCom.Debounce.Duration,
		"dm_policy", cfg.Security.DMPolicy)
}

// stopWeCom stops the processor (a turn in flight is left pending, to run
// again after the restart) and the sender (a send in flight is recorded).
func (d *Daemon) stopWeCom(ctx context.Context) {
	if d.wecom == nil {
		return
	}
	d.wecom.cancel()
	done := make(chan struct{})
	go func() { d.wecom.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		d.logger.Warn("wecom channel did not stop in time")
	}
}

// wecomRoutes registers /wecom/callback when the channel runs.
func (d *Daemon) wecomRoutes(mux *http.ServeMux) {
	if d.wecom != nil {
		mux.Handle("/wecom/callback", d.wecom.handler)
	}
}

// dmPolicy is the DM policy in force (it follows reloads).
func (d *Daemon) dmPolicy() pairing.Policy {
	cfg := d.config()
	return pairing.Policy{Mode: cfg.Security.DMPolicy, AllowFrom: cfg.Security.AllowFrom, Owners: cfg.Agent.Owners}
}

// sendWeCom queues a message to a WeCom user (the message tool).
func (d *Daemon) sendWeCom(ctx context.Context, to, text string) error {
	if d.wecom == nil {
		return errors.New("the wecom channel is not enabled on this agent")
	}
	to = strings.TrimPrefix(to, wch.Channel+":")
	if to == "" || strings.TrimSpace(text) == "" {
		return errors.New("message: a recipient and a text are required")
	}
	return d.wecom.outbox.Enqueue(ctx, to, text)
}

// wecomASR is what the local models offer voice messages (localmodels.Set).
type wecomASR interface {
	Recognizer() *asr.Recognizer
}

// wecomRecognizer is the loaded speech recogniser, or nil.
func (d *Daemon) wecomRecognizer() wch.Recognizer {
	if src, ok := d.opts.Models.(wecomASR); ok {
		if r := src.Recognizer(); r != nil {
			return r
		}
	}
	return nil
}

// wecomMediaTools are send_image, send_file, send_video and send_link on
// the callers' folders; they work once the channel runs.
func (d *Daemon) wecomMediaTools(spaces *workspace.Spaces) []tools.Tool {
	return wch.MediaTools(wch.ToolDeps{
		Open:       spaces.Open,
		Recipients: d.recipients(),
		Upload: func(ctx context.Context, kind, name string, r io.Reader, size int64) (string, error) {
			if d.wecom == nil {
				return "", errors.New("the wecom channel is not enabled on this agent")
			}
			return d.wecom.client.UploadMedia(ctx, kind, name, r, size)
		},
		Deliver: func(ctx context.Context, to string, m wch.OutMedia) error {
			switch {
			case d.wecom == nil:
				return errors.New("the wecom channel is not enabled on this agent")
			case d.wecom.proc != nil:
				return d.wecom.proc.Deliver(ctx, to, m)
			}
			return d.wecom.outbox.EnqueueMedia(ctx, to, m)
		},
	})
}

func (d *Daemon) pairings() *pairing.Store { return pairing.New(d.store.DB(), d.now) }

func adminPairing(e pairing.Entry) admin.Pairing {
	p := admin.Pairing{User: e.User, Code: e.Code, Since: e.Since, ApprovedBy: e.By, State: "pending"}
	if e.Approved {
		p.State = "approved"
	}
	return p
}

func pairingErr(err error) error {
	if errors.Is(err, pairing.ErrNotFound) {
		return fmt.Errorf("%w: %v", admin.ErrNotFound, err)
	}
	return err
}

// PairingList implements admin.PairingBackend.
func (d *Daemon) PairingList(ctx context.Context) ([]admin.Pairing, error) {
	list, err := d.pairings().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Pairing, len(list))
	for i, e := range list {
		out[i] = adminPairing(e)
	}
	return out, nil
}

// PairingApprove implements admin.PairingBackend; a WeCom user is told.
func (d *Daemon) PairingApprove(ctx context.Context, code string) (admin.Pairing, error) {
	e, err := d.pairings().Approve(ctx, code, "agentctl")
	if err != nil {
		return admin.Pairing{}, pairingErr(err)
	}
	d.logger.Info("pairing approved by the operator", "user", e.User)
	if user, ok := strings.CutPrefix(e.User, wch.Channel+":"); ok && d.wecom != nil {
		if err := d.wecom.outbox.Enqueue(ctx, user, pairing.ApprovedText); err != nil {
			d.logger.Warn("could not tell the approved user", "user", e.User, "err", err)
		}
	}
	return adminPairing(e), nil
}

// PairingRevoke implements admin.PairingBackend.
func (d *Daemon) PairingRevoke(ctx context.Context, user string) (admin.Pairing, error) {
	e, err := d.pairings().Revoke(ctx, user)
	if err != nil {
		return admin.Pairing{}, pairingErr(err)
	}
	d.logger.Info("pairing revoked by the operator", "user", e.User)
	if d.voice != nil {
		if n := d.voice.Disconnect(e.User); n > 0 {
			d.logger.Info("voice connections of a revoked device closed", "user", e.User, "connections", n)
		}
	}
	return adminPairing(e), nil
}
