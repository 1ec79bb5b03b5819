// Package onnxrt finds and loads the ONNX Runtime shared library
// (libonnxruntime.so.1) once per process, for every package that runs an
// ONNX model (agent/pkg/embed, agent/pkg/vad), and configures their
// sessions alike. It is a leaf: it imports no other package of the agent.
package onnxrt

import (
	"errors"
	"os"
	"path/filepath"
)

// LibraryName is the ONNX Runtime shared library's file name.
const LibraryName = "libonnxruntime.so.1"

// ErrRuntimeMissing means the ONNX Runtime shared library could not be found
// or loaded.
var ErrRuntimeMissing = errors.New("ONNX Runtime library (" + LibraryName + ") not found or not loadable; install it with `make deps` (or scripts/install.sh on the device)")

// Candidates lists where to look for the ONNX Runtime library: the
// configured path alone when set; otherwise exeDir/lib, exeDir/../lib, then
// the bare name for the system's dlopen search (ld.so.cache,
// LD_LIBRARY_PATH).
func Candidates(configured, exeDir string) []string {
	if configured != "" {
		return []string{configured}
	}
	var out []string
	if exeDir != "" {
		out = append(out,
			filepath.Join(exeDir, "lib", LibraryName),
			filepath.Join(exeDir, "..", "lib", LibraryName))
	}
	return append(out, LibraryName)
}

// ExeDir is the directory of the running binary, symlinks resolved (where
// lib/libonnxruntime.so.1 is looked for).
func ExeDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return filepath.Dir(exe)
}
