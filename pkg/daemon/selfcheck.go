package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"agent/pkg/agent"
	"agent/pkg/clock"
	"agent/pkg/conversation"
	"agent/pkg/diagnose"
	"agent/pkg/errlog"
	"agent/pkg/health"
	"agent/pkg/llm"
	"agent/pkg/metrics"
	"agent/pkg/scheduler"
	"agent/pkg/selfcheck"
	"agent/pkg/session"
	"agent/pkg/tools"
)

// Self-repair (issue 8 items 4-6): the error log in the database
// (pkg/errlog), turn statistics and their metrics, the self_check and
// diagnose tools, the daily self-check at 09:00 local with notices to
// agent.owners, and the watchdog's liveness probes (database writable,
// event loop responsive, runner not wedged).

// Tool names.
const (
	ToolSelfCheck = "self_check"
	ToolDiagnose  = "diagnose"
)

// selfCheckHour:selfCheckMinute local is when the daily self-check runs.
const (
	selfCheckHour   = 9
	selfCheckMinute = 0
)

// wedgeGrace is how far past the longest a turn may take (turn timeout
// plus the closing summary's grace) a runner job may run before the
// runner counts as wedged.
const wedgeGrace = 2 * time.Minute

// wedgedAfter is the age of a running job that withholds the watchdog.
const wedgedAfter = agent.DefaultTurnTimeout + agent.DefaultFinalGrace + wedgeGrace

// healthPart is the daemon's self-repair state.
type healthPart struct {
	rec   *errlog.Recorder
	turns *selfcheck.TurnStats
	run   sync.Mutex // one self-check at a time

	turnLatency *metrics.Histogram
	turnsOK     *metrics.Counter
	turnsFailed *metrics.Counter
	toolCalls   *metrics.Counter
	toolFails   *metrics.Counter

	hbMu   sync.Mutex
	lastHB time.Time // last successful heartbeat write
}

// startErrorLog keeps warnings and errors in error_log from here on: the
// daemon's logger is wrapped (records still reach the journal first).
// The returned function flushes and stops the writer.
func (d *Daemon) startErrorLog() func() {
	scrub := func(s string) string { return s }
	if d.opts.Scrubber != nil {
		scrub = d.opts.Scrubber.Scrub
	}
	h := &healthPart{turns: selfcheck.NewTurnStats()}
	h.rec = errlog.New(d.store.DB(), errlog.Options{Now: d.now, Scrub: scrub})
	d.health = h
	d.logger = slog.New(h.rec.Handler(d.logger.Handler()))
	d.metrics.GaugeFunc("agent_error_log_dropped", "Warnings and errors not kept in the database error log (rate limit, full queue) since start.", nil,
		func() float64 { return float64(h.rec.Dropped()) })
	d.metrics.GaugeFunc("agent_error_log_queued", "Warnings and errors waiting to be written to the error log.", nil,
		func() float64 { return float64(h.rec.Queued()) })
	h.turnLatency = d.metrics.Histogram("agent_turn_duration_seconds", "Conversation turn latency (agent loop, including tools).", nil,
		[]float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300})
	h.turnsOK = d.metrics.Counter("agent_turns_total", "Conversation turns by result.", metrics.Labels{"result": "ok"})
	h.turnsFailed = d.metrics.Counter("agent_turns_total", "Conversation turns by result.", metrics.Labels{"result": "failed"})
	h.toolCalls = d.metrics.Counter("agent_tool_calls_total", "Tool calls made by the model.", nil)
	h.toolFails = d.metrics.Counter("agent_tool_failures_total", "Tool calls whose result was an error.", nil)
	for _, kind := range []string{"rate_limited", "server", "unavailable", "bad_request", "auth", "content_filter", "malformed", "timeout", "other"} {
		d.metrics.Counter("agent_llm_errors_total", "Turns ended by a model-service error, by kind.", metrics.Labels{"kind": kind})
	}
	for _, st := range []string{"ok", "failed", "missed", "running"} {
		d.metrics.GaugeFunc("agent_job_runs", "Scheduled job runs recorded (kept 30 days), by status.", metrics.Labels{"status": st},
			d.jobRuns(st))
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		h.rec.Close(ctx)
	}
}

func (d *Daemon) jobRuns(status string) func() float64 {
	return func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var n int64
		if err := d.store.DB().QueryRowContext(ctx, `SELECT count(*) FROM sched_runs WHERE status = ?`, status).Scan(&n); err != nil {
			return -1
		}
		return float64(n)
	}
}

