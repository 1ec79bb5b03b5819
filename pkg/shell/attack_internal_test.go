package shell

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/sandbox/sandboxtest/linkswap"
)

// The daemon snapshots the caller's folder before and after a run to list
// the files it changed. Another run of the same folder (two exec calls of
// one step run at once) may meanwhile swap a directory for a symbolic link
// to a host directory: the snapshot must never list what lies there (the
// names and sizes of the state dir, of other users' folders).
func TestSnapshotRaceWithSymlinkSwap(t *testing.T) {
	folder, outside := linkswap.Start(t)
	if err := os.WriteFile(filepath.Join(outside, "host-secret.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		for p := range snapshot(folder) {
			if strings.Contains(p, "host-secret") {
				t.Fatalf("snapshot %d followed a swapped-in symbolic link and listed %s", i, p)
			}
		}
	}
}
