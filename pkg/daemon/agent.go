package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"agent/pkg/admin"
	"agent/pkg/agent"
	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/embed"
	"agent/pkg/llm"
	"agent/pkg/localmodels"
	"agent/pkg/memory"
	"agent/pkg/recipient"
	"agent/pkg/runner"
	"agent/pkg/session"
	"agent/pkg/tools"
	"agent/pkg/workspace"
)

// brain is the conversation pipeline: sessions, tools, the LLM client, the
// agent loop and the per-key runner.
type brain struct {
	sessions *session.Store
	prompt   *agent.Prompt
	spaces   *workspace.Spaces
	runner   *runner.Runner
	conv     *conversation.Service
	memory   *memory.Store
	compress *memory.Compressor
	mcp      *mcpTools
	sched    *schedPart // pkg/daemon/scheduler.go
}

// Runner sizing for the 2 GB budget: at most this many turns run at once
// (each holds a session window and tool output in memory).
const maxConcurrentTurns = 4

func (d *Daemon) startBrain(cfg *config.Config) (b *brain, err error) {
	b = &brain{sessions: session.New(d.store.DB(), d.now)}
	defer func() {
		if err != nil {
			b.close(context.Background())
		}
	}()
	// Each user scope has its own folder; the prompt files, skills and
	// shared/ are changed by owners only (pkg/workspace).
	spaces, err := workspace.Open(workspace.Config{
		Dir:       cfg.Agent.Workspace,
		Quota:     func() int64 { return int64(d.config().Agent.WorkspaceQuotaMB) << 20 },
		MarkerDir: cfg.Agent.StateDir,
		Limits:    tools.DefaultLimits,
		IsOwner:   d.callerIsOwner,
		Logger:    d.logger.With("component", "workspace"),
	})
	if err != nil {
		return nil, fmt.Errorf("agent.workspace %s: %w", cfg.Agent.Workspace, err)
	}
	b.spaces = spaces
	reg := tools.NewRegistry()
	for _, t := range spaces.Tools() {
		if err := reg.Register(t); err != nil {
			return nil, err
		}
	}
	if err := reg.Register(agent.MessageTool(d.recipients(), d.sendOut)); err != nil {
		return nil, err
	}
	for _, t := range d.wecomMediaTools(spaces) { // pkg/daemon/wecom.go
		if err := reg.Register(t); err != nil {
			return nil, err
		}
	}
	b.memory = memory.New(d.store.DB(), memory.Config{
		DedupThreshold: cfg.Memory.DedupThreshold,
		TopK:           cfg.Memory.RetrievalTopK,
		Location:       cfg.Location(),
	}, d.logger, d.now)
	d.memoryMetrics(b.memory)
	for _, t := range b.memory.Tools() {
		if err := reg.Register(t); err != nil {
			return nil, err
		}
	}
	lc := llm.FromConfig(cfg.LLM)
	lc.Logger = d.logger // the client adds component=llm
	client, err := llm.New(lc)
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	b.prompt = agent.NewPrompt(cfg.Agent.Workspace, d.logger.With("component", "prompt"))
	b.compress = memory.NewCompressor(memory.CompressorConfig{
		SessionMax: cfg.Memory.SessionMaxMessages,
		Overlap:    cfg.Memory.CompressionOverlap,
		Model:      cfg.LLM.Model,
	}, b.memory, client, b.sessions, d.logger)
	b.compress.Start()
	ag := agent.New(agent.ConfigFrom(cfg), agent.Deps{
		LLM: client, Tools: reg, Sessions: b.sessions, Prompt: b.prompt, Memory: b.memory,
		OnTurn: b.compress.Notify, Logger: d.logger, Now: d.now,
		Scrub: d.opts.Scrubber.Scrub, // tool errors are redacted like the logs (nil-safe)
	})
	b.runner = runner.New(runner.Config{MaxConcurrent: maxConcurrentTurns}, d.logger)
	b.conv = conversation.New(conversation.Deps{
		Runner: b.runner, Agent: d.observeTurns(ag), Sessions: b.sessions, Memory: b.memory, Closed: b.compress.Notify,
		Model: cfg.LLM.Model, Logger: d.logger,
	})
	if err := d.startMCP(b, reg, cfg); err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	if err := d.startScheduler(b, reg, cfg); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if err := d.startSelfCheck(b, reg); err != nil { // pkg/daemon/selfcheck.go
		return nil, fmt.Errorf("self-check: %w", err)
	}
	return b, nil
}

// embedderSource is what the local models offer memory (localmodels.Set).
type embedderSource interface {
	Embedder() *embed.Embedder
}

