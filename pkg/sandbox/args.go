package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// binDir is a directory inside, first in PATH, holding python3 and python
// (links to Config.Python).
const binDir = "/opt/agent/bin"

// systemDirs are the top-level directories of the system: each is bound
// read-only, or recreated as the same symbolic link (merged /usr).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcFiles are the parts of /etc programs need: the dynamic linker's
// cache, certificates, alternatives (python3, editors), time zone data,
// fonts (ffmpeg's text, espeak-ng), and MIME types. Nothing else of /etc
// (no config.toml under /etc/agent, no agent.env, no shadow).
var etcFiles = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/ssl", "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/pki",
	"/etc/alternatives", "/etc/localtime", "/etc/timezone",
	"/etc/fonts", "/etc/mime.types", "/etc/magic",
}

// netFiles are what name resolution needs, bound only for runs with the
// network.
var netFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf", "/etc/services", "/etc/protocols"}

// reservedDst are the places inside a Bind may not cover.
var reservedDst = []string{"/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/dev", "/tmp", "/work", "/opt/agent"}

// The descriptors of a run: fd 3 carries the start byte, argsFD bwrap's
// command line, lifeFD the watchdog's lifeline (below 10: dash redirects
// single-digit descriptors only), firstDataFD on the DataFiles.
const (
	argsFD      = 4
	lifeFD      = 5
	firstDataFD = 6
)

// args builds bwrap's command line for spec and the files it makes from
// bytes, in the order of their descriptors (firstDataFD, ...): the
// identity files, then spec.Files. run is the run's own host directory,
// tmp its /tmp. The command line reaches bwrap through a pipe (--args), not
// argv: inside, bwrap's own process (PID 1) would otherwise show the host
// paths of every bind in /proc/1/cmdline.
func (s *Sandbox) args(spec Spec, lim Limits, run, tmp string) ([]string, []DataFile, error) {
	feat := s.bwrapFeatures()
	a := []string{
		"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		// No --hostname: the shipped unit's ProtectHostname= forbids
		// sethostname, even in a namespace of the sandbox's own.
	}
	if !(spec.Network && s.cfg.Network) {
		a = append(a, "--unshare-net")
	}
	if feat["--disable-userns"] {
		// No nested user namespaces: less kernel reachable from inside.
		a = append(a, "--disable-userns")
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return nil, nil, fmt.Errorf("sandbox: %w", err)
			}
			a = append(a, "--symlink", target, d)
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	files := etcFiles
	if spec.Network && s.cfg.Network {
		files = append(files[:len(files):len(files)], netFiles...)
	}
	for _, f := range files {
		a = append(a, "--ro-bind-try", f, f)
	}
	if s.cfg.As != nil {
		// bwrap, running as the account, reaches the run's /tmp in it.
		_ = os.Chown(run, s.cfg.As.UID, s.cfg.As.GID)
	}
	data := s.identity()
	a = append(a,
		"--ro-bind-data", strconv.Itoa(firstDataFD), "/etc/passwd",
		"--ro-bind-data", strconv.Itoa(firstDataFD+1), "/etc/group",
		"--proc", "/proc",
		"--dev", "/dev",
	)
	if feat["--size"] {
		// A small /dev/shm (POSIX semaphores, shared memory): its pages
		// are memory, so it is bounded; the rest of /dev is read-only.
		a = append(a, "--size", "16777216", "--perms", "1777", "--tmpfs", "/dev/shm")
	}
	a = append(a, "--bind", tmp, "/tmp")
	if spec.Work != "" {
		a = append(a, "--bind", spec.Work, "/work")
	} else {
		a = append(a, "--dir", "/work")
	}
	for _, b := range spec.Binds {
		dst := filepath.Clean(b.Dst)
		if !filepath.IsAbs(b.Dst) || reserved(dst) {
			return nil, nil, fmt.Errorf("sandbox: bind %q: the destination must be an absolute path outside the system directories and /work", b.Dst)
		}
		if !filepath.IsAbs(b.Src) {
			return nil, nil, fmt.Errorf("sandbox: bind %q: the source must be an absolute path", b.Src)
		}
		if b.Write {
			a = append(a, "--bind", b.Src, dst)
		} else {
			a = append(a, "--ro-bind", b.Src, dst)
		}
	}
	for _, f := range spec.Files {
		dst := filepath.Clean(f.Dst)
		if !filepath.IsAbs(f.Dst) || reserved(dst) {
			return nil, nil, fmt.Errorf("sandbox: file %q: the destination must be an absolute path outside the system directories and /work", f.Dst)
		}
		if len(f.Data) > MaxDataFile {
			return nil, nil, fmt.Errorf("sandbox: file %q: %d bytes; at most %d", f.Dst, len(f.Data), MaxDataFile)
		}
		a = append(a, "--ro-bind-data", strconv.Itoa(firstDataFD+len(data)), dst)
		data = append(data, DataFile{Dst: dst, Data: f.Data})
	}
	if s.seccomp != nil {
		// No fallocate inside (seccomp.go); the filter comes through a
		// pipe like the data files.
		a = append(a, "--seccomp", strconv.Itoa(firstDataFD+len(data)))
		data = append(data, DataFile{Data: s.seccomp})
	}
	a = append(a,
		"--symlink", s.python, binDir+"/python3",
		"--symlink", s.python, binDir+"/python",
		"--remount-ro", "/",
	)
	// bwrap's /dev is a tmpfs the sandbox's user owns: read-only, or a run
	// could fill memory through it (/dev/shm, its own mount, stays
	// writable and bounded).
	a = append(a, "--remount-ro", "/dev")
	a = append(a, "--chdir", "/work", "--")
	// $0 of the prelude is the sandbox's mark: bwrap's processes show
	// it in their command lines, and a later daemon finds by it what an
	// earlier one left (sweep).
	a = append(a, "/bin/sh", "-c", prelude(lim, lifeFD), s.mark)
	return append(a, spec.Argv...), data, nil
}

