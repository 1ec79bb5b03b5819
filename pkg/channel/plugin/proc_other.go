//go:build !linux

package plugin

import "os/exec"

// setProcAttrs does nothing outside Linux: the plugin stays in the
// daemon's process group.
func setProcAttrs(*exec.Cmd) {}

// killGroup does nothing outside Linux; Kill still kills the plugin
// process itself.
func killGroup(int) {}
