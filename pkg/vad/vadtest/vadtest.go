// Package vadtest finds what tests of the Silero VAD need: the ONNX
// Runtime library and the model that scripts/deps.sh fetches. A missing
// one skips the test naming the fix, or fails it when
// AGENT_REQUIRE_NATIVE=1 (make test and CI set it).
package vadtest

import (
	"os"
	"path/filepath"
	"testing"

	"agent/pkg/onnxrt/onnxrttest"
)

// ModelFile is the model's file name (vad.ModelFile).
const ModelFile = "silero_vad_v5.onnx"

// RequireNative, RepoRoot and ORTLibrary are onnxrttest's RequireNative,
// RepoRoot and Library.
var (
	RequireNative = onnxrttest.RequireNative
	RepoRoot      = onnxrttest.RepoRoot
	ORTLibrary    = onnxrttest.Library
)

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
