// Package statedir prepares the daemon's state directory and guarantees that
// only one daemon uses it at a time.
package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockName is the lock file inside the state directory.
const LockName = "agent.lock"

// ErrLocked means another process holds the state directory.
var ErrLocked = errors.New("state directory is in use by another agent")

// Prepare creates dir (0750) if needed and proves it is writable.
func Prepare(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("statedir: create %s: %w (fix: create it and give the service user write access, or set agent.state_dir)", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".write-probe-*")
	if err != nil {
		return fmt.Errorf("statedir: %s is not writable: %w (fix: chown it to the service user, or set agent.state_dir)", dir, err)
	}
	name := probe.Name()
	probe.Close()
	return os.Remove(name)
}

// Lock is an exclusive advisory lock on the state directory; the kernel
// drops it when the process dies, so a crash never leaves a stale lock.
type Lock struct {
	f *os.File
}

// Acquire takes the lock without waiting. When another process holds it the
// error wraps ErrLocked and names that process.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		fix := ""
		if errors.Is(err, os.ErrPermission) {
			// Typically left by running the daemon once as root by hand.
			fix = " (fix: chown -R <service user> " + dir + ")"
		}
		return nil, fmt.Errorf("statedir: open lock %s: %w%s", path, err, fix)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readPID(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another process"
			if holder > 0 {
				who = "pid " + strconv.Itoa(holder)
			}
			return nil, fmt.Errorf("statedir: %s: %w (%s); stop it first (systemctl stop agent) or use another agent.state_dir", dir, ErrLocked, who)
		}
		return nil, fmt.Errorf("statedir: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Holder returns the pid recorded in dir's lock file when a process holds
// the lock, or 0.
func Holder(dir string) int {
	f, err := os.Open(filepath.Join(dir, LockName))
	if err != nil {
		return 0
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return 0
	}
	return readPID(f)
}

func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		return 0
	}
	return pid
}

// Release drops the lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
