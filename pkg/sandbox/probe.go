package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Folders are what real runs bind, for ProbeFolders to try the same way.
type Folders struct {
	// Within is the directory the runs' own folders lie in (the
	// workspace's files/): the probe makes its folder there, binds it at
	// /work as a run's folder is bound, and removes it. "" or not yet
	// made: an empty folder in TempDir, and the nearest directory above
	// Within that exists is bound read-only instead.
	Within string
	// Read are folders runs bind read-only (the shared area, skills).
	Read []string
	// Keys names the settings that place these folders (e.g.
	// "agent.workspace and agent.state_dir"), for the fix when the
	// account cannot reach them.
	Keys string
	// Untouched probes without making anything in Within: it is bound
	// read-only like Read, the probe's /work is a folder in TempDir. A
	// root doctor probing for the daemon's user sets it: a folder root
	// makes in a directory that user owns could be swapped for a link
	// before root hands it over (chown).
	Untouched bool
}

// Probe runs a shell and Python in a sandbox the way a tool run would (an
// empty folder for /work) and returns nil when both work, or an error
// wrapping ErrUnavailable that says why and how to fix it.
func (s *Sandbox) Probe(ctx context.Context) error { return s.ProbeFolders(ctx, Folders{}) }

// ProbeFolders is Probe over the folders real runs bind: the probe's /work
// is a folder made in f.Within, and f.Read are bound read-only, so the
// probe resolves every path a run will. The daemon offers the tools that
// need a sandbox only after it passed; doctor runs the same probe and
// prints its error. When the sandbox's account cannot reach a folder the
// error names the directory that stops it, its mode and the fix, rather
// than bwrap's "Can't find source path".
func (s *Sandbox) ProbeFolders(ctx context.Context, f Folders) error {
	var binds []Bind
	var check []string  // what bwrap will resolve as the account
	var absent []string // what it cannot yet: the account's reach is judged
	work := ""
	if f.Within != "" {
		if fi, err := os.Stat(f.Within); err == nil && fi.IsDir() && f.Untouched {
			check = append(check, f.Within)
			binds = append(binds, Bind{Src: f.Within})
		} else if err == nil && fi.IsDir() {
			// A probe cut short (the daemon or doctor killed) left its
			// folder: older than any probe runs, it goes.
			old, _ := filepath.Glob(filepath.Join(f.Within, ".sandbox-probe-*"))
			for _, o := range old {
				if fi, err := os.Lstat(o); err == nil && fi.IsDir() && s.clock.Now().Sub(fi.ModTime()) > 2*time.Minute {
					removeAll(o)
				}
			}
			d, err := os.MkdirTemp(f.Within, ".sandbox-probe-")
			if err != nil {
				return fmt.Errorf("%w: cannot make the probe's folder: %v", ErrUnavailable, err)
			}
			defer removeAll(d)
			work = d
			check = append(check, f.Within)
		} else {
			absent = append(absent, f.Within)
			binds = append(binds, Bind{Src: existing(f.Within)})
		}
	}
	for _, r := range f.Read {
		if e := existing(r); e != r {
			absent = append(absent, r)
			binds = append(binds, Bind{Src: e})
			continue
		}
		check = append(check, r)
		binds = append(binds, Bind{Src: r})
	}
	for i := range binds {
		binds[i].Dst = fmt.Sprintf("/probe/%d", i)
	}
	if work == "" {
		d, err := os.MkdirTemp(s.cfg.TempDir, "probe-")
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		defer removeAll(d)
		work = d
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.Run(ctx, Spec{
		Argv:   []string{"/bin/sh", "-c", `echo sh-ok; : > /dev/null && echo null-ok; "$0" -c 'print("py-ok")'`, s.python},
		Work:   work,
		Binds:  binds,
		Limits: Limits{Timeout: 15 * time.Second},
	})
	if err != nil {
		// The account's reach explains bwrap's "Can't find source path".
		if un := s.unreachable(append(append([]string{s.cfg.TempDir}, check...), absent...)); un != nil {
			return s.reachError(un, f.Keys)
		}
		return diagnose(err)
	}
	if un := s.unreachable(absent); un != nil {
		return s.reachError(un, f.Keys) // the daemon makes them where runs cannot go
	}
	out := string(res.Stdout)
	switch {
	case res.Limit != LimitNone:
		return fmt.Errorf("%w: the check run was stopped by the %s limit (%s): the box may be overloaded or its disk full", ErrUnavailable, res.Limit, res.Detail)
	case !strings.Contains(out, "sh-ok"):
		return fmt.Errorf("%w: a shell did not run in the sandbox (exit %d): %s", ErrUnavailable, res.Exit, firstLine(string(res.Stderr)))
	case !strings.Contains(out, "null-ok"):
		return fmt.Errorf("%w: /dev/null is not writable in the sandbox (%s): it must be mode 0666 on the host (chmod 666 /dev/null)", ErrUnavailable, firstLine(string(res.Stderr)))
	case !strings.Contains(out, "py-ok"):
		return fmt.Errorf("%w: %s does not run in the sandbox (%s): install python3 (apt install python3) or set sandbox.python", ErrUnavailable, s.python, firstLine(string(res.Stderr)))
	}
	return nil
}

// existing is dir, or the nearest directory above it that exists.
func existing(dir string) string {
	for {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return dir
		}
		dir = up
	}
}

