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
