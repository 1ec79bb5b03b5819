package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"agent/pkg/fleet"
	"agent/pkg/fleet/natstest"
)

// BenchmarkHop: a message published by the ingress box until the home
// box's handler has it (the stream, the home entry, the consumer), at 20
// messages a second, on a real NATS server.
func BenchmarkHop(b *testing.B) {
	srv := natstest.Start(b)
	mk := func(name string, cfg fleet.Config) *fleet.Fleet {
		cfg.URL, cfg.Box = srv.URL(), name
		f, err := fleet.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(f.Close)
		return f
	}
	a := mk("a", fleet.Config{Ingress: true, DefaultHome: "b"})
	h := mk("b", fleet.Config{})
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var hops []time.Duration
	got := make(chan struct{}, 1<<16)
	h.Handle("wecom", func(_ context.Context, _ string, payload []byte) error {
		var m msg
		json.Unmarshal(payload, &m)
		mu.Lock()
		if t0, ok := sent[m.Key]; ok {
			hops = append(hops, time.Since(t0))
		}
		mu.Unlock()
		got <- struct{}{}
		return nil
	})
	a.Handle("wecom", func(context.Context, string, []byte) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, f := range []*fleet.Fleet{a, h} {
		go f.Run(ctx, nopLocal{})
	}
	n := max(b.N, 200)
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * 50 * time.Millisecond)))
		key := fmt.Sprintf("k%d", i)
		mu.Lock()
		sent[key] = time.Now()
		mu.Unlock()
		payload, _ := json.Marshal(msg{Conv: fmt.Sprintf("u%d", i%20), Key: key})
		if _, err := a.Publish(ctx, "wecom", fmt.Sprintf("u%d", i%20), key, payload); err != nil {
			b.Fatal(err)
		}
	}
	for range n {
		select {
		case <-got:
		case <-time.After(time.Minute):
			b.Fatal("messages missing")
		}
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(hops)
	b.ReportMetric(float64(hops[len(hops)/2])/1e6, "hop_p50_ms")
	b.ReportMetric(float64(hops[len(hops)*99/100])/1e6, "hop_p99_ms")
}

type nopLocal struct{}

func (nopLocal) Drained(context.Context, string, string) (bool, error)  { return true, nil }
func (nopLocal) Export(context.Context, string, string) ([]byte, error) { return nil, nil }
func (nopLocal) Import(context.Context, string, string, []byte) error   { return nil }
func (nopLocal) Purge(context.Context, string, string) error            { return nil }
func (nopLocal) Beat(context.Context) fleet.Beat                        { return fleet.Beat{} }
