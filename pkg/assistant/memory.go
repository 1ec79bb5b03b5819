package assistant

import (
	"context"
	"math"
	"time"

	"agent/pkg/memory"
)

// Memory is the long-term memory (pkg/memory): every user's facts, for
// the admin API and agentctl status.
func (a *Assistant) Memory() (*memory.Store, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	return a.memory, nil
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
