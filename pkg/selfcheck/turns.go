package selfcheck

import (
	"sort"
	"sync"
	"time"
)

// latencyWindow is how many recent turn latencies the percentiles use.
const latencyWindow = 512

// TurnStats counts conversation turns since the daemon started: latency
// of recent turns, LLM failures by kind, tool calls and failures by tool.
// Safe for concurrent use; bounded memory (tool names are capped).
type TurnStats struct {
	mu         sync.Mutex
	lat        [latencyWindow]time.Duration
	n          int // latencies recorded (may exceed the window)
	turns      int
	failed     int
	llmErrors  map[string]int
	toolCalls  map[string]int
	toolErrors map[string]int
}

// maxTools bounds the per-tool maps (a model can invent tool names).
const maxTools = 200

// NewTurnStats returns empty stats.
func NewTurnStats() *TurnStats {
	return &TurnStats{llmErrors: map[string]int{}, toolCalls: map[string]int{}, toolErrors: map[string]int{}}
}

// Turn records a finished turn; llmErr names the kind of LLM failure that
// ended it ("" when it did not fail because of the model).
func (s *TurnStats) Turn(took time.Duration, failed bool, llmErr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lat[s.n%latencyWindow] = took
	s.n++
	s.turns++
	if failed {
		s.failed++
	}
	if llmErr != "" {
		s.llmErrors[llmErr]++
	}
}

// Tool records one tool call.
func (s *TurnStats) Tool(name string, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.toolCalls[name]; !ok && len(s.toolCalls) >= maxTools {
		name = "(other)"
	}
	s.toolCalls[name]++
	if failed {
		s.toolErrors[name]++
	}
}

// TurnSnapshot is a copy of the stats.
type TurnSnapshot struct {
	Turns, Failed       int
	P50, P90, P99, Max  time.Duration // over the last latencyWindow turns
	LLMErrors           map[string]int
	ToolCalls, ToolErrs int
	ToolFailures        []ToolFailure // tools with failures, most first
}

// ToolFailure is one tool's failure count.
type ToolFailure struct {
	Tool          string
	Calls, Failed int
}

// Snapshot copies the stats.
func (s *TurnStats) Snapshot() TurnSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := TurnSnapshot{Turns: s.turns, Failed: s.failed, LLMErrors: map[string]int{}}
	n := min(s.n, latencyWindow)
	lat := append([]time.Duration(nil), s.lat[:n]...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if n > 0 {
		q := func(p float64) time.Duration { return lat[min(n-1, int(p*float64(n)))] }
		out.P50, out.P90, out.P99, out.Max = q(0.50), q(0.90), q(0.99), lat[n-1]
	}
	for k, v := range s.llmErrors {
		out.LLMErrors[k] = v
	}
	for tool, calls := range s.toolCalls {
		out.ToolCalls += calls
		if f := s.toolErrors[tool]; f > 0 {
			out.ToolErrs += f
			out.ToolFailures = append(out.ToolFailures, ToolFailure{Tool: tool, Calls: calls, Failed: f})
		}
	}
	sort.Slice(out.ToolFailures, func(i, j int) bool {
		a, b := out.ToolFailures[i], out.ToolFailures[j]
		if a.Failed != b.Failed {
			return a.Failed > b.Failed
		}
		return a.Tool < b.Tool
	})
	return out
}
