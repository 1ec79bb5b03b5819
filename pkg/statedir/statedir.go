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

// DirMode is the most the state directory allows: the service user's,
// and read and search for its group (systemd's StateDirectoryMode=0750, so
// an operator in the group can run doctor); nothing for others. The files
// in it are 0600 (pkg/store, the lock).
const DirMode os.FileMode = 0o750

// Prepare creates dir (0750) if needed, tightens it (Tighten; a directory
// it cannot chmod is left to doctor to report) and proves it is writable.
func Prepare(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("statedir: create %s: %w (fix: create it and give the service user write access, or set agent.state_dir)", dir, err)
	}
	_, _, _ = Tighten(dir)
	probe, err := os.CreateTemp(dir, ".write-probe-*")
	if err != nil {
		return fmt.Errorf("statedir: %s is not writable: %w (fix: chown it to the service user, or set agent.state_dir)", dir, err)
	}
	name := probe.Name()
	probe.Close()
	return os.Remove(name)
}

// Loose reports the permission bits of mode beyond DirMode (group write,
// anything for others), or 0.
func Loose(mode os.FileMode) os.FileMode { return mode.Perm() &^ DirMode }

// Tighten takes group write and every permission for others off dir (0755
// becomes 0750, 0777 becomes 0750, 0700 stays), keeping set-group-id. It
// returns the mode found and whether it changed it; err when dir cannot be
// read or chmodded. A directory with the sticky bit (a shared one such as
// /tmp, set as agent.state_dir by mistake) or owned by another user is
// never changed, only reported (err).
func Tighten(dir string) (was os.FileMode, changed bool, err error) {
	st, err := os.Stat(dir)
	if err != nil {
		return 0, false, fmt.Errorf("statedir: %w", err)
	}
	was = st.Mode().Perm()
	if Loose(was) == 0 {
		return was, false, nil
	}
	fix := fmt.Sprintf("chmod %o %s", was&DirMode, dir)
	if st.Mode()&os.ModeSticky != 0 {
		return was, false, fmt.Errorf("statedir: %s is %04o and sticky, a shared directory; set agent.state_dir to a directory of its own", dir, was)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return was, false, fmt.Errorf("statedir: %s is %04o, open to others, and owned by uid %d, not this process (fix: %s)", dir, was, sys.Uid, fix)
	}
	if err := os.Chmod(dir, st.Mode()&os.ModeSetgid|was&DirMode); err != nil {
		return was, false, fmt.Errorf("statedir: %s is %04o, open to others: %w (fix: %s)", dir, was, err, fix)
	}
	return was, true, nil
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
