package assistant

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"agent/pkg/admin"
	"agent/pkg/conversation"
	"agent/pkg/memory"
	"agent/pkg/scheduler"
)

// The admin API's view of the pipeline (agentctl send, sessions, memory,
// jobs, tools). The operator sees every user's data.

var (
	_ admin.MemoryBackend      = (*Assistant)(nil)
	_ admin.JobsBackend        = (*Assistant)(nil)
	_ admin.ToolsBackend       = (*Assistant)(nil)
	_ admin.CustomToolsBackend = (*Assistant)(nil)
)

// Send is agentctl send: one message through the same pipeline a WeCom or
// voice message takes, as user req.To on the admin channel.
func (a *Assistant) Send(ctx context.Context, req admin.SendRequest) (admin.SendResult, error) {
	if err := a.unavailable(); err != nil {
		return admin.SendResult{}, err
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
	replies, err := a.Ask(ctx, conversation.Inbound{Channel: req.Channel, Sender: req.To, Text: req.Text})
	res := admin.SendResult{Replies: replies}
	if err != nil && (len(replies) == 0 || ctx.Err() != nil) {
		return res, err
	}
	return res, nil // with replies the user was told (queue full)
}

// Sessions lists every conversation session.
func (a *Assistant) Sessions(ctx context.Context) ([]admin.Session, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	list, err := a.sessions.List(ctx)
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

func adminFact(f memory.Fact, score float64) admin.Fact {
	return admin.Fact{ID: f.ID, Scope: f.Scope, Text: f.Text, Keywords: f.Keywords, Persons: f.Persons,
		Topic: f.Topic, Time: f.TimeText, Source: f.Source, Created: f.Created, Updated: f.Updated,
		Seen: f.Seen, SupersededBy: f.SupersededBy, Score: score}
}

// MemoryList implements admin.MemoryBackend.
func (a *Assistant) MemoryList(ctx context.Context, q admin.MemoryQuery) ([]admin.Fact, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	facts, err := a.memory.List(ctx, memory.Filter{Scope: q.Scope, History: q.History, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]admin.Fact, len(facts))
	for i, f := range facts {
		out[i] = adminFact(f, 0)
	}
	return out, nil
}

// MemorySearch implements admin.MemoryBackend.
func (a *Assistant) MemorySearch(ctx context.Context, q admin.MemoryQuery) ([]admin.Fact, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	k := q.Limit
	if k <= 0 {
		k = 10
	}
	var hits []memory.Hit
	var err error
	if q.Scope == "" {
		hits, err = a.memory.SearchAllScopes(ctx, q.Query, k)
	} else {
		hits, err = a.memory.Search(ctx, q.Scope, q.Query, k)
	}
	if err != nil {
		return nil, err
	}
	out := make([]admin.Fact, len(hits))
	for i, h := range hits {
		out[i] = adminFact(h.Fact, h.Score)
	}
	return out, nil
}

// MemoryForget implements admin.MemoryBackend.
func (a *Assistant) MemoryForget(ctx context.Context, id int64) (admin.Fact, error) {
	if err := a.unavailable(); err != nil {
		return admin.Fact{}, err
	}
	f, err := a.memory.Forget(ctx, "", id)
	if errors.Is(err, memory.ErrNotFound) {
		return admin.Fact{}, fmt.Errorf("%w: no fact #%d", admin.ErrNotFound, id)
	}
	if err != nil {
		return admin.Fact{}, err
	}
	a.logger.Info("fact forgotten by the operator", "id", f.ID, "scope", f.Scope)
	return adminFact(f, 0), nil
}

// memoryMetrics exposes the long-term memory on /metrics.
func (a *Assistant) memoryMetrics() {
	m := a.memory
	stat := func(pick func(memory.Stats) int) func() float64 {
		return func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			st, err := m.Stats(ctx, "")
			if err != nil {
				return math.NaN()
			}
			return float64(pick(st))
		}
	}
	reg := a.d.Metrics
	reg.GaugeFunc("agent_memory_facts", "Current long-term memory facts, all users.", nil,
		stat(func(s memory.Stats) int { return s.Facts }))
	reg.GaugeFunc("agent_memory_facts_unembedded", "Current facts waiting for a vector.", nil,
		stat(func(s memory.Stats) int { return s.Unembedded }))
	reg.GaugeFunc("agent_memory_semantic", "1 when memory retrieval uses vectors (embedding model loaded), 0 when keyword-only.", nil,
		func() float64 {
			if m.Semantic() {
				return 1
			}
			return 0
		})
}

func adminJob(j scheduler.Job) admin.Job {
	return admin.Job{ID: j.ID, Owner: j.Owner, Channel: j.Channel, To: j.To, Name: j.Name, Kind: j.Kind, Spec: j.Spec,
		TZ: j.TZ, Action: j.Action, Payload: j.Payload, State: j.State, Created: j.Created, Next: j.Next,
		LastRun: j.LastRun, LastStatus: j.LastStatus, LastError: j.LastError, Failures: j.Failures, Runs: j.Runs}
}

// JobsList implements admin.JobsBackend: every user's jobs.
func (a *Assistant) JobsList(ctx context.Context) ([]admin.Job, error) {
	s, err := a.Scheduler()
	if err != nil {
		return nil, err
	}
	list, err := s.List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]admin.Job, 0, len(list))
	for _, j := range list {
		out = append(out, adminJob(j))
	}
	return out, nil
}