// reserved reports whether dst is, holds or lies in a place binds may not
// touch. /opt/agent and the system directories are refused whole; /work
// and /tmp only as themselves (a bind inside them is the caller's choice
// no more: refused too, to keep /work the user's folder exactly).
func reserved(dst string) bool {
	for _, r := range reservedDst {
		if dst == r || strings.HasPrefix(dst, r+"/") || (r != "/" && strings.HasPrefix(r, dst+"/")) {
			return true
		}
	}
	return false
}

// prelude is the shell script that starts every run, inside the
// sandbox, before the command (its "$@"): it sets the per-process limits,
// which every process of the run inherits, raises oom_score_adj to 1000 so
// that the kernel's out-of-memory killer takes the run's processes before
// the daemon's, starts the run's watchdog, writes a byte to fd 3 (Run's
// sign that the sandbox is set up and the command starts) and closes it.
// RLIMIT_NPROC counts the tasks of the run's own user namespace: a fork
// bomb stops at MaxProcs without touching the daemon's or another run's.
// Shell built-ins, one exec: dash names the process limit -p, bash -u; a
// limit that cannot be set stops the run before the command (no start
// byte: Run reports a sandbox failure).
//
// The watchdog waits on the lifeline (fd life: a pipe whose other end only
// the daemon holds) and, when the daemon is gone (killed, out of memory),
// kills every process of the run: its PID namespace then ends with them.
// bwrap's own --die-with-parent leaves a window where it does not.
func prelude(lim Limits, life int) string {
	return fmt.Sprintf(`ulimit -c 0 && ulimit -n 256 && ulimit -f %d && ulimit -v %d && ulimit -S -t %d && ulimit -H -t %d &&
{ ulimit -p %d 2>/dev/null || ulimit -u %d; } || { echo "sandbox: cannot set the limits" >&2; exit 125; }
echo 1000 > /proc/self/oom_score_adj
{ read -r _ <&%d; kill -KILL -1; } </dev/null >/dev/null 2>&1 3>&- &
exec %d<&-; printf s >&3; exec 3>&-; exec "$@"`,
		int64(lim.FileMB)<<20/512, int64(lim.MemoryMB)<<10, lim.CPUSeconds, lim.CPUSeconds+1, lim.MaxProcs, lim.MaxProcs, life, life)
}

// bwrapFeatures lists the options of this bwrap (Debian 12 has 0.8,
// Ubuntu 22.04 on JetPack 6 has 0.6: no --disable-userns, no --size).
func (s *Sandbox) bwrapFeatures() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.features != nil {
		return s.features
	}
	s.features = map[string]bool{}
	out, _ := exec.Command(s.bwrap, "--help").CombinedOutput()
	for _, opt := range []string{"--disable-userns", "--size", "--perms"} {
		s.features[opt] = strings.Contains(string(out), opt+" ")
	}
	if !s.features["--perms"] {
		s.features["--size"] = false
	}
	return s.features
}

// identity is the one-line /etc/passwd and /etc/group every run sees
// (the account it runs as, named sandbox), made from bytes: no host file
// that the sandbox's account would have to reach.
func (s *Sandbox) identity() []DataFile {
	uid, gid := os.Getuid(), os.Getgid()
	if s.cfg.As != nil {
		uid, gid = s.cfg.As.UID, s.cfg.As.GID
	}
	return []DataFile{
		{Dst: "/etc/passwd", Data: fmt.Appendf(nil, "sandbox:x:%d:%d:sandbox:/work:/bin/sh\n", uid, gid)},
		{Dst: "/etc/group", Data: fmt.Appendf(nil, "sandbox:x:%d:\n", gid)},
	}
}
