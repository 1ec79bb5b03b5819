package assistant

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"agent/pkg/agent"
	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/diagnose"
	"agent/pkg/diskfree"
	"agent/pkg/egress"
	"agent/pkg/health"
	"agent/pkg/llm"
	"agent/pkg/metrics"
	"agent/pkg/scheduler"
	"agent/pkg/selfcheck"
	"agent/pkg/session"
	"agent/pkg/tools"
)

// Self-repair: turn statistics and their metrics (the turn observer), the
// self_check and diagnose tools, and the daily self-check at 09:00 local
// with notices to agent.owners. The error log and the watchdog's liveness
// probes are the host's.

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

// selfCheckPart is the assistant's self-repair state.
type selfCheckPart struct {
	a     *Assistant
	turns *selfcheck.TurnStats
	run   sync.Mutex // one self-check at a time

	turnLatency *metrics.Histogram
	turnsOK     *metrics.Counter
	turnsFailed *metrics.Counter
	toolCalls   *metrics.Counter
	toolFails   *metrics.Counter
}

func newSelfCheckPart(a *Assistant) *selfCheckPart {
	m := a.d.Metrics
	h := &selfCheckPart{a: a, turns: selfcheck.NewTurnStats()}
	h.turnLatency = m.Histogram("agent_turn_duration_seconds", "Conversation turn latency (agent loop, including tools).", nil,
		[]float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300})
	h.turnsOK = m.Counter("agent_turns_total", "Conversation turns by result.", metrics.Labels{"result": "ok"})
	h.turnsFailed = m.Counter("agent_turns_total", "Conversation turns by result.", metrics.Labels{"result": "failed"})
	h.toolCalls = m.Counter("agent_tool_calls_total", "Tool calls made by the model.", nil)
	h.toolFails = m.Counter("agent_tool_failures_total", "Tool calls whose result was an error.", nil)
	for _, kind := range []string{"rate_limited", "server", "unavailable", "bad_request", "auth", "content_filter", "malformed", "timeout", "other"} {
		m.Counter("agent_llm_errors_total", "Turns ended by a model-service error, by kind.", metrics.Labels{"kind": kind})
	}
	for _, st := range []string{"ok", "failed", "missed", "running"} {
		m.GaugeFunc("agent_job_runs", "Scheduled job runs recorded (kept 30 days), by status.", metrics.Labels{"status": st}, a.jobRuns(st))
	}
	return h
}

// register adds self_check, diagnose and the runner gauges.
func (h *selfCheckPart) register() error {
	r, m := h.a.runner, h.a.d.Metrics
	m.GaugeFunc("agent_runner_running", "Conversation turns running now.", nil, func() float64 { return float64(r.Stats().Running) })
	m.GaugeFunc("agent_runner_queued", "Conversation turns queued behind others.", nil, func() float64 { return float64(r.Stats().Queued) })
	m.GaugeFunc("agent_runner_keys", "Conversations with a live worker.", nil, func() float64 { return float64(r.Stats().Keys) })
	m.GaugeFunc("agent_runner_oldest_job_seconds", "Age of the longest-running turn (0: none).", nil, func() float64 {
		age, _ := r.Oldest(time.Now())
		return age.Seconds()
	})
	return h.a.Register(h.a.selfCheckTool(), h.a.diagnoseTool())
}

