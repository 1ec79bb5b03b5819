package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
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
	base := t.TempDir()
	folder := filepath.Join(base, "folder")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{folder, outside, filepath.Join(folder, "zz")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Entries walked before zz widen the window between listing the folder
	// and walking into zz.
	for i := range 500 {
		if err := os.WriteFile(filepath.Join(folder, fmt.Sprintf("pad%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	for _, p := range []string{secret, filepath.Join(folder, "zz", "secret")} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(folder, "zz.l")); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		zz, d, l := filepath.Join(folder, "zz"), filepath.Join(folder, "zz.d"), filepath.Join(folder, "zz.l")
		for !stop.Load() {
			_ = os.Rename(zz, d)
			_ = os.Rename(l, zz)
			_ = os.Rename(zz, l)
			_ = os.Rename(d, zz)
		}
	}()
	defer func() { stop.Store(true); <-done }()
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
	base := t.TempDir()
	folder := filepath.Join(base, "folder")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{folder, outside, filepath.Join(folder, "zz")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 500 {
		if err := os.WriteFile(filepath.Join(folder, fmt.Sprintf("pad%04d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A sparse host file that would count as a terabyte.
	f, err := os.Create(filepath.Join(outside, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Symlink(outside, filepath.Join(folder, "zz.l")); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		zz, d, l := filepath.Join(folder, "zz"), filepath.Join(folder, "zz.d"), filepath.Join(folder, "zz.l")
		for !stop.Load() {
			_ = os.Rename(zz, d)
			_ = os.Rename(l, zz)
			_ = os.Rename(zz, l)
			_ = os.Rename(d, zz)
		}
	}()
	defer func() { stop.Store(true); <-done }()
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if n, _, _ := usage(folder); n >= 1<<39 {
			t.Fatalf("measurement %d followed a swapped-in symbolic link: %d bytes", i, n)
		}
	}
}
