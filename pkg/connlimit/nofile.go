package connlimit

import "syscall"

// FitNoFile returns maxConns, or what fits under the open-file limit
// nofile with reserve kept for other files (true when lowered).
func FitNoFile(maxConns int, nofile uint64, reserve int64) (int, bool) {
	budget := int64(nofile) - reserve
	if nofile > 1<<30 || int64(maxConns) <= budget {
		return maxConns, false
	}
	n := int(min(int64(maxConns), max(budget, int64(nofile/2), 16)))
	return n, n < maxConns
}

// NoFile returns the soft RLIMIT_NOFILE (Go raises it to the hard limit at
// start-up, so this is what the unit's LimitNOFILE= allows).
func NoFile() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return rl.Cur, true
}
