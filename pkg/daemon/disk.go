package daemon

import (
	"fmt"
	"syscall"

	"agent/pkg/health"
)

// Disk thresholds for the state directory's filesystem.
const (
	diskFailBytes = 64 << 20
	diskWarnBytes = 512 << 20
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

func checkDisk(dir string) error {
	free, err := FreeBytes(dir)
	if err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	switch {
	case free < diskFailBytes:
		return fmt.Errorf("only %d MiB free on %s", free>>20, dir)
	case free < diskWarnBytes:
		return fmt.Errorf("%w: %d MiB free on %s", health.ErrDegraded, free>>20, dir)
	}
	return nil
}
