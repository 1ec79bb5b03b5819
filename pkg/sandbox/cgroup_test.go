package sandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"agent/pkg/sandbox"
)

// enterOwnCgroup moves the test process into a cgroup of its own (as a
// service has), where the box has cgroup v2 with the memory and pids
// controllers and AGENT_CGROUP_TEST=1 allows moving it; else it skips.
func enterOwnCgroup(t *testing.T) {
	t.Helper()
	if os.Getenv("AGENT_CGROUP_TEST") != "1" {
		t.Skip("set AGENT_CGROUP_TEST=1 to let the test move itself into a cgroup of its own (cgroup v2, root)")
	}
	if err := sandbox.CgroupSupport(); err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	own := ""
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			own = p
		}
	}
	if filepath.Base(own) == "daemon" || os.Getenv("AGENT_CGROUP_TEST_ALONE") == "1" {
		return // moved already, or started alone in a cgroup as a service is
	}
	dir := filepath.Join("/sys/fs/cgroup", own, fmt.Sprintf("agent-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		t.Skipf("cannot enter a cgroup of its own: %v", err)
	}
}

// With cgroups, memory bounds the whole run: four processes that each
// stay under the per-process limit are stopped together, and nothing of
// the run is left after it (not even what it detached with setsid).
func TestCgroupBoundsTheWholeRun(t *testing.T) {
	enterOwnCgroup(t)
	s := newSandbox(t, nil)
	under, why := s.Cgroups()
	if under == "" {
		t.Fatalf("no per-run cgroups: %s", why)
	}
	res := sh(t, s, sandbox.Spec{Work: openDir(t), Limits: sandbox.Limits{MemoryMB: 256}},
		`for i in 1 2 3 4; do python3 -c 'b = bytearray(150 << 20); import time; time.sleep(5)' & done; setsid sleep 4321 & wait`)
	if res.Limit != sandbox.LimitMemory {
		t.Fatalf("limit %q (%s), exit %d, stderr %q: 600 MB in four processes under a 256 MB run", res.Limit, res.Detail, res.Exit, res.Stderr)
	}
	if out, _ := exec.Command("pgrep", "-f", "sleep 4321").Output(); len(out) > 0 {
		t.Errorf("a process of the run outlived it: pid %s", out)
	}
	// The emptied cgroup is removed in the background, within moments.
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, _ := filepath.Glob(filepath.Join(under, "run-*"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run cgroups left behind: %v", left)
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	res = sh(t, s, sandbox.Spec{Work: openDir(t)}, `echo ok`)
	if res.Limit != sandbox.LimitNone || string(res.Stdout) != "ok\n" {
		t.Fatalf("a plain run in a cgroup: %q %q %q", res.Limit, res.Stdout, res.Stderr)
	}
	t.Logf("a run in a cgroup of its own: %v", time.Since(start))
}

// The cost of a cgroup per run: the median of 15 plain runs with and
// without (interleaved), logged for bench/RESULTS.md.
func TestCgroupRunOverhead(t *testing.T) {
	enterOwnCgroup(t)
	with := newSandbox(t, nil)
	if under, why := with.Cgroups(); under == "" {
		t.Fatalf("no per-run cgroups: %s", why)
	}
	without := newSandbox(t, func(c *sandbox.Config) { c.NoCgroups = true })
	var a, b []time.Duration
	for range 15 {
		for _, x := range []struct {
			s   *sandbox.Sandbox
			out *[]time.Duration
		}{{with, &a}, {without, &b}} {
			start := time.Now()
			sh(t, x.s, sandbox.Spec{Work: openDir(t)}, `true`)
			*x.out = append(*x.out, time.Since(start))
		}
	}
	med := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	t.Logf("run p50: %v with a cgroup of its own, %v without (15 interleaved runs each)", med(a), med(b))
}
