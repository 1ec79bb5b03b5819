package sandbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"agent/pkg/nativetest"
	"agent/pkg/sandbox"
)

// A daemon killed while a run goes (SIGKILL, the OOM killer) leaves no
// process of the run behind once the next daemon has started: here the
// daemon is this test binary started again, running one sandboxed sleep,
// and killed while bwrap sets the run up or while the command runs. A
// bwrap killed at the wrong moment of its set-up leaves its other half
// waiting for it forever (seen about once in 150 kills); the watchdog
// ends a run whose command started, the next start's sweep the rest.
func TestNoRunOutlivesAKilledDaemon(t *testing.T) {
	if os.Getenv("AGENT_SANDBOX_DAEMON") != "" {
		return // the daemon's side: TestHelperDaemonRun
	}
	nativetest.LookPath(t, "bwrap", "bubblewrap")
	for i := range 8 {
		during := i%2 == 0 // kill during the set-up, or once the command runs
		marker := fmt.Sprintf("%d.%d", 70000+rand.IntN(20000), i)
		work, temp := openDir(t), openDir(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDaemonRun$", "-test.count=1")
		cmd.Env = append(os.Environ(), "AGENT_SANDBOX_DAEMON="+marker, "AGENT_SANDBOX_WORK="+work, "AGENT_SANDBOX_TEMP="+temp)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started := func() bool { _, err := os.Stat(filepath.Join(work, "up")); return err == nil }
		if during {
			started = func() bool { m, _ := filepath.Glob(filepath.Join(temp, "run-*")); return len(m) > 0 }
		}
		if !waitFor(started) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the run never started")
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		alive := func() bool { return exec.Command("pgrep", "-f", "sleep "+marker).Run() == nil }
		if !during && !waitFor(func() bool { return !alive() }) {
			exec.Command("pkill", "-KILL", "-f", "sleep "+marker).Run()
			t.Fatalf("kill %d: the run's sleep %s outlived the daemon that started it (its watchdog did not end it)", i, marker)
		}
		// The next daemon on the same state.
		if _, err := sandbox.New(sandbox.Config{TempDir: temp}); err != nil {
			t.Fatal(err)
		}
		if !waitFor(func() bool { return !alive() }) {
			exec.Command("pkill", "-KILL", "-f", "sleep "+marker).Run()
			t.Fatalf("kill %d (during set-up: %v): a process of the run outlived the daemon and the next start", i, during)
		}
	}
}

// TestHelperDaemonRun is the daemon of TestNoRunOutlivesAKilledDaemon.
func TestHelperDaemonRun(t *testing.T) {
	marker := os.Getenv("AGENT_SANDBOX_DAEMON")
	if marker == "" {
		t.Skip("started by TestNoRunOutlivesAKilledDaemon only")
	}
	s, err := sandbox.New(sandbox.Config{TempDir: os.Getenv("AGENT_SANDBOX_TEMP"), Limits: sandbox.Limits{Timeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Run(context.Background(), sandbox.Spec{Work: os.Getenv("AGENT_SANDBOX_WORK"),
		Argv: []string{"/bin/sh", "-c", "sleep " + marker + " & sleep " + marker + " & echo up > up; wait"}})
}

// waitFor polls cond for up to 15 s (a condition, not a pause: it
// returns as soon as cond holds).
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return cond()
}
