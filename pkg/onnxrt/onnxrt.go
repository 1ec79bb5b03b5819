// Package onnxrt finds and loads the ONNX Runtime shared library
// (libonnxruntime.so.1) once per process, for every package that runs an
// ONNX model (agent/pkg/embed, agent/pkg/vad), and configures their
// sessions alike. It is a leaf: it imports no other package of the agent.
package onnxrt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LibraryName is the ONNX Runtime shared library's file name.
const LibraryName = "libonnxruntime.so.1"

// ErrRuntimeMissing means the ONNX Runtime shared library could not be found
// or loaded.
var ErrRuntimeMissing = errors.New("ONNX Runtime library (" + LibraryName + ") not found or not loadable; install it with `make deps` (or scripts/install.sh on the device)")

// Execution providers: where a session runs. CPU is ONNX Runtime's own;
// CUDA and TensorRT need a GPU build of ONNX Runtime (on a Jetson, the
// onnxruntime-gpu of JetPack 6) whose libonnxruntime_providers_*.so lie
// beside the library Load loaded.
const (
	ProviderCPU      = "cpu"
	ProviderCUDA     = "cuda"
	ProviderTensorRT = "tensorrt"
)

// ErrProviderUnavailable means a GPU execution provider could not be added
// to a session: the ONNX Runtime library has none, its provider libraries
// or CUDA are missing, or there is no GPU.
var ErrProviderUnavailable = errors.New("execution provider unavailable")

// Provider says where a session runs.
type Provider struct {
	Name   string // ProviderCPU ("" too), ProviderCUDA or ProviderTensorRT
	Device int    // the GPU's index (CUDA's device_id)
	// CacheDir keeps TensorRT's built engines across starts (building one
	// takes minutes on a Jetson); "" builds them at every start.
	CacheDir string
}

// CheckProvider reports whether name is a provider this package knows.
func CheckProvider(name string) error {
	switch name {
	case "", ProviderCPU, ProviderCUDA, ProviderTensorRT:
		return nil
	}
	return fmt.Errorf("onnxrt: unknown execution provider %q (want %q, %q or %q)", name, ProviderCPU, ProviderCUDA, ProviderTensorRT)
}

// IsCPU reports whether p runs on ONNX Runtime's own CPU provider.
func (p Provider) IsCPU() bool { return p.Name == "" || p.Name == ProviderCPU }

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
