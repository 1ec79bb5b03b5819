package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestPrepareCreatesAndProbes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := Prepare(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("probe left files behind: %v", entries)
	}
}

func TestPrepareUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		// root ignores permission bits; use a path under a regular file instead.
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, nil, 0o600)
		if err := Prepare(filepath.Join(f, "sub")); err == nil || !strings.Contains(err.Error(), "fix:") {
			t.Fatalf("err = %v", err)
		}
		return
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o500)
	defer os.Chmod(dir, 0o700)
	if err := Prepare(dir); err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("err = %v", err)
	}
}

func TestLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file description, so a second open in
	// the same process conflicts just as another process would.
	_, err = Acquire(dir)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Acquire: %v; want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("error does not name the holder: %v", err)
	}
	if got := Holder(dir); got != os.Getpid() {
		t.Errorf("Holder = %d; want %d", got, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if got := Holder(dir); got != 0 {
		t.Errorf("Holder after release = %d", got)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	l2.Release()
}

// TestPrepareTightensALooseDir: a state dir others can read (0755, as
// mkdir makes it under the usual umask) or write is 0750 after Prepare;
// a private one stays as it is.
func TestPrepareTightensALooseDir(t *testing.T) {
	for _, c := range []struct{ before, after os.FileMode }{
		{0o755, 0o750}, {0o777, 0o750}, {0o775, 0o750}, {0o701, 0o700}, {0o700, 0o700}, {0o750, 0o750},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, c.before); err != nil {
			t.Fatal(err)
		}
		if err := Prepare(dir); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != c.after {
			t.Errorf("%04o: after Prepare %04o; want %04o", c.before, got, c.after)
		}
	}
}

func TestTightenReports(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	was, changed, err := Tighten(dir)
	if err != nil || !changed || was != 0o755 {
		t.Fatalf("Tighten = %04o, %v, %v", was, changed, err)
	}
	if _, changed, err := Tighten(dir); err != nil || changed {
		t.Fatalf("second Tighten changed it again: %v %v", changed, err)
	}
	if _, _, err := Tighten(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("no error for a missing dir")
	}
}

func TestTightenLeavesSharedDirs(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777|os.ModeSticky)
	if _, changed, err := Tighten(dir); changed || err == nil || !strings.Contains(err.Error(), "shared") {
		t.Fatalf("sticky dir: changed %v, err %v", changed, err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o777 {
		t.Fatalf("sticky dir chmodded to %v", st.Mode())
	}
	setgid := t.TempDir()
	os.Chmod(setgid, 0o775|os.ModeSetgid)
	if _, changed, err := Tighten(setgid); !changed || err != nil {
		t.Fatalf("setgid dir: %v %v", changed, err)
	}
	if st, _ := os.Stat(setgid); st.Mode()&os.ModeSetgid == 0 || st.Mode().Perm() != 0o750 {
		t.Fatalf("setgid dir is %v; want setgid kept, 0750", st.Mode())
	}
}
