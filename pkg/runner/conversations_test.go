package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// runConversations pushes keys×turns jobs, each waiting latency (a fake LLM
// call; 0: it only yields), and checks every key's turns ran in order. It
// returns the wall time.
func runConversations(tb testing.TB, r *Runner, keys, turns int, latency time.Duration) time.Duration {
	tb.Helper()
	got := make([][]int, keys)
	var wg sync.WaitGroup
	wg.Add(keys * turns)
	start := time.Now()
	for k := range keys {
		key := "p2p:user" + strconv.Itoa(k)
		for j := range turns {
			err := r.Submit(key, func(ctx context.Context) {
				defer wg.Done()
				if latency == 0 {
					runtime.Gosched()
				} else {
					select {
					case <-time.After(latency):
					case <-ctx.Done():
					}
				}
				got[k] = append(got[k], j)
			})
			if err != nil {
				tb.Fatalf("Submit(%s, %d): %v", key, j, err)
			}
		}
	}
	wg.Wait()
	wall := time.Since(start)
	for k, seq := range got {
		if len(seq) != turns {
			tb.Fatalf("key %d: %d turns ran, want %d", k, len(seq), turns)
		}
		for i, j := range seq {
			if i != j {
				tb.Fatalf("key %d: position %d ran turn %d (order broken: %v)", k, i, j, seq)
			}
		}
	}
	return wall
}

func TestConversations100Order(t *testing.T) {
	r := New(Config{MaxConcurrent: 100}, nil)
	defer closeRunner(t, r)
	// Timing is measured by BenchmarkConversations100; here only the order.
	runConversations(t, r, 100, 5, 0)
}

// BenchmarkConversations100: 100 users, 5 turns each, 100 ms fake LLM latency.
// Run with -benchtime=1x; cap4 takes about 12.5 s per run.
func BenchmarkConversations100(b *testing.B) {
	for _, limit := range []int{100, 4} {
		b.Run("cap"+strconv.Itoa(limit), func(b *testing.B) {
			r := New(Config{MaxConcurrent: limit}, nil)
			defer r.Close(context.Background())
			var total time.Duration
			for b.Loop() {
				total += runConversations(b, r, 100, 5, 100*time.Millisecond)
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "wall-ms/run")
			if rss, err := rssBytes(); err == nil {
				b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
			}
		})
	}
}

// rssBytes reads the resident set size from /proc/self/statm (Linux).
func rssBytes() (int64, error) {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(data)
	if len(f) < 2 {
		return 0, fmt.Errorf("statm: unexpected %q", data)
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("statm: %w", err)
	}
	return pages * int64(os.Getpagesize()), nil
}