// llmKind names the kind of model-service error err carries, for metrics
// (kind) and the self-check (label, with the HTTP status when there is one).
func llmKind(err error) (kind, label string) {
	var ae *llm.APIError
	if !errors.As(err, &ae) {
		if errors.Is(err, context.DeadlineExceeded) {
			return "timeout", "turn timeout"
		}
		return "", ""
	}
	switch {
	case errors.Is(ae, llm.ErrRateLimited):
		kind = "rate_limited"
	case errors.Is(ae, llm.ErrServer):
		kind = "server"
	case errors.Is(ae, llm.ErrUnavailable):
		kind = "unavailable"
	case errors.Is(ae, llm.ErrBadRequest):
		kind = "bad_request"
	case errors.Is(ae, llm.ErrAuth):
		kind = "auth"
	case errors.Is(ae, llm.ErrContentFilter):
		kind = "content_filter"
	case errors.Is(ae, llm.ErrMalformed):
		kind = "malformed"
	default:
		kind = "other"
	}
	label = ae.Err.Error()
	if ae.Status != 0 {
		label = fmt.Sprintf("HTTP %d", ae.Status)
	}
	return kind, label
}

// observeTurns wraps the agent so every turn and tool call is counted.
func (d *Daemon) observeTurns(next conversation.Turner) conversation.Turner {
	if d.health == nil {
		return next
	}
	return &observedTurner{next: next, d: d, h: d.health}
}

type observedTurner struct {
	next conversation.Turner
	d    *Daemon
	h    *healthPart
}

func (o *observedTurner) Turn(ctx context.Context, in agent.Input, emit func(agent.Event)) (agent.Output, error) {
	// The agent reports tool results only to a verbose caller; ask for
	// them and pass on only what the caller asked for.
	verbose := in.Verbose
	in.Verbose = true
	inner := func(e agent.Event) {
		if e.Kind == agent.EventToolResult {
			o.h.turns.Tool(e.Tool, e.IsError)
			o.h.toolCalls.Inc()
			if e.IsError {
				o.h.toolFails.Inc()
			}
		}
		if emit != nil && (verbose || e.Kind == agent.EventText) {
			emit(e)
		}
	}
	start := time.Now()
	out, err := o.next.Turn(ctx, in, inner)
	took := time.Since(start)
	failed := err != nil && !errors.Is(err, context.Canceled)
	kind, label := "", ""
	if failed {
		kind, label = llmKind(err)
		o.h.turnsFailed.Inc()
		if kind != "" {
			o.d.metrics.Counter("agent_llm_errors_total", "Turns ended by a model-service error, by kind.", metrics.Labels{"kind": kind}).Inc()
		}
	} else if err == nil {
		o.h.turnsOK.Inc()
	}
	if err == nil || failed {
		o.h.turns.Turn(took, failed, label)
		o.h.turnLatency.Observe(took.Seconds())
	}
	return out, err
}

// startSelfCheck registers self_check and diagnose and the runner gauges.
func (d *Daemon) startSelfCheck(b *brain, reg *tools.Registry) error {
	r := b.runner
	d.metrics.GaugeFunc("agent_runner_running", "Conversation turns running now.", nil, func() float64 { return float64(r.Stats().Running) })
	d.metrics.GaugeFunc("agent_runner_queued", "Conversation turns queued behind others.", nil, func() float64 { return float64(r.Stats().Queued) })
	d.metrics.GaugeFunc("agent_runner_keys", "Conversations with a live worker.", nil, func() float64 { return float64(r.Stats().Keys) })
	d.metrics.GaugeFunc("agent_runner_oldest_job_seconds", "Age of the longest-running turn (0: none).", nil, func() float64 {
		age, _ := r.Oldest(time.Now())
		return age.Seconds()
	})
	for _, t := range []tools.Tool{d.selfCheckTool(), d.diagnoseTool()} {
		if err := reg.Register(t); err != nil {
			return err
		}
	}
	return nil
}

// trusted reports whether the caller may see internals: an owner, or the
// operator on the admin channel (agentctl, over the 0600 socket).
func (d *Daemon) trusted(call tools.Call) bool {
	return call.Channel == "admin" || d.isOwner(call.Channel+":"+call.User)
}

