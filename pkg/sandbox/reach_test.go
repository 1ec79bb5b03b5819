package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/sandbox"
	"agent/pkg/sandbox/sandboxtest"
)

var nobody = &sandbox.Account{UID: 65534, GID: 65534, Groups: []int{0}, Name: "nobody"}

// privateTree is a directory under a 0700 one owned by the test's user
// (root: "make run" in a clone under /root), with an account that is
// neither the owner nor in its group.
func privateTree(t *testing.T) (private, inside string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the sandbox runs as another account only under root")
	}
	base := sandboxtest.Dir(t)
	private = filepath.Join(base, "root")
	inside = filepath.Join(private, "clone")
	if err := os.MkdirAll(inside, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	return private, inside
}

func TestReachNamesTheDirectoryThatStopsTheAccount(t *testing.T) {
	private, inside := privateTree(t)
	err := sandbox.Reach(filepath.Join(inside, "var", "sandbox"), nobody) // not made yet
	var un *sandbox.Unreachable
	if !errors.As(err, &un) {
		t.Fatalf("Reach under a 0700 directory = %v, want *Unreachable", err)
	}
	if un.Dir != private || un.Mode.Perm() != 0o700 || un.Class != "group" {
		t.Errorf("blocked at %s %s (%s), want %s 0700 (group)", un.Dir, un.Mode.Perm(), un.Class, private)
	}
	if un.Fix() != "chmod g+x "+private || !strings.Contains(err.Error(), "nobody") || !strings.Contains(err.Error(), "-rwx------") {
		t.Errorf("fix %q, message %q", un.Fix(), err)
	}
	stranger := &sandbox.Account{UID: 65534, GID: 65534, Name: "nobody"}
	if errors.As(sandbox.Reach(inside, stranger), &un); un.Class != "others" || un.Fix() != "chmod o+x "+un.Dir {
		t.Errorf("an account outside the group: %s, %q", un.Class, un.Fix())
	}
	if err := os.Chmod(private, 0o710); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.Reach(filepath.Join(inside, "var", "sandbox"), nobody); err != nil {
		t.Errorf("with g+x: %v", err)
	}
	if err := sandbox.Reach(inside, nil); err != nil {
		t.Errorf("root reaches everything: %v", err)
	}
}

// A link on the way is followed: what counts is where it leads.
func TestReachFollowsLinks(t *testing.T) {
	private, inside := privateTree(t)
	link := filepath.Join(filepath.Dir(private), "link")
	if err := os.Symlink(inside, link); err != nil {
		t.Fatal(err)
	}
	var un *sandbox.Unreachable
	if err := sandbox.Reach(link, nobody); !errors.As(err, &un) || un.Dir != private {
		t.Errorf("Reach through a link into a 0700 directory = %v", err)
	}
}

// The sandbox's own files go where its account can reach them: the state
// dir's sandbox/ when it can, a directory of the daemon's under /var/tmp
// otherwise.
func TestTempDirMovesOutOfAPrivateStateDir(t *testing.T) {
	_, inside := privateTree(t)
	host := sandbox.HostFor(0, 0)
	state := filepath.Join(inside, "var")
	dir, why, err := host.TempDir(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if why == nil || !strings.HasPrefix(dir, "/var/tmp/agent-sandbox-") {
		t.Fatalf("temp dir %s (why %v): want one under /var/tmp", dir, why)
	}
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Fatalf("temp dir: %v %v", fi, err)
	}
	if err := sandbox.Reach(dir, host.As); err != nil {
		t.Errorf("the fallback is not reachable: %v", err)
	}
	again, _, err := host.TempDir(state)
	if err != nil || again != dir {
		t.Errorf("a second start: %s %v, want the same %s", again, err, dir)
	}
	other, _, _ := host.TempDir(filepath.Join(inside, "var2"))
	if other == dir {
		t.Errorf("two state dirs share %s", dir)
	}
	os.RemoveAll(other)

	// /var/tmp is everyone's: a link or another user's directory there
	// is refused, not used.
	os.RemoveAll(dir)
	if err := os.Symlink(inside, dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := host.TempDir(state); err == nil || !strings.Contains(err.Error(), "not a directory of the daemon's") {
		t.Errorf("a link planted at %s: %v", dir, err)
	}
	os.Remove(dir)
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, _, err := host.TempDir(state); err == nil || !strings.Contains(err.Error(), "belongs to nobody") {
		t.Errorf("another user's directory at %s: %v", dir, err)
	}

	// Reachable: the state dir's own.
	open := filepath.Join(sandboxtest.Dir(t), "var")
	if dir, why, err := host.TempDir(open); err != nil || why != nil || dir != filepath.Join(open, "sandbox") {
		t.Errorf("reachable state dir: %s %v %v", dir, why, err)
	}
}

// The probe binds what runs bind: a workspace the account cannot reach
// fails it with the directory, its mode and the fix, not bwrap's "Can't
// find source path" at the first run; a reachable one passes, and the
// probe's folder is gone afterwards.
func TestProbeChecksTheFoldersRunsBind(t *testing.T) {
	private, inside := privateTree(t)
	s := newSandbox(t, func(c *sandbox.Config) { c.As = nobody })
	ws := filepath.Join(inside, "ws")
	for _, d := range []string{"files", "shared"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	f := sandbox.Folders{Within: filepath.Join(ws, "files"), Read: []string{filepath.Join(ws, "shared"), filepath.Join(ws, "skills")}, Keys: "agent.workspace"}
	err := s.ProbeFolders(context.Background(), f)
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("probe over an unreachable workspace: %v", err)
	}
	for _, want := range []string{private, "-rwx------", "chmod g+x " + private, "put agent.workspace outside " + private} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("probe error lacks %q: %v", want, err)
		}
	}
	if err := os.Chmod(private, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := s.ProbeFolders(context.Background(), f); err != nil {
		t.Fatalf("probe over a reachable workspace: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(ws, "files", "*")); len(left) > 0 {
		t.Errorf("the probe left %v", left)
	}
	if left, _ := filepath.Glob(filepath.Join(ws, "files", ".*")); len(left) > 0 {
		t.Errorf("the probe left %v", left)
	}
}

// A probe folder left by a probe cut short (the daemon killed mid-probe)
// is removed by a later probe; a recent one (a probe running now, doctor
// beside the daemon) stays.
func TestProbeRemovesFoldersOfProbesCutShort(t *testing.T) {
	s := newSandbox(t, nil)
	within := openDir(t)
	old, recent := filepath.Join(within, ".sandbox-probe-old"), filepath.Join(within, ".sandbox-probe-recent")
	for _, d := range []string{old, recent} {
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	then := time.Now().Add(-10 * time.Minute)
	if err := os.Chtimes(old, then, then); err != nil {
		t.Fatal(err)
	}
	if err := s.ProbeFolders(context.Background(), sandbox.Folders{Within: within}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the old probe folder stayed: %v", err)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Errorf("a recent probe folder went: %v", err)
	}
}
