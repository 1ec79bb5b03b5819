//go:build whisper

package asr

// whisper_full runs on a thread of the worker's own while the caller waits
// in Go's poller (package cthread says why: ggml's threads spin on both
// cores of a small box, and Go's sysmon preempts them during a cgo call).
// whisper.go exports a Go function, so its preamble may only declare; the
// job's definitions live here.

/*
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <whisper.h>

// The abort flag is C memory that Go sets (atomically) when the caller's
// context ends or the recogniser closes; whisper.cpp polls it before the
// encoder and after each encoder/decoder graph.
static bool asr_should_abort(void *flag) {
	return __atomic_load_n((int32_t *)flag, __ATOMIC_RELAXED) != 0;
}

static bool asr_encoder_begin(struct whisper_context *ctx, struct whisper_state *state, void *flag) {
	(void)ctx; (void)state;
	return !asr_should_abort(flag);
}

// One whisper_full call's arguments and result, in C memory (samples is
// Go memory pinned for the call).
typedef struct {
	struct whisper_context *ctx;
	struct whisper_state *state;
	struct whisper_full_params params;
	const float *samples;
	int n;
	int32_t *flag;
	int rc;
} asr_job;

// Not static: Go takes its address for cthread.
void asr_full_job(void *arg) {
	asr_job *j = arg;
	j->params.abort_callback = asr_should_abort;
	j->params.abort_callback_user_data = j->flag;
	j->params.encoder_begin_callback = asr_encoder_begin;
	j->params.encoder_begin_callback_user_data = j->flag;
	j->rc = whisper_full_with_state(j->ctx, j->state, j->params, j->samples, j->n);
}
*/
import "C"

import (
	"runtime"
	"unsafe"

	"agent/pkg/cthread"
)

// startThread gives w its thread and job; without them (the thread could
// not start) full runs whisper in the calling goroutine.
func (w *worker) startThread() {
	w.job = unsafe.Pointer(C.calloc(1, C.size_t(unsafe.Sizeof(C.asr_job{}))))
	if w.job == nil {
		return
	}
	if t, err := cthread.New(); err == nil {
		w.thread = t
	}
}

// stopThread ends w's thread and frees its job (no call may be running).
func (w *worker) stopThread() {
	if w.thread != nil {
		w.thread.Close()
		w.thread = nil
	}
	C.free(w.job) // free(NULL) is fine
	w.job = nil
}

// full runs whisper_full_with_state on w's state with w's abort flag and
// returns its code.
func (w *worker) full(ctx *C.struct_whisper_context, params C.struct_whisper_full_params, samples []float32) int {
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&samples[0])
	var local C.asr_job
	j := &local // a direct call: Go memory is fine for the call's length
	if w.job != nil {
		j = (*C.asr_job)(w.job)
	}
	*j = C.asr_job{ctx: ctx, state: w.state, params: params,
		samples: (*C.float)(unsafe.Pointer(&samples[0])), n: C.int(len(samples)), flag: w.abort}
	if w.thread != nil && w.thread.Do(unsafe.Pointer(C.asr_full_job), w.job) == nil {
		return int(j.rc)
	}
	C.asr_full_job(unsafe.Pointer(j))
	return int(j.rc)
}
