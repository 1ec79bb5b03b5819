package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/nativetest"
	"agent/pkg/sandbox"
)

// openUp makes the directories above the config's (t.TempDir: its parent
// is 0700) passable, as an installation outside a private home is.
func openUp(t *testing.T, e Env) {
	t.Helper()
	dir := filepath.Dir(e.Config.Path)
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSandboxCheck(t *testing.T) {
	nativetest.LookPath(t, "bwrap", "bubblewrap")
	nativetest.LookPath(t, "pdftotext", "poppler-utils")
	nativetest.FFmpeg(t)
	nativetest.EspeakNG(t)
	e := baseEnv(t, "[sandbox]\nnetwork = \"on\"\nmemory_mb = 300\n", nil)
	openUp(t, e)
	r := e.checkSandbox(context.Background())
	if r.Level != OK || !strings.Contains(r.Detail, "bubblewrap works (network on when a run asks") || !strings.Contains(r.Detail, "300 MB") {
		t.Errorf("working sandbox: %+v", r)
	}
	e.Bwrap = "/nonexistent/bwrap"
	r = e.checkSandbox(context.Background())
	if r.Level != Warn || !strings.Contains(r.Detail, "NOT offered") || r.Fix != "apt install bubblewrap" {
		t.Errorf("no bwrap: %+v", r)
	}
}

// Run as root in a private directory ("make run" in a clone under /root):
// doctor's probe is the daemon's, so it fails as the daemon's does, naming
// the directory that stops the sandbox's account and the fix, rather than
// passing on a temporary directory of its own.
func TestSandboxCheckInAPrivateDirectory(t *testing.T) {
	nativetest.LookPath(t, "bwrap", "bubblewrap")
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root daemon's sandbox runs as another account")
	}
	e := baseEnv(t, "", nil)
	private := filepath.Dir(filepath.Dir(e.Config.Path)) // t.TempDir's parent: 0700
	if err := os.MkdirAll(e.Config.Agent.StateDir, 0o750); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(sandbox.FallbackTempDir(e.Config.Agent.StateDir))
	})
	r := e.checkSandbox(context.Background())
	if r.Level != Warn || !strings.Contains(r.Detail, "NOT offered") || !strings.Contains(r.Detail, private+" is -rwx------") || r.Fix != "chmod g+x "+private+", or put agent.workspace and agent.state_dir outside "+private {
		t.Errorf("sandbox under a private directory: %+v", r)
	}
}

// Doctor run as root (sudo agentctl doctor) on a box where the daemon runs
// as its own user probes as that user, the state dir's owner: folders only
// it may enter are no failure, as they are none for the daemon.
func TestSandboxCheckProbesAsTheStateDirsOwner(t *testing.T) {
	nativetest.LookPath(t, "bwrap", "bubblewrap")
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root takes on another user")
	}
	const daemonUser = 12345 // an account with no name, like none other
	e := baseEnv(t, "", nil)
	dir := filepath.Dir(e.Config.Path)
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{e.Config.Agent.StateDir, e.Config.Agent.Workspace, filepath.Join(e.Config.Agent.Workspace, "files")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, daemonUser, daemonUser); err != nil {
			t.Fatal(err)
		}
	}
	r := e.checkSandbox(context.Background())
	if !strings.Contains(r.Detail, "bubblewrap works") {
		t.Errorf("the daemon's user reaches its own folders, doctor says: %+v", r)
	}
	if left, _ := filepath.Glob(filepath.Join(e.Config.Agent.Workspace, "files", ".*")); len(left) > 0 {
		t.Errorf("the probe left %v", left)
	}
}
