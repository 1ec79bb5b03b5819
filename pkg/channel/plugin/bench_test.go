package plugin

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkRoundTrip is one plugin round trip through the real channel
// and pipeline: a message line in, stored and acked, its turn (gate,
// runner, agent loop, session in SQLite, an llmtest model answering at
// once), the reply committed to the outbox and written as a send, the
// plugin's sent recorded. The plugin is in-process (pipes), so what is
// measured is the daemon's side. p50/p99 over the timed iterations.
func BenchmarkRoundTrip(b *testing.B) {
	d, _ := realDeps(b, "bench", "/nonexistent/plugin")
	st := newStarter(b)
	c, err := New(d, Options{Start: st.start})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	p := st.next(b)
	p.expect(b, TypeHello)
	trip := func(i int) time.Duration {
		start := time.Now()
		p.tryWrite(messageLine(Message{ID: fmt.Sprintf("b%d", i), Sender: fmt.Sprintf("u%d", i%8), Text: "ping"}))
		for {
			m := p.next(b)
			if m["type"] == TypeSend {
				took := time.Since(start)
				p.write(b, map[string]string{"type": TypeSent, "id": str(m, "id")})
				return took
			}
		}
	}
	for i := range 20 { // warm-up: sessions, prepared statements
		trip(-1 - i)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		lat = append(lat, trip(i))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
	cancel()
	<-done
}
