// Package buildinfo reports what binary is running.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at link time: -ldflags "-X agent/pkg/buildinfo.version=v1.2.3".
var version = "dev"

// Version is the release version, or "dev".
func Version() string { return version }

// Revision is the VCS revision embedded by the Go toolchain, if any.
func Revision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

// String is the one-line --version answer.
func String(program string) string {
	s := fmt.Sprintf("%s %s (%s, %s/%s)", program, version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if r := Revision(); r != "" {
		s += " rev " + r
	}
	return s
}
