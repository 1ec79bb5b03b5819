package embedtest

import "agent/pkg/onnxrt/onnxrttest"

// RequireNative, RepoRoot and ORTLibrary are onnxrttest's RequireNative,
// RepoRoot and Library.
var (
	RequireNative = onnxrttest.RequireNative
	RepoRoot      = onnxrttest.RepoRoot
	ORTLibrary    = onnxrttest.Library
)
