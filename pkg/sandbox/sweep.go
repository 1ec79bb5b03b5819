package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// procRoot is where processes are listed.
const procRoot = "/proc"

// sweep kills every process whose command line carries mark as a whole
// argument (the bwrap processes of this sandbox's runs; mark holds a hash
// of the sandbox's temp dir, so another daemon's runs are not touched)
// and returns how many. It runs before this daemon starts a run of its
// own: whatever carries the mark then was left by an earlier one. Killing
// a run's innermost bwrap (PID 1 of its namespace) ends everything in it.
func sweep(proc, mark string) int {
	me := os.Getpid()
	ents, err := os.ReadDir(proc)
	if err != nil {
		return 0
	}
	n := 0
	want := []byte(mark)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me || pid <= 1 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(b, []byte{0}) {
			if bytes.Equal(arg, want) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
				break
			}
		}
	}
	return n
}
