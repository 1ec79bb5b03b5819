package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"agent/pkg/sandbox/sandboxtest/linkswap"
)

// A root daemon hands the caller's folder to the sandbox account before a
// run. Another run of the same folder (two exec calls of one step run at
// once) may meanwhile swap a directory of the folder for a symbolic link
// to a host directory: the walk must never follow it and chown the host's
// files (a run could then read /etc/ssl/private as nobody).
func TestHandOverRaceWithSymlinkSwap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	folder, outside := linkswap.Start(t)
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		// Give the folder back to root so that every walk chowns again.
		_ = filepath.Walk(folder, func(p string, _ os.FileInfo, _ error) error { _ = os.Lchown(p, 0, 0); return nil })
		_ = tend(folder, &Account{UID: 12345, GID: 12345})
		var st syscall.Stat_t
		if err := syscall.Stat(secret, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 0 {
			t.Fatalf("walk %d followed a swapped-in symbolic link: %s outside the folder is now owned by %d", i, secret, st.Uid)
		}
	}
}

// The disk watchdog measures a run's folder every 250 ms while another run
// of the folder may swap a directory for a link to a host directory: the
// measurement must stay in the folder (not walk the host's tree, counting
// what lies there).
func TestUsageRaceWithSymlinkSwap(t *testing.T) {
	folder, outside := linkswap.Start(t)
	// A sparse host file that would count as a terabyte.
	f, err := os.Create(filepath.Join(outside, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	f.Close()
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if n, _, _ := usage(folder); n >= 1<<39 {
			t.Fatalf("measurement %d followed a swapped-in symbolic link: %d bytes", i, n)
		}
	}
}

// A start sweeps what carries its temp dir's mark (an earlier daemon's
// run), and nothing else.
func TestSweepEndsOnlyThisSandboxesLeftovers(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap")
	}
	temp := t.TempDir()
	sum := sha256.Sum256([]byte(temp))
	mark := "agent-sandbox-" + hex.EncodeToString(sum[:6])
	left := exec.Command("/bin/sh", "-c", "sleep 999", mark)
	other := exec.Command("/bin/sh", "-c", "sleep 999", "agent-sandbox-000000000000")
	for _, c := range []*exec.Cmd{left, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer other.Process.Kill()
	if _, err := New(Config{TempDir: temp}); err != nil {
		t.Fatal(err)
	}
	err := left.Wait()
	if ws, ok := left.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the leftover was not killed: %v", err)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("another sandbox's run was killed: %v", err)
	}
}

// A file the run made read-only (writing on through a descriptor it kept
// open) is cut back all the same, and keeps its mode; the daemon is not
// root here (a root test runs this part as nobody), so the permission
// bits bind it as they bind the shipped service's user.
func TestCutBackReachesAReadOnlyFile(t *testing.T) {
	if dir := os.Getenv("AGENT_CUTBACK_DIR"); dir != "" {
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if err := cutBack(root, "grown", 0o444, fileState{size: 5, blocks: 4096}); err != nil {
			t.Fatal(err)
		}
		return
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "grown")
	if err := os.WriteFile(p, make([]byte, 1<<20), 0o444); err != nil {
		t.Fatal(err)
	}
	self := os.Args[0]
	if os.Geteuid() == 0 { // nobody cannot reach the build's directory: a copy it can
		b, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		self = filepath.Join(t.TempDir(), "sandbox.test")
		if err := os.WriteFile(self, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(self), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(filepath.Dir(self)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(self, "-test.run=^TestCutBackReachesAReadOnlyFile$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AGENT_CUTBACK_DIR="+dir)
	if os.Geteuid() == 0 {
		if err := os.Chown(filepath.Dir(dir), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cut back as the file's owner: %v\n%s", err, out)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 5 || fi.Mode().Perm() != 0o444 {
		t.Errorf("size %d mode %v after the cut, want 5 and -r--r--r--", fi.Size(), fi.Mode().Perm())
	}
}