func (a *Assistant) jobRuns(status string) func() float64 {
	return func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var n int64
		if err := a.d.Store.DB().QueryRowContext(ctx, `SELECT count(*) FROM sched_runs WHERE status = ?`, status).Scan(&n); err != nil {
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

// observe wraps the agent so every turn and tool call is counted; a turn's
// duration is measured on the assistant's clock.
func (h *selfCheckPart) observe(next conversation.Turner) conversation.Turner {
	return &observedTurner{next: next, h: h}
}

type observedTurner struct {
	next conversation.Turner
	h    *selfCheckPart
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
		progress := in.Progress && (e.Kind == agent.EventToolCall || e.Kind == agent.EventToolResult)
		if emit != nil && (verbose || progress || e.Kind == agent.EventText) {
			emit(e)
		}
	}
	clk := o.h.a.clock
	start := clk.Now()
	out, err := o.next.Turn(ctx, in, inner)
	took := clk.Now().Sub(start)
	failed := err != nil && !errors.Is(err, context.Canceled)
	kind, label := "", ""
	if failed {
		kind, label = llmKind(err)
		o.h.turnsFailed.Inc()
		if kind != "" {
			o.h.a.d.Metrics.Counter("agent_llm_errors_total", "Turns ended by a model-service error, by kind.", metrics.Labels{"kind": kind}).Inc()
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

func (a *Assistant) selfCheckTool() tools.Tool {
	return tools.Tool{
		Name:  ToolSelfCheck,
		Owner: true,
		Description: "Check the assistant's own health: errors and crashes since the last check, conversation latency and failures, " +
			"database integrity, scheduled jobs, memory, disk, temperature, board load, MCP servers and models. " +
			"Owners get the full report; others get the verdict.",
		Schema: []byte(`{"type":"object","properties":{}}`),
		Handler: func(ctx context.Context, call tools.Call) (string, error) {
			trusted := a.trusted(call)
			rep, err := a.RunSelfCheck(ctx, trusted)
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

func (a *Assistant) diagnoseTool() tools.Tool {
	return tools.Tool{
		Name:  ToolDiagnose,
		Owner: true,
		Description: "Explain in plain words what went wrong in one conversation session: tool calls that never got a result, " +
			"failing or repeated tool calls, model-service errors with their status codes, slow turns and how full the context is.",
		Schema: tools.SchemaFor[diagnoseArgs](),
		Handler: func(ctx context.Context, call tools.Call) (string, error) {
			args, err := tools.Decode[diagnoseArgs](call.Args)
			if err != nil {
				return "", fmt.Errorf("%w: %v", tools.ErrBadArgs, err)
			}
			return a.diagnose(ctx, call, args.SessionID)
		},
	}
}

func (a *Assistant) diagnose(ctx context.Context, call tools.Call, id int64) (string, error) {
	if err := a.unavailable(); err != nil {
		return "", err
	}
	sessions := a.sessions
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
	if errors.Is(err, session.ErrNotFound) || (err == nil && !a.trusted(call) && string(sess.Key) != call.Session) {
		// Another user's session is reported like a missing one.
		return "", fmt.Errorf("%w: no session #%d in this conversation", tools.ErrBadArgs, id)
	}
	if err != nil {
		return "", err
	}
	in, err := diagnose.Load(ctx, a.d.Store.DB(), sessions, id)
	if err != nil {
		return "", err
	}
	return diagnose.Explain(in), nil
}

// RunSelfCheck builds a report covering the time since the last saved
// one; persist saves it (so the next one starts from here).
func (a *Assistant) RunSelfCheck(ctx context.Context, persist bool) (selfcheck.Report, error) {
	h := a.checks
	if h == nil {
		return selfcheck.Report{}, errors.New("self-check is unavailable")
	}
	h.run.Lock()
	defer h.run.Unlock()
	if a.d.ErrLog != nil {
		a.d.ErrLog.Flush(ctx) // what was logged until now is in the table
	}
	db := a.d.Store.DB()
	var since time.Time
	if last, ok, err := selfcheck.Last(ctx, db); err == nil && ok {
		since = last.At
	}
	rep := selfcheck.Run(ctx, a.selfCheckSources(), since)
	if persist {
		if err := selfcheck.Save(ctx, db, rep); err != nil {
			a.logger.Warn("self-check report not saved", "err", err)
		}
	}
	return rep, nil
}

func (a *Assistant) selfCheckSources() selfcheck.Sources {
	cfg := a.config()
	sysRoot := a.d.SysRoot
	if sysRoot == "" {
		sysRoot = "/sys"
	}
	st := a.d.Store
	s := selfcheck.Sources{
		Now:        a.clock.Now,
		DB:         st.DB(),
		Integrity:  func(ctx context.Context) error { return st.Check(ctx, false) },
		Turns:      a.checks.turns,
		Started:    a.d.Started,
		RSS:        func() int64 { return metrics.ResidentBytes(os.Getpagesize()) },
		StateDir:   cfg.Agent.StateDir,
		FreeBytes:  diskfree.FreeBytes,
		SysRoot:    sysRoot,
		Tegrastats: selfcheck.CommandTegrastats,
		NVPModel:   selfcheck.CommandNVPModel,
		Components: func() map[string]string {
			out := map[string]string{}
			if a.d.Components != nil {
				for k, v := range a.d.Components() {
					if k != "scheduler" {
						out[k] = v
					}
				}
			}
			return out
		},
		LLM:      a.probeLLM,
		LLMModel: cfg.LLM.Model,
	}
	if a.err != nil {
		s.Turns = nil // no pipeline: no turns to report; the error log says why
		return s
	}
	s.Jobs = func(ctx context.Context) ([]scheduler.Job, error) { return a.sched.s.List(ctx, "") }
	s.MCP = func() []selfcheck.MCPServer {
		var out []selfcheck.MCPServer
		for _, st := range a.mcp.m.Status() {
			out = append(out, selfcheck.MCPServer{Name: st.Name, State: string(st.State), LastError: st.LastError})
		}
		return out
	}
	return s
}

// CheckLLMConfigured reports the remote model as unavailable (degraded, not
// failing: local features keep working) while no API key is configured for
// a provider that needs one.
func CheckLLMConfigured(l config.LLM) error {
	if l.APIKey == "" && config.NeedsAPIKey(l.Provider) {
		return fmt.Errorf("%w: llm.api_key is empty; replies need the remote model (set it, then agentctl reload)", health.ErrDegraded)
	}
	return nil
}

// probeLLM asks GET {base_url}/models, which OpenAI-compatible servers
// answer: the model service is reachable and takes the key.
func (a *Assistant) probeLLM(ctx context.Context) error {
	l := a.config().LLM
	if err := CheckLLMConfigured(l); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), health.ErrDegraded.Error()+": "))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(l.BaseURL, "/")+"/models", nil)
	if err != nil {
		return err
	}
	if l.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.APIKey)
	}
	client := http.DefaultClient
	if a.d.Egress != nil { // held to privacy.egress_allow and counted like every model request
		client = a.d.Egress.Client(egress.LLM, 0)
	}
	resp, err := client.Do(req)
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

// SelfCheckDaily runs the self-check every day at 09:00 in agent.timezone
// and tells the owners about problems, until ctx ends.
func (a *Assistant) SelfCheckDaily(ctx context.Context) {
	selfcheck.Daily(ctx, a.clock, a.config().Location(), selfCheckHour, selfCheckMinute, func(ctx context.Context) {
		rep, err := a.RunSelfCheck(ctx, true)
		if err != nil || ctx.Err() != nil {
			return
		}
		a.logger.Info("daily self-check", "level", rep.Level(), "problems", len(rep.Problems()))
		if len(rep.Problems()) > 0 {
			a.NotifyOwners(ctx, rep.Summary())
		}
	})
}
