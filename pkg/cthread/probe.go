//go:build cgo && linux

package cthread

/*
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

// cthread_probe records the thread it runs on and sleeps: the tests' C
// function (cgo is not allowed in test files).
typedef struct { long tid; long sleep_us; long runs; } cthread_probe_arg;

void cthread_probe(void *p) {
	cthread_probe_arg *a = p;
	a->tid = syscall(SYS_gettid);
	struct timespec ts = { a->sleep_us / 1000000, (a->sleep_us % 1000000) * 1000 };
	nanosleep(&ts, NULL);
	a->runs++;
}
*/
import "C"

import "unsafe"

// probe is a C argument for cthreadProbe, in C memory.
type probe = C.cthread_probe_arg

func newProbe(sleepMicros int) *probe {
	p := (*probe)(C.calloc(1, C.size_t(unsafe.Sizeof(probe{}))))
	p.sleep_us = C.long(sleepMicros)
	return p
}

func freeProbe(p *probe) { C.free(unsafe.Pointer(p)) }

// probeArg is p as Do's argument.
func probeArg(p *probe) unsafe.Pointer { return unsafe.Pointer(p) }

var probeFn = unsafe.Pointer(C.cthread_probe)
