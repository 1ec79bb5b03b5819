//go:build cgo && linux

package cthread

/*
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef void (*cthread_fn)(void *);

typedef struct {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int job, quit;
	cthread_fn fn;
	void *arg;
	int done_fd;
} cthread_worker;

static void *cthread_main(void *p) {
	cthread_worker *w = p;
	for (;;) {
		pthread_mutex_lock(&w->mu);
		while (!w->job && !w->quit) pthread_cond_wait(&w->cv, &w->mu);
		if (w->quit) {
			pthread_mutex_unlock(&w->mu);
			return NULL;
		}
		w->job = 0;
		cthread_fn fn = w->fn;
		void *arg = w->arg;
		pthread_mutex_unlock(&w->mu);
		fn(arg);
		char c = 1;
		while (write(w->done_fd, &c, 1) < 0 && errno == EINTR) {}
	}
}

static cthread_worker *cthread_new(int done_fd) {
	cthread_worker *w = calloc(1, sizeof *w);
	if (!w) return NULL;
	w->done_fd = done_fd;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->thread, NULL, cthread_main, w) != 0) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w);
		return NULL;
	}
	return w;
}

static void cthread_start(cthread_worker *w, void *fn, void *arg) {
	pthread_mutex_lock(&w->mu);
	w->fn = (cthread_fn)fn;
	w->arg = arg;
	w->job = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

// cthread_wait_fd blocks until fd has a byte and reads it.
static void cthread_wait_fd(int fd) {
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;
	for (;;) {
		if (read(fd, &c, 1) == 1) return;
		if (errno != EAGAIN && errno != EINTR) return;
		poll(&p, 1, -1);
	}
}

static void cthread_free(cthread_worker *w) {
	pthread_mutex_lock(&w->mu);
	w->quit = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("cthread: worker closed")

// Worker is one OS thread that runs C functions handed to it, one at a
// time.
type Worker struct {
	mu     sync.Mutex
	w      *C.cthread_worker
	done   *os.File // read end of the pipe the thread writes a byte to after each call
	rfd    int
	wfd    int
	closed bool
}

// New starts a worker thread.
func New() (*Worker, error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("cthread: pipe: %w", err)
	}
	w := C.cthread_new(C.int(fds[1]))
	if w == nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, errors.New("cthread: cannot start a thread")
	}
	return &Worker{w: w, done: os.NewFile(uintptr(fds[0]), "cthread"), rfd: fds[0], wfd: fds[1]}, nil
}

// Do calls fn(arg) on the worker's thread and returns when fn has
// returned, whatever happens meanwhile: fn is a C function `void
// (*)(void *)`, and arg and whatever it points to must be C memory or Go
// memory pinned for the call (runtime.Pinner). The goroutine waits in the
// network poller, holding no P. Calls are serialised.
func (w *Worker) Do(fn, arg unsafe.Pointer) error {
	if fn == nil {
		return errors.New("cthread: no function")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	C.cthread_start(w.w, fn, arg)
	// The thread writes exactly one byte when fn returns; nothing else
	// reads or closes the pipe while w.mu is held.
	var b [1]byte
	if _, err := io.ReadFull(w.done, b[:]); err != nil {
		// Cannot happen with a pipe only this worker holds; still,
		// never return while fn may run.
		C.cthread_wait_fd(C.int(w.rfd))
	}
	return nil
}

// Close stops the thread after a call in flight returns. Later calls
// return ErrClosed.
func (w *Worker) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	C.cthread_free(w.w)
	w.w = nil
	syscall.Close(w.wfd)
	return w.done.Close()
}
