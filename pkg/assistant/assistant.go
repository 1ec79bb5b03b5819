// Package assistant is the conversation pipeline, built from configuration
// and a few dependencies the host provides: sessions, the tool registry,
// the LLM client, the agent loop, long-term memory and its compressor, the
// per-conversation runner, the conversation service, MCP servers, the
// scheduler, the self_check and diagnose tools and the turn observer. It
// knows no channel: inbound messages arrive through Conversation (or Ask),
// and everything it sends unprompted (the message tool, scheduled jobs,
// self-check notices) goes out through Deps.Send, which the host routes by
// channel name.
package assistant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"agent/pkg/agent"
	"agent/pkg/clock"
	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/customtool"
	"agent/pkg/egress"
	"agent/pkg/embed"
	"agent/pkg/errlog"
	"agent/pkg/health"
	"agent/pkg/llm"
	"agent/pkg/logging"
	"agent/pkg/memory"
	"agent/pkg/metrics"
	"agent/pkg/netguard"
	"agent/pkg/recipient"
	"agent/pkg/redact"
	"agent/pkg/runner"
	"agent/pkg/session"
	"agent/pkg/skills"
	"agent/pkg/store"
	"agent/pkg/tools"
	"agent/pkg/toolselect"
	"agent/pkg/workspace"
)

// Deps are what the host gives the assistant.
type Deps struct {
	Store  *store.Store
	Config func() *config.Config // the configuration in force (follows reloads)
	Env    config.Env            // reload_mcp re-reads the file; nil: os.LookupEnv
	Logger *slog.Logger
	// Scrubber redacts secrets from stored tool and job errors (nil-safe).
	Scrubber *logging.Scrubber
	Clock    clock.Clock
	Metrics  *metrics.Registry
	Health   *health.Checker // readiness checks of MCP and the scheduler
	// ErrLog is the database error log the self-check reads (nil: none).
	ErrLog *errlog.Recorder
	// Send delivers text to user to of a channel ("wecom", "alice"); the
	// host's channel set. Callers have checked the recipient.
	Send func(ctx context.Context, channel, to, text string) error
	// Fast reports whether a channel's turns are latency-first (voice and
	// hardware devices): a scheduled task of one of its users runs as
	// their own turns do. nil: none is.
	Fast func(channel string) bool
	// Components are the host's component states for the self-check.
	Components func() map[string]string
	Started    time.Time
	SysRoot    string // sysfs for the self-check's thermal zones; "" = /sys
	// Bwrap is the bubblewrap binary of the sandbox; "" finds bwrap in
	// PATH.
	Bwrap string
	// Resolver looks up the names web_fetch dials (nil: the system's);
	// tests point names at local servers with it.
	Resolver netguard.Resolver
	// Egress is the one way out (pkg/egress): the model, web and MCP
	// connections go through it; nil: dialled directly (tests).
	Egress *egress.Ledger
}

// Assistant is the running pipeline. A zero Assistant made by Failed
// answers every call with the reason the pipeline did not start.
type Assistant struct {
	d      Deps
	err    error // why the pipeline is unavailable (Failed)
	logger *slog.Logger
	clock  clock.Clock

	sessions *session.Store
	prompt   *agent.Prompt
	spaces   *workspace.Spaces
	reg      *tools.Registry
	chooser  *toolselect.Selector
	runner   *runner.Runner
	conv     *conversation.Service
	memory   *memory.Store
	compress *memory.Compressor
	mcp      *mcpPart
	sched    *schedPart
	backlog  *backlogPart
	cache    *cachePart
	checks   *selfCheckPart
	sandbox  *sandboxPart
	custom   *customtool.Manager
	skills   *atomic.Pointer[skills.Set] // rebuilt on reload ([skills.entries] env counts)
	webMu    sync.Mutex                  // serialises reloads of the web tools
	webCfg   config.Web                  // the [web] the web tools were built from (webMu)
}

// maxConcurrentTurns sizes the runner for the 2 GB budget: at most this
// many turns run at once (each holds a session window and tool output).
const maxConcurrentTurns = 4

// Failed is an assistant whose pipeline did not start: every call about
// conversations says why; the self-check still runs (daily, with notices
// to the owners), since that is when they most need it.
func Failed(err error, cfg *config.Config, d Deps) *Assistant {
	a := prepare(cfg, d)
	a.err = err
	a.checks = newSelfCheckPart(a)
	return a
}

// prepare fills in d's defaults.
func prepare(cfg *config.Config, d Deps) *Assistant {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	d.Clock = clock.Or(d.Clock)
	if d.Metrics == nil {
		d.Metrics = metrics.NewRegistry()
	}
	if d.Health == nil {
		d.Health = health.New(2*time.Second, d.Clock.Now)
	}
	if d.Config == nil {
		d.Config = func() *config.Config { return cfg }
	}
	if d.Send == nil {
		d.Send = func(_ context.Context, channel, _, _ string) error {
			return fmt.Errorf("channel %q is not connected on this agent", channel)
		}
	}
	return &Assistant{d: d, logger: d.Logger, clock: d.Clock}
}

