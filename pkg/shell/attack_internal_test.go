package shell

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The daemon snapshots the caller's folder before and after a run to list
// the files it changed. Another run of the same folder (two exec calls of
// one step run at once) may meanwhile swap a directory for a symbolic link
// to a host directory: the snapshot must never list what lies there (the
// names and sizes of the state dir, of other users' folders).
func TestSnapshotRaceWithSymlinkSwap(t *testing.T) {
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
	if err := os.WriteFile(filepath.Join(outside, "host-secret.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
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
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		for p := range snapshot(folder) {
			if strings.Contains(p, "host-secret") {
				t.Fatalf("snapshot %d followed a swapped-in symbolic link and listed %s", i, p)
			}
		}
	}
}
