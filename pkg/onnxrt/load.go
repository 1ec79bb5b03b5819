//go:build cgo

package onnxrt

// Everything that touches ONNX Runtime (through github.com/yalue/onnxruntime_go,
// which needs cgo) lives in this file; load_stub.go stands in for it when
// cgo is off.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"

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
	api           unsafe.Pointer // the library's C API table (nil: not reachable; see arena.go)
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
		runtimeState.api = loadAPI(p)
		runtimeState.version = ort.GetVersion()
		return runtimeState.version, runtimeState.path, nil
	}
	return "", "", fmt.Errorf("onnxrt: %w (tried %s)", ErrRuntimeMissing, strings.Join(tried, "; "))
}

// ConfigureSession sets the options every ONNX Runtime session of the
// agent uses: threads intra-op threads, sequential execution, and worker
// threads that spin only while a run is in flight.
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
	// Worker threads spin while a run is in flight (waking sleeping
	// threads for every operator cost a third of a short embedding) and
	// stop when it ends: idle, they would otherwise spin on for a while
	// after each run, burning a core that whisper or the agent could use.
	if err := opts.AddSessionConfigEntry("session.intra_op.allow_spinning", "1"); err != nil {
		return err
	}
	if err := opts.AddSessionConfigEntry("session.force_spinning_stop", "1"); err != nil {
		return err
	}
	return opts.SetLogSeverityLevel(ort.LoggingLevelError)
}

// AppendProvider adds p's execution provider to opts (nothing for the
// CPU). TensorRT comes with CUDA behind it for the nodes TensorRT cannot
// run, and with fp16 and its engine cache on. The error wraps
// ErrProviderUnavailable and says what the library lacks.
func AppendProvider(opts *ort.SessionOptions, p Provider) error {
	if err := CheckProvider(p.Name); err != nil {
		return err
	}
	if p.IsCPU() {
		return nil
	}
	device := strconv.Itoa(p.Device)
	cuda := func() error {
		c, err := ort.NewCUDAProviderOptions()
		if err != nil {
			return err
		}
		defer c.Destroy()
		if err := c.Update(map[string]string{"device_id": device}); err != nil {
			return err
		}
		return opts.AppendExecutionProviderCUDA(c)
	}
	var err error
	switch p.Name {
	case ProviderCUDA:
		err = cuda()
	case ProviderTensorRT:
		err = func() error {
			t, err := ort.NewTensorRTProviderOptions()
			if err != nil {
				return err
			}
			defer t.Destroy()
			o := map[string]string{"device_id": device, "trt_fp16_enable": "1"}
			if p.CacheDir != "" && os.MkdirAll(p.CacheDir, 0o700) == nil {
				o["trt_engine_cache_enable"] = "1"
				o["trt_engine_cache_path"] = p.CacheDir
			}
			if err := t.Update(o); err != nil {
				return err
			}
			if err := opts.AppendExecutionProviderTensorRT(t); err != nil {
				return err
			}
			return cuda()
		}()
	}
	if err != nil {
		runtimeState.Lock()
		lib := runtimeState.path
		runtimeState.Unlock()
		return fmt.Errorf("onnxrt: %s: %w: %v (the ONNX Runtime at %s needs to be a GPU build with its libonnxruntime_providers_*.so beside it, CUDA installed and a GPU present)",
			p.Name, ErrProviderUnavailable, err, lib)
	}
	return nil
}
