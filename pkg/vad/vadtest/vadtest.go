// Package vadtest finds what tests of the Silero VAD need: the ONNX
// Runtime library and the model that scripts/deps.sh fetches. A missing
// one skips the test naming the fix, or fails it when
// AGENT_REQUIRE_NATIVE=1 (make test and CI set it).
package vadtest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"agent/pkg/embed"
)

// ModelFile is the model's file name (vad.ModelFile).
const ModelFile = "silero_vad_v5.onnx"

// RequireNative stops a test whose native dependency (what) is missing: a
// skip naming the fix, or a failure when AGENT_REQUIRE_NATIVE=1.
func RequireNative(tb testing.TB, what, fix string) {
	tb.Helper()
	msg := fmt.Sprintf("%s is not available; fix: %s", what, fix)
	if os.Getenv("AGENT_REQUIRE_NATIVE") == "1" {
		tb.Fatal(msg + " (required: AGENT_REQUIRE_NATIVE=1)")
	}
	tb.Skip(msg)
}

// RepoRoot walks up from the working directory to go.mod.
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

// ORTLibrary is AGENT_ORT_LIB or <repo>/.deps/onnxruntime/linux-$GOARCH/.
func ORTLibrary(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("AGENT_ORT_LIB")
	if p == "" {
		p = filepath.Join(RepoRoot(tb), ".deps", "onnxruntime", "linux-"+runtime.GOARCH, embed.LibraryName)
	}
	if _, err := os.Stat(p); err != nil {
		RequireNative(tb, "ONNX Runtime ("+p+")", "`make deps` (scripts/deps.sh ort) or set AGENT_ORT_LIB")
	}
	return p
}

// ModelPath is AGENT_VAD_MODEL or <repo>/.deps/models/silero_vad_v5.onnx.
func ModelPath(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("AGENT_VAD_MODEL")
	if p == "" {
		p = filepath.Join(RepoRoot(tb), ".deps", "models", ModelFile)
	}
	if _, err := os.Stat(p); err != nil {
		RequireNative(tb, "the Silero VAD model ("+p+")", "`scripts/deps.sh vad` or set AGENT_VAD_MODEL")
	}
	return p
}