// New builds the pipeline from cfg. On error everything built so far is
// closed.
func New(cfg *config.Config, d Deps) (_ *Assistant, err error) {
	a := prepare(cfg, d)
	d = a.d
	now := d.Clock.Now
	a.sessions, a.reg = session.New(d.Store.DB(), now), tools.NewRegistry()
	defer func() {
		if err != nil {
			a.Close(context.Background()) // what was started: compressor, MCP servers
		}
	}()
	// Each user scope has its own folder; the prompt files, skills and
	// shared/ are changed by owners only (pkg/workspace).
	a.spaces, err = workspace.Open(workspace.Config{
		Dir:          cfg.Agent.Workspace,
		Quota:        func() int64 { return int64(a.config().Agent.WorkspaceQuotaMB) << 20 },
		Reserve:      func() int64 { return int64(a.config().Agent.DiskReserveMB) << 20 },
		MarkerDir:    cfg.Agent.StateDir,
		Limits:       tools.DefaultLimits,
		IsOwner:      a.callerIsOwner,
		SkillAllowed: a.mayReadSkillFolder,
		Logger:       d.Logger.With("component", "workspace"),
	})
	if err != nil {
		return nil, fmt.Errorf("agent.workspace %s: %w", cfg.Agent.Workspace, err)
	}
	if err := a.Register(a.spaces.Tools()...); err != nil {
		return nil, err
	}
	if err := a.Register(agent.MessageTool(a.Recipients(), a.sendOut)); err != nil {
		return nil, err
	}
	a.sandbox = a.newSandboxPart(cfg) // its tools come with Start, once it proved to work
	if a.custom, err = a.openCustomTools(a.spaces.Dir()); err != nil {
		return nil, err
	}
	if err := a.Register(a.documentTool()); err != nil {
		return nil, err
	}
	if err := a.registerWeb(cfg); err != nil {
		return nil, err
	}
	a.memory = memory.New(d.Store.DB(), memory.Config{
		DedupThreshold: cfg.Memory.DedupThreshold,
		TopK:           cfg.Memory.RetrievalTopK,
		Location:       cfg.Location(),
	}, d.Logger, now)
	a.memoryMetrics()
	if err := a.Register(a.memory.Tools()...); err != nil {
		return nil, err
	}
	lc := llmConfig(cfg.LLM)
	lc.Logger = d.Logger // the client adds component=llm
	if d.Egress != nil {
		lc.HTTPClient = &http.Client{Transport: d.Egress.Transport(egress.LLM)}
	}
	raw, err := llm.New(lc)
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	// Every request to the model passes [privacy] redact (pkg/redact).
	// Placeholders are kept per conversation (redactScoped names it), and
	// only the tools restoresValues names get the real values.
	client := &redact.Client{Next: raw, Kinds: a.redactKinds, Counted: a.countRedactions,
		Restore: restoresValues, Conversations: redact.NewConversations(redact.ConversationsConfig{Now: now})}
	a.prompt = agent.NewPrompt(cfg.Agent.Workspace, d.Logger.With("component", "prompt"))
	a.prompt.CountStripped(a.countStripped)
	a.skills = new(atomic.Pointer[skills.Set])
	a.skills.Store(a.newSkills(cfg))
	a.prompt.SetSkills(func(channel, user string) string {
		call := tools.Call{Channel: channel, User: user}
		return a.Skills().IndexFor(func(name string) bool { return a.mayUseSkill(call, name) })
	})
	if err := a.Register(a.getSkillTool()); err != nil {
		return nil, err
	}
	a.compress = memory.NewCompressor(memory.CompressorConfig{
		SessionMax: cfg.Memory.SessionMaxMessages,
		Overlap:    cfg.Memory.CompressionOverlap,
		Model:      cfg.LLM.Model,
		Clock:      d.Clock,
	}, a.memory, client, a.sessions, d.Logger)
	a.compress.Start()
	a.checks = newSelfCheckPart(a)
	a.chooser = toolselect.New(toolselect.Config{
		Registry: a.reg,
		IsOwner:  func(channel, user string) bool { return a.callerIsOwner(tools.Call{Channel: channel, User: user}) },
		Embedder: func() toolselect.Embedder {
			if e := a.cache.emb.Load(); e != nil {
				return e
			}
			return nil
		},
		Logger: d.Logger.With("component", "toolselect"),
	})
	if err := a.Register(a.chooser.Tool()); err != nil {
		return nil, err
	}
	ag := agent.New(agent.ConfigFrom(cfg), agent.Deps{
		LLM: client, Tools: a.reg, Chooser: a.chooser, Sessions: a.sessions, Prompt: a.prompt, Memory: a.memory,
		OnTurn: a.compress.Notify, Logger: d.Logger, Now: now, Clock: d.Clock,
		Scrub:    d.Scrubber.Scrub, // tool errors are redacted like the logs (nil-safe)
		Stripped: a.countStripped,
	})
	a.runner = runner.New(runner.Config{MaxConcurrent: maxConcurrentTurns, Clock: d.Clock}, d.Logger)
	a.backlog = &backlogPart{}
	a.backlog.b = a.newBacklog()
	a.cache = a.newCommandCache()
	a.conv = conversation.New(conversation.Deps{
		Runner: a.runner, Agent: a.afterFirstProbe(a.checks.observe(redactScoped{ag})), Sessions: a.sessions, Memory: a.memory, Closed: a.compress.Notify,
		Model: cfg.LLM.Model, Logger: d.Logger, Clock: d.Clock,
		Commands:  map[string]conversation.Command{"/tools": a.toolsCommand},
		Backlog:   a.backlog.b,
		Cache:     a.cache.c,
		ModelDown: func() bool { return raw.BreakerState() == "open" },
	})
	if err := a.startMCP(cfg); err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	if err := a.startScheduler(cfg); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if err := a.checks.register(); err != nil {
		return nil, fmt.Errorf("self-check: %w", err)
	}
	return a, nil
}

