// Package onnxrttest finds the native test dependencies of the packages
// that run ONNX models: the ONNX Runtime library of the checkout, and a
// RequireNative that skips, or fails under AGENT_REQUIRE_NATIVE=1.
package onnxrttest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"agent/pkg/onnxrt"
)

// RequireNative stops a test whose native dependency (what) is missing: a
// skip naming the fix, or a failure when AGENT_REQUIRE_NATIVE=1 (make test
// and CI set it, so that a missing dependency cannot pass silently).
func RequireNative(tb testing.TB, what, fix string) {
	tb.Helper()
	msg := fmt.Sprintf("%s is not available; fix: %s", what, fix)
	if os.Getenv("AGENT_REQUIRE_NATIVE") == "1" {
		tb.Fatal(msg + " (required: AGENT_REQUIRE_NATIVE=1)")
	}
	tb.Skip(msg)
}

// RepoRoot walks up from the working directory (a test's package
// directory) to go.mod.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("go.mod not found above the package directory")
		}
		dir = parent
	}
}

// Library is $AGENT_ORT_LIB or <repo>/.deps/onnxruntime/linux-$GOARCH/,
// or RequireNative when it is missing.
func Library(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("AGENT_ORT_LIB")
	if p == "" {
		p = filepath.Join(RepoRoot(tb), ".deps", "onnxruntime", "linux-"+runtime.GOARCH, onnxrt.LibraryName)
	}
	if _, err := os.Stat(p); err != nil {
		RequireNative(tb, "ONNX Runtime ("+p+")", "`make deps` (scripts/deps.sh ort) or set AGENT_ORT_LIB")
	}
	return p
}
