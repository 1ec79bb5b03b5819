package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"agent/pkg/sandbox"
)

// heldBytes is what dir's tree holds of the disk (allocated blocks).
func heldBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A run cannot reserve disk with fallocate (gigabytes at once, faster than
// any measurement): the call fails as unsupported, and a program that
// falls back to writing (glibc's posix_fallocate) is measured as it goes
// and stopped at the quota, its file taken back.
func TestPreallocationIsRefusedInside(t *testing.T) {
	s := newSandbox(t, nil)
	work := openDir(t)
	res := sh(t, s, sandbox.Spec{Work: work, MaxWrite: 8 << 20}, `: > hoard && fallocate --keep-size -l 64M hoard; echo "keep-size $?"; fallocate -l 64M hoard2; echo "plain $?"`)
	if res.Limit != sandbox.LimitNone || !strings.Contains(string(res.Stdout), "keep-size 1") || !strings.Contains(string(res.Stdout), "plain 1") {
		t.Fatalf("limit %q (%s), stdout %q, stderr %q: fallocate worked inside", res.Limit, res.Detail, res.Stdout, res.Stderr)
	}
	if n := heldBytes(t, work); n > 1<<20 {
		t.Errorf("the folder holds %d bytes after refused preallocations", n)
	}
	res = sh(t, s, sandbox.Spec{Work: work, MaxWrite: 8 << 20}, `python3 -c 'import os; f = os.open("p", os.O_CREAT | os.O_WRONLY); os.posix_fallocate(f, 0, 256 << 20); print("reserved")'`)
	if res.Limit != sandbox.LimitDisk {
		t.Fatalf("limit %q (%s), stdout %q, stderr %q: posix_fallocate's writes went past an 8 MiB quota", res.Limit, res.Detail, res.Stdout, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(work, "p")); !os.IsNotExist(err) {
		t.Errorf("the preallocated file stayed (%v)", err)
	}
}

// A sparse file holds no disk: a run that makes one is not stopped.
func TestSparseFileIsNotChargedItsSize(t *testing.T) {
	s := newSandbox(t, nil)
	work := openDir(t)
	res := sh(t, s, sandbox.Spec{Work: work, MaxWrite: 8 << 20, Limits: sandbox.Limits{FileMB: 1 << 14}}, `truncate -s 8G sparse && sleep 0.6 && echo done`)
	if res.Limit != sandbox.LimitNone || strings.TrimSpace(string(res.Stdout)) != "done" {
		t.Fatalf("limit %q (%s), stdout %q: a sparse file was charged its size", res.Limit, res.Detail, res.Stdout)
	}
}

// A run stopped for going over the quota leaves the folder as it found
// it, size for size: the files it made are removed, the files it grew are
// cut back, what was there before stays.
func TestRunOverQuotaIsTakenBack(t *testing.T) {
	s := newSandbox(t, nil)
	work := openDir(t)
	if err := os.WriteFile(filepath.Join(work, "keep.txt"), []byte(strings.Repeat("k", 10000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "grow.txt"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(work, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	held := heldBytes(t, work)
	res := sh(t, s, sandbox.Spec{Work: work, MaxWrite: 8 << 20},
		`head -c 3000000 /dev/zero >> grow.txt && mkdir -p new/deep old/sub &&
		 i=0; while :; do i=$((i+1)); head -c 1000000 /dev/zero > new/deep/f$i; head -c 1000 /dev/zero > old/sub/g$i; done`)
	if res.Limit != sandbox.LimitDisk {
		t.Fatalf("limit %q (%s), exit %d %q", res.Limit, res.Detail, res.Exit, res.Stderr)
	}
	if !strings.Contains(res.Detail, "taken back") {
		t.Errorf("the result does not say what was undone: %q", res.Detail)
	}
	b, err := os.ReadFile(filepath.Join(work, "grow.txt"))
	if err != nil || string(b) != "12345" {
		t.Errorf("grow.txt holds %d bytes (%v), want its 5 bytes before", len(b), err)
	}
	if b, err := os.ReadFile(filepath.Join(work, "keep.txt")); err != nil || len(b) != 10000 {
		t.Errorf("keep.txt: %d bytes, %v", len(b), err)
	}
	for _, gone := range []string{"new", "old/sub"} {
		if _, err := os.Lstat(filepath.Join(work, gone)); !os.IsNotExist(err) {
			t.Errorf("%s, made by the stopped run, is still there (%v)", gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "old")); err != nil {
		t.Errorf("old/, there before the run, is gone: %v", err)
	}
	if n := heldBytes(t, work); n > held {
		t.Errorf("the folder holds %d bytes after the roll-back, %d before", n, held)
	}
}

// A run that goes over the quota and ends before the next measurement is
// measured once more at its end: what it wrote does not stay either.
func TestFastRunOverQuotaIsTakenBack(t *testing.T) {
	s := newSandbox(t, nil)
	work := openDir(t)
	res := sh(t, s, sandbox.Spec{Work: work, MaxWrite: 2 << 20}, `head -c 3000000 /dev/zero > f`)
	if res.Limit != sandbox.LimitDisk || !strings.Contains(res.Detail, "taken back") {
		t.Fatalf("limit %q (%s), exit %d", res.Limit, res.Detail, res.Exit)
	}
	if _, err := os.Stat(filepath.Join(work, "f")); !os.IsNotExist(err) {
		t.Errorf("the file written past the quota stayed (%v)", err)
	}
}

// io_uring is not there inside a run: its fallocate operation would
// reserve disk past the filter on the fallocate call.
func TestIOUringIsRefusedInside(t *testing.T) {
	s := newSandbox(t, nil)
	res := sh(t, s, sandbox.Spec{Work: openDir(t)}, `python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
print(libc.syscall(425, 8, params), ctypes.get_errno())'`)
	if got := strings.TrimSpace(string(res.Stdout)); got != "-1 38" {
		t.Fatalf("io_uring_setup inside: %q (want -1 and ENOSYS), stderr %q", got, res.Stderr)
	}
}

// A file that was there before and that the run moves into a folder it
// made survives the take-back: only what the run added goes.
func TestTakeBackKeepsWhatWasThereBefore(t *testing.T) {
	s := newSandbox(t, nil)
	work := openDir(t)
	if err := os.WriteFile(filepath.Join(work, "precious.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := sh(t, s, sandbox.Spec{Work: work, MaxWrite: 4 << 20},
		`mkdir -p out/deeper && mv precious.csv out/deeper/ && i=0; while :; do i=$((i+1)); head -c 1000000 /dev/zero > out/f$i; done`)
	if res.Limit != sandbox.LimitDisk || !strings.Contains(res.Detail, "taken back") {
		t.Fatalf("limit %q (%s)", res.Limit, res.Detail)
	}
	if b, err := os.ReadFile(filepath.Join(work, "out", "deeper", "precious.csv")); err != nil || string(b) != "a,b\n1,2\n" {
		t.Fatalf("the user's file, moved by the run, was lost: %q %v", b, err)
	}
	if m, _ := filepath.Glob(filepath.Join(work, "out", "f*")); len(m) > 0 {
		t.Errorf("the run's files stayed: %v", m)
	}
}

// A run stopped because the disk came down to the reserve keeps what it
// wrote within its quota: the space may have gone to someone else's run,
// and taking back an innocent run's work would lose it.
func TestReserveStopTakesNothingBack(t *testing.T) {
	work := openDir(t)
	var st syscall.Statfs_t
	if err := syscall.Statfs(work, &st); err != nil {
		t.Fatal(err)
	}
	free := int(st.Bavail * uint64(st.Bsize) >> 20)
	s := newSandbox(t, func(c *sandbox.Config) { c.MinFreeMB = free + 1000 })
	// The first measurement stops the run, maybe before it wrote: try
	// until one run says it wrote before it was stopped.
	for try := 0; ; try++ {
		res := sh(t, s, sandbox.Spec{Work: work, MaxWrite: 64 << 20}, `echo mine > kept.txt && echo written; sleep 10`)
		if res.Limit != sandbox.LimitDisk || !strings.Contains(res.Detail, "nearly full") || strings.Contains(res.Detail, "taken back") {
			t.Fatalf("limit %q (%s)", res.Limit, res.Detail)
		}
		if !strings.Contains(string(res.Stdout), "written") {
			if try == 20 {
				t.Skip("no run got to write before the first measurement stopped it")
			}
			continue
		}
		if b, err := os.ReadFile(filepath.Join(work, "kept.txt")); err != nil || string(b) != "mine\n" {
			t.Errorf("the run's file within its quota was taken back: %q %v", b, err)
		}
		return
	}
}
