package daemon

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"agent/pkg/admin"
	"agent/pkg/memory"
)

// The admin API's memory endpoints (agentctl memory list|search|forget).
// The operator sees every scope unless one is named.

func (d *Daemon) memoryStore() (*memory.Store, error) {
	if d.brain == nil {
		return nil, fmt.Errorf("the conversation pipeline is unavailable: %v", d.brainErr)
	}
	return d.brain.memory, nil
}

func adminFact(f memory.Fact, score float64) admin.Fact {
	return admin.Fact{ID: f.ID, Scope: f.Scope, Text: f.Text, Keywords: f.Keywords, Persons: f.Persons,
		Topic: f.Topic, Time: f.TimeText, Source: f.Source, Created: f.Created, Updated: f.Updated,
		Seen: f.Seen, SupersededBy: f.SupersededBy, Score: score}
}

// MemoryList implements admin.MemoryBackend.
func (d *Daemon) MemoryList(ctx context.Context, q admin.MemoryQuery) ([]admin.Fact, error) {
	m, err := d.memoryStore()
	if err != nil {
		return nil, err
	}
	facts, err := m.List(ctx, memory.Filter{Scope: q.Scope, History: q.History, Limit: q.Limit})
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
func (d *Daemon) MemorySearch(ctx context.Context, q admin.MemoryQuery) ([]admin.Fact, error) {
	m, err := d.memoryStore()
	if err != nil {
		return nil, err
	}
	k := q.Limit
	if k <= 0 {
		k = 10
	}
	var hits []memory.Hit
	if q.Scope == "" {
		hits, err = m.SearchAllScopes(ctx, q.Query, k)
	} else {
		hits, err = m.Search(ctx, q.Scope, q.Query, k)
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
func (d *Daemon) MemoryForget(ctx context.Context, id int64) (admin.Fact, error) {
	m, err := d.memoryStore()
	if err != nil {
		return admin.Fact{}, err
	}
	f, err := m.Forget(ctx, "", id)
	if errors.Is(err, memory.ErrNotFound) {
		return admin.Fact{}, fmt.Errorf("%w: no fact #%d", admin.ErrNotFound, id)
	}
	if err != nil {
		return admin.Fact{}, err
	}
	d.logger.Info("fact forgotten by the operator", "id", f.ID, "scope", f.Scope)
	return adminFact(f, 0), nil
}

// memoryMetrics exposes the long-term memory on /metrics.
func (d *Daemon) memoryMetrics(m *memory.Store) {
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
	d.metrics.GaugeFunc("agent_memory_facts", "Current long-term memory facts, all users.", nil,
		stat(func(s memory.Stats) int { return s.Facts }))
	d.metrics.GaugeFunc("agent_memory_facts_unembedded", "Current facts waiting for a vector.", nil,
		stat(func(s memory.Stats) int { return s.Unembedded }))
	d.metrics.GaugeFunc("agent_memory_semantic", "1 when memory retrieval uses vectors (embedding model loaded), 0 when keyword-only.", nil,
		func() float64 {
			if m.Semantic() {
				return 1
			}
			return 0
		})
}
