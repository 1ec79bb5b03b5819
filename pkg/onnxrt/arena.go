//go:build cgo

package onnxrt

// Shrinking a session's CPU memory arena after a run: a run option the
// binding does not expose, set through ONNX Runtime's C API directly.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct OrtRunOptions OrtRunOptions;
typedef struct OrtStatus OrtStatus;
const char *GetErrorMessage(OrtStatus *status);
void ReleaseOrtStatus(OrtStatus *status);

// OrtApiBase, as onnxruntime_c_api.h declares it.
typedef struct {
	const void *(*GetApi)(uint32_t version);
	const char *(*GetVersionString)(void);
} agent_ort_api_base;

// agent_ort_api returns the C API table (version) of the ONNX Runtime
// library at path, which the binding has already loaded; NULL when it is
// not loaded or too old. RTLD_NOLOAD loads nothing: it takes a reference
// to the loaded library, handed back at once (the binding keeps its own).
static const void *agent_ort_api(const char *path, uint32_t version) {
	void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
	if (!h) return NULL;
	const agent_ort_api_base *(*get)(void) = (const agent_ort_api_base *(*)(void))dlsym(h, "OrtGetApiBase");
	const agent_ort_api_base *base = get ? get() : NULL;
	const void *api = base ? base->GetApi(version) : NULL;
	dlclose(h);
	return api;
}

// The OrtApi table only ever grows at its end (ONNX Runtime's ABI rule,
// checked by static asserts in its own build), so a function's slot is
// fixed for good: AddRunConfigEntry is entry 165 (from 0), counted in the
// onnxruntime_c_api.h of C API version 24 that the binding ships.
enum { agent_slot_add_run_config_entry = 165 };

typedef OrtStatus *(*agent_add_run_config_entry_fn)(OrtRunOptions *, const char *, const char *);

// agent_ort_add_run_config sets a run option's config entry; it returns
// ONNX Runtime's error message (the caller frees it) or NULL.
static char *agent_ort_add_run_config(const void *api, OrtRunOptions *o, const char *key, const char *value) {
	agent_add_run_config_entry_fn f = ((const agent_add_run_config_entry_fn *)api)[agent_slot_add_run_config_entry];
	OrtStatus *st = f(o, key, value);
	if (!st) return NULL;
	const char *m = GetErrorMessage(st);
	char *out = strdup(m ? m : "unknown error");
	ReleaseOrtStatus(st);
	return out;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// apiVersion is the C API version the binding (github.com/yalue/onnxruntime_go
// v1.27) asks for; the loaded library is at least that new.
const apiVersion = 24

// ErrNoArenaShrink: the C API table could not be reached (ONNX Runtime was
// initialised by another package, from a path Load does not know).
var ErrNoArenaShrink = errors.New("onnxrt: arena shrinkage unavailable: ONNX Runtime's C API is not reachable")

// loadAPI finds the C API table of the library just loaded from path.
func loadAPI(path string) unsafe.Pointer {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return unsafe.Pointer(C.agent_ort_api(cs, apiVersion))
}

// CanShrinkArena reports whether ShrinkArenaAfter will work.
func CanShrinkArena() bool {
	runtimeState.Lock()
	defer runtimeState.Unlock()
	return runtimeState.api != nil
}

// ShrinkArenaAfter marks opts so that the run given them hands the CPU
// memory arena's free regions back when it ends (the run option
// memory.enable_memory_arena_shrinkage = cpu:0). The session must have its
// CPU arena on (SessionOptions.SetCpuMemArena(true), the default): ONNX
// Runtime refuses the run otherwise. A session with the arena keeps the
// peak of its largest run for its life; this lets the caller choose when
// to give it back, once a burst of large runs is over.
func ShrinkArenaAfter(opts *ort.RunOptions) error {
	return addRunConfig(opts, "memory.enable_memory_arena_shrinkage", "cpu:0")
}

// addRunConfig sets a config entry of opts through the C API table.
func addRunConfig(opts *ort.RunOptions, key, value string) error {
	runtimeState.Lock()
	api := runtimeState.api
	runtimeState.Unlock()
	if api == nil {
		return ErrNoArenaShrink
	}
	if opts == nil {
		return errors.New("onnxrt: run config: no run options")
	}
	p, err := livePointer(reflect.ValueOf(opts), "o")
	if err != nil {
		return fmt.Errorf("onnxrt: run config: run options: %w", err)
	}
	ck, cv := C.CString(key), C.CString(value)
	defer C.free(unsafe.Pointer(ck))
	defer C.free(unsafe.Pointer(cv))
	if msg := C.agent_ort_add_run_config(api, (*C.OrtRunOptions)(p), ck, cv); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		return fmt.Errorf("onnxrt: run config %s: %s", key, C.GoString(msg))
	}
	return nil
}
