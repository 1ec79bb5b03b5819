package plugin

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts the plugin in its own process group, so that stopping
// it also stops what it started (shells, interpreters' children).
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to the process group led by pid; an error (the
// group is gone) is ignored.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