// Err is why the pipeline is unavailable (nil when it runs).
func (a *Assistant) Err() error { return a.err }

func (a *Assistant) unavailable() error {
	if a.err != nil {
		return fmt.Errorf("the conversation pipeline is unavailable: %v", a.err)
	}
	return nil
}

// Register adds tools to the registry (a channel's own tools).
func (a *Assistant) Register(ts ...tools.Tool) error {
	if err := a.unavailable(); err != nil {
		return err
	}
	for _, t := range ts {
		if err := a.reg.Register(t); err != nil {
			return err
		}
	}
	return nil
}

// Conversation is where channels hand in messages (nil when unavailable).
func (a *Assistant) Conversation() *conversation.Service { return a.conv }

// Spaces are the users' workspaces (nil when unavailable).
func (a *Assistant) Spaces() *workspace.Spaces { return a.spaces }

// Runner is the per-conversation runner (nil when unavailable).
func (a *Assistant) Runner() *runner.Runner { return a.runner }

func (a *Assistant) config() *config.Config { return a.d.Config() }

// Start restores the scheduled jobs and starts their loop; the host calls
// it once the channels are up, so a job due now finds them connected.
func (a *Assistant) Start(ctx context.Context) error {
	if err := a.unavailable(); err != nil {
		return err
	}
	a.enforceJobRecipients(ctx)
	a.backlog.start(ctx)
	if err := a.sched.s.Start(ctx); err != nil {
		a.d.Health.Register("scheduler", func(context.Context) error { return err })
		return err
	}
	return nil
}

// Reload applies a reloaded configuration (already in force through
// Deps.Config): the workspace prompt files, [mcp_servers], [web] and the
// recipients of stored jobs (owners or owner_broadcast may have changed).
func (a *Assistant) Reload(ctx context.Context, next *config.Config) {
	if a.err != nil {
		return
	}
	changed, err := a.prompt.Reload()
	if err != nil {
		a.logger.Warn("workspace prompt files", "err", err)
	}
	if len(changed) > 0 {
		a.logger.Info("workspace prompt files reloaded", "changed", changed)
	}
	a.skills.Store(a.newSkills(next))           // requirements against the new [skills.entries]
	a.mcp.apply(ctx, next.MCPServers, a.logger) // live: the manager restarts only what changed
	a.reloadWeb()
	a.enforceJobRecipients(ctx)
}

// SetEmbedder switches memory to semantic retrieval once the embedding
// model has loaded (e nil: it stays keyword-only).
func (a *Assistant) SetEmbedder(ctx context.Context, e *embed.Embedder, id string) {
	if a.err != nil {
		return
	}
	if e == nil {
		a.logger.Warn("memory retrieval is keyword-only (FTS5): the embedding model is not loaded")
		return
	}
	a.cache.emb.Store(e) // the command cache needs it whatever memory makes of it
	if err := a.memory.SetEmbedder(ctx, e, id); err != nil {
		a.logger.Error("memory cannot use the embedding model; keyword-only", "err", err)
		return
	}
	a.logger.Info("memory retrieval is semantic + keyword", "dim", e.Dim())
}