func (d *Daemon) selfCheckTool() tools.Tool {
	return tools.Tool{
		Name: ToolSelfCheck,
		Description: "Check the assistant's own health: errors and crashes since the last check, conversation latency and failures, " +
			"database integrity, scheduled jobs, memory, disk, temperature, board load, MCP servers and models. " +
			"Owners get the full report; others get the verdict.",
		Schema: []byte(`{"type":"object","properties":{}}`),
		Handler: func(ctx context.Context, call tools.Call) (string, error) {
			trusted := d.trusted(call)
			rep, err := d.runSelfCheck(ctx, trusted)
			if err != nil {
				return "", err
			}
			if trusted {
				return rep.Text(), nil
			}
			if n := len(rep.Problems()); n > 0 {
				return fmt.Sprintf("Self-check: %d problem(s) found; the owners are told the details.", n), nil
			}
			return "Self-check: all good.", nil
		},
	}
}

type diagnoseArgs struct {
	SessionID int64 `json:"session_id,omitempty" desc:"the session number (agentctl sessions, /status); default this conversation's current session"`
}

func (d *Daemon) diagnoseTool() tools.Tool {
	return tools.Tool{
		Name: ToolDiagnose,
		Description: "Explain in plain words what went wrong in one conversation session: tool calls that never got a result, " +
			"failing or repeated tool calls, model-service errors with their status codes, slow turns and how full the context is.",
		Schema: tools.SchemaFor[diagnoseArgs](),
		Handler: func(ctx context.Context, call tools.Call) (string, error) {
			a, err := tools.Decode[diagnoseArgs](call.Args)
			if err != nil {
				return "", fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
			}
			return d.diagnose(ctx, call, a.SessionID)
		},
	}
}

func (d *Daemon) diagnose(ctx context.Context, call tools.Call, id int64) (string, error) {
	if d.brain == nil {
		return "", fmt.Errorf("the conversation pipeline is unavailable: %v", d.brainErr)
	}
	sessions := d.brain.sessions
	if id == 0 {
		if call.Session == "" {
			return "", fmt.Errorf("%w: give session_id", tools.ErrBadArgs)
		}
		cur, err := sessions.Current(ctx, session.Key(call.Session))
		if err != nil {
			return "", err
		}
		id = cur.ID
	}
	sess, err := sessions.Get(ctx, id)
	if errors.Is(err, session.ErrNotFound) || (err == nil && !d.trusted(call) && string(sess.Key) != call.Session) {
		// Another user's session is reported like a missing one.
		return "", fmt.Errorf("%w: no session #%d in this conversation", tools.ErrBadArgs, id)
	}
	if err != nil {
		return "", err
	}
	in, err := diagnose.Load(ctx, d.store.DB(), sessions, id)
	if err != nil {
		return "", err
	}
	return diagnose.Explain(in), nil
}

// runSelfCheck builds a report covering the time since the last saved
// one; persist saves it (so the next one starts from here).
func (d *Daemon) runSelfCheck(ctx context.Context, persist bool) (selfcheck.Report, error) {
	h := d.health
	if h == nil {
		return selfcheck.Report{}, errors.New("self-check is unavailable")
	}
	h.run.Lock()
	defer h.run.Unlock()
	h.rec.Flush(ctx) // what was logged until now is in the table
	db := d.store.DB()
	var since time.Time
	if last, ok, err := selfcheck.Last(ctx, db); err == nil && ok {
		since = last.At
	}
	rep := selfcheck.Run(ctx, d.selfCheckSources(), since)
	if persist {
		if err := selfcheck.Save(ctx, db, rep); err != nil {
			d.logger.Warn("self-check report not saved", "err", err)
		}
	}
	return rep, nil
}

func (d *Daemon) selfCheckSources() selfcheck.Sources {
	cfg := d.config()
	sysRoot := d.opts.SysRoot
	if sysRoot == "" {
		sysRoot = "/sys"
	}
	s := selfcheck.Sources{
		Now:        d.now,
		DB:         d.store.DB(),
		Integrity:  func(ctx context.Context) error { return d.store.Check(ctx, false) },
		Turns:      d.health.turns,
		Started:    d.started,
		RSS:        func() int64 { return metrics.ResidentBytes(os.Getpagesize()) },
		StateDir:   cfg.Agent.StateDir,
		FreeBytes:  FreeBytes,
		SysRoot:    sysRoot,
		Tegrastats: selfcheck.CommandTegrastats,
		NVPModel:   selfcheck.CommandNVPModel,
		Components: func() map[string]string {
			d.compMu.RLock()
			defer d.compMu.RUnlock()
			out := make(map[string]string, len(d.components))
			for k, v := range d.components {
				if k != "scheduler" {
					out[k] = v
				}
			}
			return out
		},
		LLM:      d.probeLLM,
		LLMModel: cfg.LLM.Model,
	}
	if d.brain == nil {
		s.Turns = nil
	}
	if sc, err := d.scheduler(); err == nil {
		s.Jobs = func(ctx context.Context) ([]scheduler.Job, error) { return sc.List(ctx, "") }
	}
	if t, err := d.mcpTools(); err == nil {
		s.MCP = func() []selfcheck.MCPServer {
			var out []selfcheck.MCPServer
			for _, st := range t.m.Status() {
				out = append(out, selfcheck.MCPServer{Name: st.Name, State: string(st.State), LastError: st.LastError})
			}
			return out
		}
	}
	return s
}

