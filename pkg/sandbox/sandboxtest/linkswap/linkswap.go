// Package linkswap sets up the race a hostile run can play on a folder
// the daemon walks: a directory of the folder swapped, again and again,
// for a symbolic link to a directory outside it. Tests of every walk over
// a user's folder use it (it imports nothing of the sandbox, so the
// sandbox's own internal tests can too).
package linkswap

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// Start makes folder and outside under a temporary directory: folder holds
// 500 empty files (they widen the window between listing the folder and
// walking into the swapped directory) and a directory "zz"; until the test
// ends, zz keeps trading places with a link to outside. The caller puts
// what must never be reached in outside.
func Start(tb testing.TB) (folder, outside string) {
	tb.Helper()
	base := tb.TempDir()
	folder, outside = filepath.Join(base, "folder"), filepath.Join(base, "outside")
	for _, d := range []string{folder, outside, filepath.Join(folder, "zz")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range 500 {
		if err := os.WriteFile(filepath.Join(folder, fmt.Sprintf("pad%04d", i)), nil, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(folder, "zz.l")); err != nil {
		tb.Fatal(err)
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
	tb.Cleanup(func() { stop.Store(true); <-done })
	return folder, outside
}
