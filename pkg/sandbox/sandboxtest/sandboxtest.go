// Package sandboxtest makes real sandboxes for tests: bubblewrap is
// required (the test skips without it, or fails under
// AGENT_REQUIRE_NATIVE=1), and the directories it hands out are reachable
// by the account a root test run's sandboxes use.
package sandboxtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"agent/pkg/nativetest"
	"agent/pkg/sandbox"
)

// Limits are small limits for tests.
var Limits = sandbox.Limits{Timeout: 30 * time.Second, CPUSeconds: 20, MemoryMB: 512, MaxProcs: 32, FileMB: 50, OutputKB: 16}

// New returns a sandbox with Limits (mod may change the config first).
func New(tb testing.TB, mod func(*sandbox.Config)) *sandbox.Sandbox {
	tb.Helper()
	nativetest.LookPath(tb, "bwrap", "bubblewrap")
	cfg := sandbox.Config{TempDir: Dir(tb), Limits: Limits}
	if mod != nil {
		mod(&cfg)
	}
	s, err := sandbox.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Dir is a temporary directory a sandbox account can reach: a test run as
// root runs its sandboxes as nobody with the test's group, and
// t.TempDir's parent is 0700.
func Dir(tb testing.TB) string {
	tb.Helper()
	d := tb.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o750); err != nil {
			tb.Fatal(err)
		}
	}
	return d
}
