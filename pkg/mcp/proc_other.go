//go:build !linux

package mcp

import "os/exec"

// setProcAttrs does nothing outside Linux: servers stay in the daemon's
// process group.
func setProcAttrs(*exec.Cmd) {}

// killGroup does nothing outside Linux; the SDK still stops the server
// process itself.
func killGroup(int) {}