// attachEmbedder switches memory to semantic retrieval once the embedding
// model has loaded; without it memory stays keyword-only.
func (d *Daemon) attachEmbedder(ctx context.Context) {
	src, ok := d.opts.Models.(embedderSource)
	if !ok || d.brain == nil {
		return
	}
	e := src.Embedder()
	if e == nil {
		d.logger.Warn("memory retrieval is keyword-only (FTS5): the embedding model is not loaded")
		return
	}
	if err := d.brain.memory.SetEmbedder(ctx, e, localmodels.EmbeddingID(d.config())); err != nil {
		d.logger.Error("memory cannot use the embedding model; keyword-only", "err", err)
		return
	}
	d.logger.Info("memory retrieval is semantic + keyword", "dim", e.Dim())
}

func (b *brain) close(ctx context.Context) error {
	var errs []error
	errs = append(errs, b.sched.close(ctx)) // before the runner: llm_task turns use it
	if b.runner != nil {
		errs = append(errs, b.runner.Close(ctx))
	}
	if b.compress != nil {
		errs = append(errs, b.compress.Close(ctx))
	}
	if b.mcp != nil {
		errs = append(errs, b.mcp.close(ctx))
	}
	if b.memory != nil {
		b.memory.Close() // before the models close
	}
	return errors.Join(errs...)
}

// callerIsOwner reports whether a tool call comes from an owner: one of
// agent.owners, or the operator on the admin channel (agentctl over the
// 0600 admin socket).
func (d *Daemon) callerIsOwner(call tools.Call) bool {
	return d.recipients().Owner(recipient.Caller{Channel: call.Channel, User: call.User})
}

// recipients is the rule for whom a tool call may address (it follows
// reloads of agent.owners and security.owner_broadcast).
func (d *Daemon) recipients() recipient.Policy {
	return recipient.Policy{
		IsOwner:        d.isOwner,
		OwnerBroadcast: func() bool { return d.config().Security.OwnerBroadcast },
	}
}

// sendOut delivers a message the model asked to send to someone: WeCom
// through its outbox (pkg/daemon/wecom.go); no other channel is connected.
// Callers check the recipient (recipients); as a last guard nothing goes
// to many people at once unless security.owner_broadcast allows it.
func (d *Daemon) sendOut(ctx context.Context, channel, to, text string) error {
	if recipient.Broadcast(to) && !d.config().Security.OwnerBroadcast {
		return fmt.Errorf("%w: %q addresses many people at once (security.owner_broadcast is off)", recipient.ErrRefused, to)
	}
	if channel == "wecom" {
		return d.sendWeCom(ctx, to, text)
	}
	return fmt.Errorf("channel %q is not connected on this agent", channel)
}

// Send implements admin.Backend: one message through the same pipeline a
// WeCom or voice message takes, as user req.To on the admin channel.
func (d *Daemon) Send(ctx context.Context, req admin.SendRequest) (admin.SendResult, error) {
	if d.brain == nil {
		return admin.SendResult{}, fmt.Errorf("the conversation pipeline is unavailable: %v", d.brainErr)
	}
	if req.Channel == "" {
		req.Channel = "admin"
	}
	if req.Channel != "admin" {
		return admin.SendResult{}, fmt.Errorf("channel %q: only the admin channel can be driven from agentctl", req.Channel)
	}
	if req.To == "" || req.Text == "" {
		return admin.SendResult{}, errors.New("send needs a user (--to) and a text")
	}
	var mu sync.Mutex
	var res admin.SendResult
	done, err := d.brain.conv.Handle(ctx, conversation.Inbound{Channel: req.Channel, Sender: req.To, Text: req.Text},
		func(_ context.Context, text string) error {
			mu.Lock()
			res.Replies = append(res.Replies, text)
			mu.Unlock()
			return nil
		})
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		if len(res.Replies) > 0 {
			return res, nil // the user was told (queue full)
		}
		return res, err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return res, ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	return res, nil
}

// Sessions implements admin.Backend.
func (d *Daemon) Sessions(ctx context.Context) ([]admin.Session, error) {
	if d.brain == nil {
		return nil, fmt.Errorf("the conversation pipeline is unavailable: %v", d.brainErr)
	}
	list, err := d.brain.sessions.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Session, 0, len(list))
	for _, s := range list {
		out = append(out, admin.Session{ID: s.ID, Key: string(s.Key), Messages: s.Messages,
			CreatedAt: s.CreatedAt, LastActivity: s.LastActivity, Open: s.Open()})
	}
	return out, nil
}
