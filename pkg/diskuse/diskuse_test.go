package diskuse

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A sparse file costs the blocks it holds, a preallocated one the blocks
// it reserved beyond its size, an empty one an entry.
func TestOfCountsAllocatedBlocks(t *testing.T) {
	dir := t.TempDir()
	stat := func(name string) os.FileInfo {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := Of(stat("sparse")); got > 1<<20 {
		t.Errorf("a 1 GiB sparse file costs %d bytes, want next to nothing", got)
	}
	f, err = os.Create(filepath.Join(dir, "prealloc"))
	if err != nil {
		t.Fatal(err)
	}
	const keepSize = 1 // FALLOC_FL_KEEP_SIZE
	err = syscall.Fallocate(int(f.Fd()), keepSize, 0, 8<<20)
	f.Close()
	if err != nil {
		t.Skipf("fallocate here: %v", err)
	}
	fi := stat("prealloc")
	if fi.Size() != 0 {
		t.Fatalf("size %d after fallocate --keep-size", fi.Size())
	}
	if got := Of(fi); got < 8<<20 {
		t.Errorf("8 MiB preallocated beyond a size of 0 costs %d bytes, want 8 MiB", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Of(stat("empty")); got != MinEntry {
		t.Errorf("an empty file costs %d, want %d", got, MinEntry)
	}
}
