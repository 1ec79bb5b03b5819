package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Probe runs a shell and Python in a sandbox the way a tool run would (an
// empty folder for /work) and returns nil when both work, or an error
// wrapping ErrUnavailable that says why and how to fix it. The daemon
// offers the tools that need a sandbox only after Probe passed; doctor
// prints its error.
func (s *Sandbox) Probe(ctx context.Context) error {
	work, err := os.MkdirTemp(s.cfg.TempDir, "probe-")
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	defer removeAll(work)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.Run(ctx, Spec{
		Argv:   []string{"/bin/sh", "-c", `echo sh-ok; : > /dev/null && echo null-ok; "$0" -c 'print("py-ok")'`, s.python},
		Work:   work,
		Limits: Limits{Timeout: 15 * time.Second},
	})
	if err != nil {
		return diagnose(err)
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
