package mcp

import (
	"os/exec"
	"syscall"
)

// setProcAttrs puts the server in its own process group so that stopping it
// also stops what it started (npx, shells, node children).
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to the process group led by pid. Errors (the group
// is already gone) are ignored.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