// Close stops the pipeline: the scheduler, then the runner (turns in
// flight are cancelled), the compressor and the MCP servers.
func (a *Assistant) Close(ctx context.Context) error {
	if a == nil || a.err != nil {
		return nil
	}
	if a.sandbox != nil {
		a.sandbox.stop(ctx)
	}
	var errs []error
	errs = append(errs, a.sched.close(ctx)) // before the runner: llm_task turns use it
	a.backlog.close()                       // before the runner: it runs held turns on it
	if a.runner != nil {
		errs = append(errs, a.runner.Close(ctx))
	}
	if a.compress != nil {
		errs = append(errs, a.compress.Close(ctx))
	}
	if a.mcp != nil {
		errs = append(errs, a.mcp.close(ctx))
	}
	if a.memory != nil {
		a.memory.Close() // before the models close
	}
	return errors.Join(errs...)
}

// Ask runs one message through the pipeline and collects every reply the
// turn produces. On a refusal (a full queue) the replies telling the user
// so come back with the error.
func (a *Assistant) Ask(ctx context.Context, in conversation.Inbound) ([]string, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var replies []string
	collect := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(replies)
	}
	done, err := a.conv.Handle(ctx, in, func(_ context.Context, text string) error {
		mu.Lock()
		replies = append(replies, text)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return collect(), err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return collect(), ctx.Err()
	}
	return collect(), nil
}

// IsOwner reports whether user ("wecom:alice") is one of agent.owners.
func (a *Assistant) IsOwner(user string) bool {
	return slices.Contains(a.config().Agent.Owners, user)
}

// Recipients is the rule for whom a tool call may address (it follows
// reloads of agent.owners and security.owner_broadcast).
func (a *Assistant) Recipients() recipient.Policy {
	return recipient.Policy{
		IsOwner:        a.IsOwner,
		OwnerBroadcast: func() bool { return a.config().Security.OwnerBroadcast },
	}
}

// callerIsOwner reports whether a tool call comes from an owner: one of
// agent.owners, or the operator on the admin channel.
func (a *Assistant) callerIsOwner(call tools.Call) bool {
	return a.Recipients().Owner(recipient.Caller{Channel: call.Channel, User: call.User})
}

// trusted reports whether the caller may see internals: an owner, or the
// operator on the admin channel (agentctl, over the 0600 socket).
func (a *Assistant) trusted(call tools.Call) bool {
	return call.Channel == recipient.AdminChannel || a.IsOwner(call.Channel+":"+call.User)
}

// redactKinds is [privacy] redact as in force (reloads apply to the next
// request).
func (a *Assistant) redactKinds() []redact.Kind {
	kinds, _ := redact.ParseKinds(a.config().Privacy.Redact) // validated at load
	return kinds
}

// countRedactions counts the values kept from the model, by kind.
func (a *Assistant) countRedactions(n map[redact.Kind]int) {
	if a.d.Egress != nil {
		byName := make(map[string]int, len(n))
		for k, v := range n {
			byName[string(k)] = v
		}
		a.d.Egress.Redacted(byName)
	}
	if a.d.Metrics == nil {
		return
	}
	for k, v := range n {
		a.d.Metrics.Counter("agent_redactions_total", "Personal data values replaced by placeholders before a request went to the model ([privacy] redact), by kind.",
			metrics.Labels{"kind": string(k)}).Add(float64(v))
	}
}

// countStripped counts the invisible characters (pkg/invisible) taken
// out of text on its way to the model, by where it came from.
func (a *Assistant) countStripped(source string, n int) {
	if a.d.Metrics == nil || n <= 0 {
		return
	}
	a.d.Metrics.Counter("agent_invisible_stripped_total", "Invisible characters (controls, zero-width, bidi, tag and other default-ignorable code points) removed from text before it reached the model, by source: tool_result, tool_spec, user_message, prompt, workspace_file, skill, mcp.",
		metrics.Labels{"source": source}).Add(float64(n))
}

// sendOut delivers a message the model or a job asked to send. Callers
// check the recipient (Recipients); as a last guard nothing goes to many
// people at once unless security.owner_broadcast allows it.
func (a *Assistant) sendOut(ctx context.Context, channel, to, text string) error {
	if recipient.Broadcast(to) && !a.config().Security.OwnerBroadcast {
		return fmt.Errorf("%w: %q addresses many people at once (security.owner_broadcast is off)", recipient.ErrRefused, to)
	}
	return a.d.Send(ctx, channel, to, text)
}

// NotifyOwners sends text to every agent.owners entry ("wecom:zhangsan")
// on its channel.
func (a *Assistant) NotifyOwners(ctx context.Context, text string) {
	owners := a.config().Agent.Owners
	if len(owners) == 0 {
		a.logger.Warn("agent.owners is empty; nobody was told", "notice", text)
		return
	}
	for _, o := range owners {
		channel, user, ok := strings.Cut(o, ":")
		if !ok {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := a.sendOut(sctx, channel, user, text); err != nil {
			a.logger.Warn("self-check notice not delivered", "owner", o, "err", err)
		}
		cancel()
	}
}
