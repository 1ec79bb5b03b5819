package daemon

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkCommandCacheHit: a hardware text command answered from the
// command cache (the embedding of the utterance, the lookup, the MCP
// tool's call, the stored reply), from the text frame's write to the
// final reply frame. BenchmarkCommandCacheViaLLM: the same command from a
// new device each time, so it goes to the local fake model (a tool call,
// the MCP tool, the answer: two model round trips).
func BenchmarkCommandCacheHit(b *testing.B) {
	r := newCacheRig(b)
	ws := r.device(b, "lamp-1")
	if got := say(b, ws, "turn on the lights"); got != "Lights on in the office." {
		b.Fatalf("first: %q", got)
	}
	calls := r.llm.Count()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if got := say(b, ws, "turn on the light"); got != "Lights on in the office." {
			b.Fatalf("hit: %q", got)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	if r.llm.Count() != calls {
		b.Fatalf("%d model calls during the hits", r.llm.Count()-calls)
	}
	reportLatency(b, lat)
}

func BenchmarkCommandCacheViaLLM(b *testing.B) {
	r := newCacheRig(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ws := r.device(b, fmt.Sprintf("new-%d", i))
		b.StartTimer()
		start := time.Now()
		if got := say(b, ws, "turn on the lights"); got != "Lights on in the office." {
			b.Fatalf("via the model: %q", got)
		}
		lat = append(lat, time.Since(start))
		ws.Close()
	}
	b.StopTimer()
	reportLatency(b, lat)
}
