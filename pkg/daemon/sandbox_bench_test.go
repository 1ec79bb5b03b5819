package daemon

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/metrics"
	"agent/pkg/sandbox/sandboxtest"
)

// BenchmarkExecConcurrent4 measures the daemon's own RSS while 4 users'
// exec runs work at once (each a Python process building a 2-million-item
// list, then sleeping), through the real daemon and the agent loop.
// rss_idle_mb is before the first run, rss_peak_mb the highest sample
// (every 20 ms) during the runs; sandbox_peak_mb is the runs' own
// processes together (outside the daemon).
func BenchmarkExecConcurrent4(b *testing.B) {
	sandboxtest.New(b, nil)
	llmSrv := execLLM(b)
	cfg, _, ctx := startSandboxDaemon(b, fmt.Sprintf("[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = %q\n[agent]\nstate_dir = \"var\"\n", llmSrv.BaseURL()))
	c := admin.NewClient(cfg.Server.AdminSocket)
	page := os.Getpagesize()
	time.Sleep(time.Second)
	idle := metrics.ResidentBytes(page)
	var peak, sandboxPeak int64
	for b.Loop() {
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					peak = max(peak, metrics.ResidentBytes(page))
					sandboxPeak = max(sandboxPeak, descendantsRSS(os.Getpid(), page))
				}
			}
		}()
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				res, err := c.Send(ctx, admin.SendRequest{To: fmt.Sprintf("user%d", i), Text: "RUN: python3 -c 'import time; x = [i * i for i in range(2000000)]; time.sleep(1); print(len(x))'"})
				if err != nil || !strings.Contains(strings.Join(res.Replies, ""), "2000000") {
					b.Errorf("run %d: %+v %v", i, res, err)
				}
			})
		}
		wg.Wait()
		close(stop)
		<-sampled
	}
	b.ReportMetric(float64(idle)/(1<<20), "rss_idle_mb")
	b.ReportMetric(float64(peak)/(1<<20), "rss_peak_mb")
	b.ReportMetric(float64(sandboxPeak)/(1<<20), "sandbox_peak_mb")
}

// descendantsRSS sums the resident memory of pid's descendants.
func descendantsRSS(pid, page int) int64 {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces; cut after ')'.
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			if f := strings.Fields(s[i+1:]); len(f) > 1 {
				parent[p], _ = strconv.Atoi(f[1])
			}
		}
	}
	var total int64
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				statm, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/statm")
				if f := strings.Fields(string(statm)); err == nil && len(f) > 1 {
					n, _ := strconv.ParseInt(f[1], 10, 64)
					total += n * int64(page)
				}
				break
			}
		}
	}
	return total
}