// probeLLM asks GET {base_url}/models, which OpenAI-compatible servers
// answer: the model service is reachable and takes the key.
func (d *Daemon) probeLLM(ctx context.Context) error {
	if err := d.checkLLMConfigured(ctx); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), health.ErrDegraded.Error()+": "))
	}
	l := d.config().LLM
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(l.BaseURL, "/")+"/models", nil)
	if err != nil {
		return err
	}
	if l.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.APIKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s unreachable: %v", l.BaseURL, redactKey(err.Error(), l.APIKey))
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s rejected the API key (%s)", l.BaseURL, resp.Status)
	case resp.StatusCode >= 500:
		return fmt.Errorf("%s answered %s", l.BaseURL, resp.Status)
	}
	return nil
}

func redactKey(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "***")
}

// selfCheckDaily runs the self-check every day at 09:00 in agent.timezone
// and tells the owners about problems.
func (d *Daemon) selfCheckDaily(ctx context.Context) {
	selfcheck.Daily(ctx, clock.Func(d.now), d.config().Location(), selfCheckHour, selfCheckMinute, func(ctx context.Context) {
		rep, err := d.runSelfCheck(ctx, true)
		if err != nil || ctx.Err() != nil {
			return
		}
		d.logger.Info("daily self-check", "level", rep.Level(), "problems", len(rep.Problems()))
		if len(rep.Problems()) > 0 {
			d.notifyOwners(ctx, rep.Summary())
		}
	})
}

// notifyOwners sends text to every agent.owners entry ("wecom:zhangsan")
// on its channel.
func (d *Daemon) notifyOwners(ctx context.Context, text string) {
	owners := d.config().Agent.Owners
	if len(owners) == 0 {
		d.logger.Warn("self-check found problems but agent.owners is empty; nobody was told", "summary", text)
		return
	}
	for _, o := range owners {
		channel, user, ok := strings.Cut(o, ":")
		if !ok {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := d.sendOut(sctx, channel, user, text); err != nil {
			d.logger.Warn("self-check notice not delivered", "owner", o, "err", err)
		}
		cancel()
	}
}

// checkDatabaseWritable is the database liveness probe: a real write (the
// heartbeat row in meta), at most every few seconds however often health
// is asked.
func (d *Daemon) checkDatabaseWritable(ctx context.Context) error {
	now := d.now()
	if h := d.health; h != nil {
		h.hbMu.Lock()
		fresh := !h.lastHB.IsZero() && now.Sub(h.lastHB) >= 0 && now.Sub(h.lastHB) < 5*time.Second
		h.hbMu.Unlock()
		if fresh {
			return nil
		}
	}
	_, err := d.store.DB().ExecContext(ctx, `INSERT INTO meta(key, value) VALUES ('heartbeat', ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, now.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("database is not writable: %w", err)
	}
	if h := d.health; h != nil {
		h.hbMu.Lock()
		h.lastHB = now
		h.hbMu.Unlock()
	}
	return nil
}

// checkEventLoop proves the main loop (signals, reloads, listener
// failures) still turns: it must take a ping.
func (d *Daemon) checkEventLoop(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case d.loopPing <- ack:
	case <-ctx.Done():
		return errors.New("the main event loop does not respond")
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return errors.New("the main event loop does not respond")
	}
}

// checkRunner fails while a conversation turn has run far longer than a
// turn may (the runner is wedged).
func (d *Daemon) checkRunner(context.Context) error {
	if d.brain == nil || d.brain.runner == nil {
		return nil
	}
	return runnerWedged(d.brain.runner, time.Now(), wedgedAfter)
}

// oldestRunner is the part of *runner.Runner the probe reads.
type oldestRunner interface {
	Oldest(now time.Time) (time.Duration, string)
}

func runnerWedged(r oldestRunner, now time.Time, limit time.Duration) error {
	if age, key := r.Oldest(now); age > limit {
		return fmt.Errorf("runner wedged: the turn of %s has run for %s (limit %s)", key, age.Round(time.Second), limit)
	}
	return nil
}
