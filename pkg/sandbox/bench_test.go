package sandbox_test

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"agent/pkg/sandbox"
	"agent/pkg/sandbox/sandboxtest"
)

// reportPercentiles adds p50_ms and p99_ms of ds to b's metrics.
func reportPercentiles(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.50), "p50_ms")
	b.ReportMetric(at(0.99), "p99_ms")
}

// BenchmarkRunTrue is a sandbox's start-up: `true` run in one, with the
// caller's folder and the shared area bound, as exec runs it (a root test
// run's sandboxes go as nobody, like a root daemon's).
func BenchmarkRunTrue(b *testing.B) {
	s := sandboxtest.New(b, nil)
	work, shared := sandboxtest.Dir(b), sandboxtest.Dir(b)
	spec := sandbox.Spec{Argv: []string{"true"}, Work: work, Binds: []sandbox.Bind{{Src: shared, Dst: "/shared"}}}
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := s.Run(context.Background(), spec)
		ds = append(ds, time.Since(t0))
		if err != nil || res.Exit != 0 {
			b.Fatal(res, err)
		}
	}
	reportPercentiles(b, ds)
}

// BenchmarkDirectTrue is the reference: `true` started directly.
func BenchmarkDirectTrue(b *testing.B) {
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	reportPercentiles(b, ds)
}