// JobsAdd implements admin.JobsBackend. The job is delivered to its owner
// unless the spec names a channel and recipient.
func (a *Assistant) JobsAdd(ctx context.Context, spec admin.JobSpec) (admin.Job, error) {
	s, err := a.Scheduler()
	if err != nil {
		return admin.Job{}, err
	}
	channel, user, ok := strings.Cut(spec.Owner, ":")
	if !ok || channel == "" || user == "" {
		return admin.Job{}, fmt.Errorf("%w: owner %q: give a user scope such as wecom:alice", admin.ErrInvalidJob, spec.Owner)
	}
	n := scheduler.NewJob{Owner: spec.Owner, Channel: spec.Channel, To: spec.To, Name: spec.Name,
		Cron: spec.Cron, At: spec.At, TZ: spec.TZ, Action: scheduler.ActionMessage, Payload: spec.Text}
	if n.Channel == "" {
		n.Channel = channel
	}
	if n.To == "" {
		n.To = user
	}
	if spec.Prompt != "" {
		if spec.Text != "" {
			return admin.Job{}, fmt.Errorf("%w: give a text or a prompt, not both", admin.ErrInvalidJob)
		}
		n.Action, n.Payload = scheduler.ActionLLMTask, spec.Prompt
	}
	j, err := s.Add(ctx, n)
	if errors.Is(err, scheduler.ErrInvalid) {
		return admin.Job{}, fmt.Errorf("%w: %s", admin.ErrInvalidJob, strings.TrimPrefix(err.Error(), scheduler.ErrInvalid.Error()+": "))
	}
	if err != nil {
		return admin.Job{}, err
	}
	return adminJob(j), nil
}

// JobsRemove implements admin.JobsBackend.
func (a *Assistant) JobsRemove(ctx context.Context, id int64) (admin.Job, error) {
	s, err := a.Scheduler()
	if err != nil {
		return admin.Job{}, err
	}
	j, err := s.Remove(ctx, id, "")
	if errors.Is(err, scheduler.ErrNotFound) {
		return admin.Job{}, fmt.Errorf("%w: job #%d", admin.ErrNotFound, id)
	}
	if err != nil {
		return admin.Job{}, err
	}
	return adminJob(j), nil
}

// Tools implements admin.ToolsBackend.
func (a *Assistant) Tools(context.Context) (admin.ToolList, error) {
	t, err := a.mcpTools()
	if err != nil {
		return admin.ToolList{}, err
	}
	st := t.m.Status()
	out := admin.ToolList{Servers: make([]admin.ToolServer, 0, len(st))}
	for _, s := range st {
		out.Servers = append(out.Servers, admin.ToolServer{Name: s.Name, Transport: s.Transport, State: string(s.State),
			Tools: s.Tools, LastError: s.LastError, Restarts: s.Restarts})
	}
	custom := map[string]bool{}
	for _, c := range a.customList() {
		custom[c.Name] = c.Live > 0
		out.Custom = append(out.Custom, c)
	}
	for _, tool := range t.reg.List("") {
		out.Tools = append(out.Tools, admin.ToolInfo{Name: tool.Name, Server: serverOf(tool.Name, st), Custom: custom[tool.Name]})
	}
	return out, nil
}

// ReloadTools implements admin.ToolsBackend: like reload_mcp, then waits
// briefly so that `agentctl tools reload` can show the outcome.
func (a *Assistant) ReloadTools(ctx context.Context) error {
	if err := a.reloadMCP(ctx); err != nil {
		return err
	}
	a.settleMCP(ctx, settleAdmin)
	return nil
}
