// Package diskfree measures the free space of a filesystem and judges
// whether the state directory has enough: the daemon's health check, the
// daily self-check and agentctl doctor all use the same two thresholds.
package diskfree

import (
	"fmt"
	"syscall"

	"agent/pkg/health"
)

// Thresholds for the state directory's filesystem: under FailBytes free is
// a failure, under WarnBytes a warning.
const (
	FailBytes = 64 << 20
	WarnBytes = 512 << 20
)

// FreeBytes reports the bytes available to unprivileged users on the
// filesystem holding path.
func FreeBytes(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// Check judges the free space on dir's filesystem: nil from WarnBytes up,
// an error wrapping health.ErrDegraded under WarnBytes, and a plain error
// under FailBytes or when dir cannot be measured.
func Check(dir string) error {
	free, err := FreeBytes(dir)
	if err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	return judge(dir, free)
}

func judge(dir string, free uint64) error {
	switch {
	case free < FailBytes:
		return fmt.Errorf("only %d MiB free on %s", free>>20, dir)
	case free < WarnBytes:
		return fmt.Errorf("%w: %d MiB free on %s", health.ErrDegraded, free>>20, dir)
	}
	return nil
}
