//go:build cgo

package onnxrt

// Everything that touches ONNX Runtime (through github.com/yalue/onnxruntime_go,
// which needs cgo) lives in this file; load_stub.go stands in for it when
// cgo is off.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// onnxruntime_go keeps one process-global ONNX Runtime environment (the
// loaded library and its OrtEnv): a limitation of that library, not a
// choice of ours. Loading it is therefore global too; this is the only
// package-level mutable state here, and it exists to make Load idempotent
// and safe for concurrent use.
var runtimeState struct {
	sync.Mutex
	loaded        bool
	path, version string
}

// Load initialises ONNX Runtime from the first of paths that loads and
// returns its version and path (nil paths: Candidates("", "")). Later
// calls return the same result without loading anything (the environment
// lives for the rest of the process); after a failure a later call tries
// again. If another package initialised onnxruntime_go first, that
// environment is used and path is reported as "(initialised elsewhere)".
// The error wraps ErrRuntimeMissing and lists what was tried.
func Load(paths []string) (version string, path string, err error) {
	runtimeState.Lock()
	defer runtimeState.Unlock()
	if runtimeState.loaded {
		return runtimeState.version, runtimeState.path, nil
	}
	if ort.IsInitialized() {
		runtimeState.loaded = true
		runtimeState.path = "(initialised elsewhere)"
		runtimeState.version = ort.GetVersion()
		return runtimeState.version, runtimeState.path, nil
	}
	if len(paths) == 0 {
		paths = Candidates("", "")
	}
	var tried []string
	for _, p := range paths {
		if strings.ContainsRune(p, filepath.Separator) {
			if _, err := os.Stat(p); err != nil {
				tried = append(tried, p+": not found")
				continue
			}
		}
		ort.SetSharedLibraryPath(p)
		if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
			msg := err.Error()
			if strings.Contains(msg, "ORT API base") {
				msg += " (the library is older than ONNX Runtime 1.24 / C API 24, which github.com/yalue/onnxruntime_go v1.27 needs)"
			}
			tried = append(tried, p+": "+msg)
			continue
		}
		runtimeState.loaded = true
		runtimeState.path = p
		runtimeState.version = ort.GetVersion()
		return runtimeState.version, runtimeState.path, nil
	}
	return "", "", fmt.Errorf("onnxrt: %w (tried %s)", ErrRuntimeMissing, strings.Join(tried, "; "))
}

// ConfigureSession sets the options every ONNX Runtime session of the
// agent uses: threads intra-op threads, sequential execution, and no
// spinning of idle worker threads.
func ConfigureSession(opts *ort.SessionOptions, threads int) error {
	if err := opts.SetIntraOpNumThreads(threads); err != nil {
		return err
	}
	if err := opts.SetInterOpNumThreads(1); err != nil {
		return err
	}
	if err := opts.SetExecutionMode(ort.ExecutionModeSequential); err != nil {
		return err
	}
	// Idle worker threads would otherwise spin for a while after each run,
	// burning a core that whisper or the agent could use.
	if err := opts.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
		return err
	}
	return opts.SetLogSeverityLevel(ort.LoggingLevelError)
}
