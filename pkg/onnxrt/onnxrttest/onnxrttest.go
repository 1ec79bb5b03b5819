// Package onnxrttest finds the ONNX Runtime library for the tests of the
// packages that run ONNX models; a missing one is a skip naming the fix, or
// a failure under AGENT_REQUIRE_NATIVE=1 (agent/pkg/nativetest decides).
package onnxrttest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"agent/pkg/nativetest"
	"agent/pkg/onnxrt"
)

// RequireNative stops a test whose native dependency (what) is missing:
// nativetest.Need with fix, the command that provides it.
func RequireNative(tb testing.TB, what, fix string) {
	tb.Helper()
	nativetest.Need(tb, what, fix, false)
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
// or stops the test (nativetest.File) when it is missing.
func Library(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("AGENT_ORT_LIB")
	if p == "" {
		p = filepath.Join(RepoRoot(tb), ".deps", "onnxruntime", "linux-"+runtime.GOARCH, onnxrt.LibraryName)
	}
	return nativetest.File(tb, p, "ONNX Runtime", "`make deps` (scripts/deps.sh ort) or set AGENT_ORT_LIB")
}
