package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"agent/pkg/nativetest"
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

// BenchmarkBwrapFloor is the least any bubblewrap sandbox costs here: a
// new user and PID namespace with /usr, as the same account as RunTrue's
// (nobody when the benchmark runs as root), and nothing else of ours.
func BenchmarkBwrapFloor(b *testing.B) {
	nativetest.LookPath(b, "bwrap", "bubblewrap")
	var ds []time.Duration
	for b.Loop() {
		cmd := exec.Command("bwrap", "--unshare-user", "--unshare-pid", "--ro-bind", "/usr", "/usr",
			"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "true")
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatal(err, string(out))
		}
		ds = append(ds, time.Since(t0))
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