// unreachable is the first of dirs the sandbox's account cannot reach.
func (s *Sandbox) unreachable(dirs []string) *Unreachable {
	for _, d := range dirs {
		var un *Unreachable
		if errors.As(Reach(d, s.cfg.As), &un) {
			return un
		}
	}
	return nil
}

// reachError says which folder the account cannot reach, why, and the
// ways to fix it.
func (s *Sandbox) reachError(un *Unreachable, keys string) error {
	fixes := []string{un.Fix()}
	if keys != "" {
		fixes = append(fixes, fmt.Sprintf("or put %s outside %s", keys, un.Dir))
	}
	if s.cfg.As != nil && s.cfg.As.UID == 65534 {
		fixes = append(fixes, "or run the agent as its own user (the packaged service, agent.service), whose sandbox runs as that user")
	}
	return fmt.Errorf("%w: %w: runs bind it, so bwrap cannot start them; fix: %s", ErrUnavailable, un, strings.Join(fixes, ", "))
}

// diagnose turns bwrap's complaint into a cause and a fix.
func diagnose(err error) error {
	msg := err.Error()
	if !errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%w: %s", ErrUnavailable, msg)
	}
	low := strings.ToLower(msg)
	switch {
	case strings.Contains(low, "no permissions to create new namespace"),
		strings.Contains(low, "creating new namespace failed"),
		strings.Contains(low, "setting up uid map"),
		strings.Contains(low, "uid map") && strings.Contains(low, "permission denied"):
		return fmt.Errorf("%w: bwrap may not create user namespaces here (%s)%s", ErrUnavailable, msg, userNSFix())
	case strings.Contains(low, "can't mount proc"):
		return fmt.Errorf("%w: bwrap cannot mount a fresh /proc (%s): the service must not use ProtectKernelTunables= or ProcSubset=, and a container running the agent must allow mounting proc (run it privileged or with the host's /proc unmasked)", ErrUnavailable, msg)
	case strings.Contains(low, "operation not permitted"):
		return fmt.Errorf("%w: %s: the kernel or the service manager forbids what bwrap needs (user, mount and network namespaces); the shipped unit allows them: check RestrictNamespaces= and SystemCallFilter= in drop-ins%s", ErrUnavailable, msg, userNSFix())
	}
	return err
}

// userNSFix reads the sysctls that switch unprivileged user namespaces
// off and names the one that does here.
func userNSFix() string {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	var fixes []string
	if read("/proc/sys/kernel/unprivileged_userns_clone") == "0" {
		fixes = append(fixes, "kernel.unprivileged_userns_clone is 0: set it to 1 (sysctl -w kernel.unprivileged_userns_clone=1, and in /etc/sysctl.d/)")
	}
	if read("/proc/sys/user/max_user_namespaces") == "0" {
		fixes = append(fixes, "user.max_user_namespaces is 0: set it to 10000 or more")
	}
	if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1" {
		fixes = append(fixes, "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1): install an AppArmor profile for /usr/bin/bwrap that allows userns, or set the sysctl to 0")
	}
	if len(fixes) == 0 {
		return ""
	}
	return ": " + strings.Join(fixes, "; ")
}
