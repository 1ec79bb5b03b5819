//go:build cgo

package onnxrt

// A session run on a thread of its own, outside the Go scheduler.
//
// Why: a cgo call holds its P in a system call for the whole run. While it
// does and another P is idle, the runtime's sysmon thread wakes every 20 µs
// to see whether to take the P back, and every cgo call that starts wakes
// it out of its deep sleep to begin that again. ONNX Runtime's intra-op
// threads spin on every core they have during a run; on a two-core box each
// of those wakes preempts one of them, and every parallel operator then
// waits for the preempted thread. Measured on the bge-small shape with two
// threads: about 15 wakes per embedding and a millisecond lost (p50 6.4 ms
// in a cgo call, 5.4 ms with sysmon unable to preempt). Here the run happens
// on a C thread while the calling goroutine is parked on a pipe in the
// network poller: with every P idle, sysmon sleeps through the run.

/*
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Declared as onnxruntime_c_api.h declares them (opaque structs), and as
// github.com/yalue/onnxruntime_go's C wrapper defines the functions, which
// are linked into every binary that uses that package.
typedef struct OrtSession OrtSession;
typedef struct OrtValue OrtValue;
typedef struct OrtRunOptions OrtRunOptions;
typedef struct OrtStatus OrtStatus;
OrtStatus *RunOrtSessionWithOptions(OrtSession *session,
	OrtValue **inputs, char **input_names, int input_count,
	OrtValue **outputs, char **output_names, int output_count,
	OrtRunOptions *run_options);
const char *GetErrorMessage(OrtStatus *status);
void ReleaseOrtStatus(OrtStatus *status);

typedef struct {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int job, quit;
	OrtSession *session;
	char **in_names, **out_names;
	int nin, nout;
	OrtValue **ins, **outs;
	OrtRunOptions *opts;
	OrtStatus *status;
	int done_fd;
} agent_ort_runner;

static void *agent_ort_runner_main(void *arg) {
	agent_ort_runner *r = arg;
	for (;;) {
		pthread_mutex_lock(&r->mu);
		while (!r->job && !r->quit) pthread_cond_wait(&r->cv, &r->mu);
		if (r->quit) {
			pthread_mutex_unlock(&r->mu);
			return NULL;
		}
		r->job = 0;
		pthread_mutex_unlock(&r->mu);
		r->status = RunOrtSessionWithOptions(r->session, r->ins, r->in_names, r->nin,
			r->outs, r->out_names, r->nout, r->opts);
		char c = 1;
		while (write(r->done_fd, &c, 1) < 0 && errno == EINTR) {}
	}
}

static agent_ort_runner *agent_ort_runner_new(OrtSession *s, int nin, int nout, int done_fd) {
	agent_ort_runner *r = calloc(1, sizeof *r);
	if (!r) return NULL;
	r->session = s;
	r->nin = nin;
	r->nout = nout;
	r->done_fd = done_fd;
	r->in_names = calloc(nin, sizeof(char *));
	r->out_names = calloc(nout, sizeof(char *));
	r->ins = calloc(nin, sizeof(OrtValue *));
	r->outs = calloc(nout, sizeof(OrtValue *));
	if (!r->in_names || !r->out_names || !r->ins || !r->outs) goto fail;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	if (pthread_create(&r->thread, NULL, agent_ort_runner_main, r) != 0) {
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		goto fail;
	}
	return r;
fail:
	free(r->in_names); free(r->out_names); free(r->ins); free(r->outs); free(r);
	return NULL;
}

static void agent_ort_runner_set_name(agent_ort_runner *r, int out, int i, char *name) {
	(out ? r->out_names : r->in_names)[i] = name;
}

static void agent_ort_runner_set_value(agent_ort_runner *r, int out, int i, OrtValue *v) {
	(out ? r->outs : r->ins)[i] = v;
}

static void agent_ort_runner_start(agent_ort_runner *r, OrtRunOptions *opts) {
	pthread_mutex_lock(&r->mu);
	r->opts = opts;
	r->status = NULL;
	r->job = 1;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

// agent_ort_runner_result takes the finished run's error message (NULL
// when it succeeded); the caller frees it.
static char *agent_ort_runner_result(agent_ort_runner *r) {
	OrtStatus *st = r->status;
	r->status = NULL;
	if (!st) return NULL;
	const char *m = GetErrorMessage(st);
	char *out = m ? strdup(m) : NULL;
	ReleaseOrtStatus(st);
	return out;
}

// agent_ort_runner_wait_fd blocks until fd has a byte and reads it.
static void agent_ort_runner_wait_fd(int fd) {
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;
	for (;;) {
		if (read(fd, &c, 1) == 1) return;
		if (errno != EAGAIN && errno != EINTR) return;
		poll(&p, 1, -1);
	}
}

static void agent_ort_runner_free(agent_ort_runner *r) {
	pthread_mutex_lock(&r->mu);
	r->quit = 1;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r->in_names); free(r->out_names); free(r->ins); free(r->outs); free(r);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sync"
	"syscall"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// ErrRunnerClosed is returned by Run after Close.
var ErrRunnerClosed = errors.New("onnxrt: runner closed")

// ThreadRunner runs one session on a dedicated OS thread (see the top of
// this file for why). Runs are serialised. Outputs must be allocated by the
// caller; the session and the values must outlive the runner and the run.
type ThreadRunner struct {
	mu     sync.Mutex
	r      *C.agent_ort_runner
	done   *os.File // read end of the pipe the thread writes a byte to after each run
	rfd    int
	wfd    int
	nin    int
	nout   int
	closed bool
}

// NewThreadRunner starts the thread for s. It fails (and the caller runs
// the session the ordinary way) when the binding's internals it reads do
// not have the expected shape, as after an upgrade of the binding.
func NewThreadRunner(s *ort.DynamicAdvancedSession) (*ThreadRunner, error) {
	sess, ins, outs, err := sessionInternals(s)
	if err != nil {
		return nil, err
	}
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("onnxrt: runner pipe: %w", err)
	}
	r := C.agent_ort_runner_new((*C.OrtSession)(sess), C.int(len(ins)), C.int(len(outs)), C.int(fds[1]))
	if r == nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, errors.New("onnxrt: runner: cannot start a thread")
	}
	for i, p := range ins {
		C.agent_ort_runner_set_name(r, 0, C.int(i), (*C.char)(p))
	}
	for i, p := range outs {
		C.agent_ort_runner_set_name(r, 1, C.int(i), (*C.char)(p))
	}
	return &ThreadRunner{r: r, done: os.NewFile(uintptr(fds[0]), "onnxrt-runner"), rfd: fds[0], wfd: fds[1], nin: len(ins), nout: len(outs)}, nil
}

// Run runs the session on the runner's thread with opts (nil for none)
// and waits for it, parked in the network poller. Cancel a run through
// opts.Terminate. Every output must be non-nil.
func (t *ThreadRunner) Run(inputs, outputs []ort.Value, opts *ort.RunOptions) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrRunnerClosed
	}
	if len(inputs) != t.nin || len(outputs) != t.nout {
		return fmt.Errorf("onnxrt: runner: %d inputs and %d outputs given, the session has %d and %d", len(inputs), len(outputs), t.nin, t.nout)
	}
	for i, v := range inputs {
		p, err := valuePtr(v)
		if err != nil {
			return fmt.Errorf("onnxrt: runner: input %d: %w", i, err)
		}
		C.agent_ort_runner_set_value(t.r, 0, C.int(i), (*C.OrtValue)(p))
	}
	for i, v := range outputs {
		p, err := valuePtr(v)
		if err != nil {
			return fmt.Errorf("onnxrt: runner: output %d: %w", i, err)
		}
		C.agent_ort_runner_set_value(t.r, 1, C.int(i), (*C.OrtValue)(p))
	}
	var ro unsafe.Pointer
	if opts != nil {
		f := reflect.ValueOf(opts).Elem().FieldByName("o")
		if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
			return errLayout("RunOptions.o")
		}
		ro = f.UnsafePointer()
	}
	C.agent_ort_runner_start(t.r, (*C.OrtRunOptions)(ro))
	// The thread writes exactly one byte when the run ends; nothing else
	// reads or closes the pipe while t.mu is held, so this returns only
	// after the run, whatever happens to the caller's context.
	var b [1]byte
	if _, err := io.ReadFull(t.done, b[:]); err != nil {
		// Cannot happen with a pipe only this runner holds; still,
		// never return while the thread may use the values.
		C.agent_ort_runner_wait_fd(C.int(t.rfd))
	}
	if msg := C.agent_ort_runner_result(t.r); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		return fmt.Errorf("onnxrt: run: %s", C.GoString(msg))
	}
	return nil
}

// Close stops the thread after a run in flight ends. Later runs return
// ErrRunnerClosed. Close the runner before destroying its session.
func (t *ThreadRunner) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	C.agent_ort_runner_free(t.r)
	t.r = nil
	syscall.Close(t.wfd)
	return t.done.Close()
}

func errLayout(field string) error {
	return fmt.Errorf("onnxrt: runner: the binding's %s is not where this version expects it", field)
}

// sessionInternals reads the C session and its input and output names
// out of the binding's session (unexported fields of
// github.com/yalue/onnxruntime_go v1.27: DynamicAdvancedSession.s ->
// AdvancedSession{ortSession, inputNames, outputNames}). They are C
// pointers: the session and names live as long as the session.
func sessionInternals(s *ort.DynamicAdvancedSession) (sess unsafe.Pointer, ins, outs []unsafe.Pointer, err error) {
	if s == nil {
		return nil, nil, nil, errors.New("onnxrt: runner: no session")
	}
	a := reflect.ValueOf(s).Elem().FieldByName("s")
	if !a.IsValid() || a.Kind() != reflect.Pointer || a.IsNil() || a.Elem().Kind() != reflect.Struct {
		return nil, nil, nil, errLayout("DynamicAdvancedSession.s")
	}
	a = a.Elem()
	f := a.FieldByName("ortSession")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
		return nil, nil, nil, errLayout("AdvancedSession.ortSession")
	}
	names := func(field string) ([]unsafe.Pointer, error) {
		v := a.FieldByName(field)
		if !v.IsValid() || v.Kind() != reflect.Slice || v.Type().Elem().Kind() != reflect.Pointer || v.Len() == 0 {
			return nil, errLayout("AdvancedSession." + field)
		}
		out := make([]unsafe.Pointer, v.Len())
		for i := range out {
			if out[i] = v.Index(i).UnsafePointer(); out[i] == nil {
				return nil, errLayout("AdvancedSession." + field)
			}
		}
		return out, nil
	}
	if ins, err = names("inputNames"); err != nil {
		return nil, nil, nil, err
	}
	if outs, err = names("outputNames"); err != nil {
		return nil, nil, nil, err
	}
	return f.UnsafePointer(), ins, outs, nil
}

// valuePtr is v's C OrtValue (ValueInternalData.ortValue).
func valuePtr(v ort.Value) (unsafe.Pointer, error) {
	if v == nil {
		return nil, errors.New("nil value (outputs must be allocated by the caller)")
	}
	in := v.GetInternals()
	if in == nil {
		return nil, errLayout("ValueInternalData")
	}
	f := reflect.ValueOf(in).Elem().FieldByName("ortValue")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
		return nil, errLayout("ValueInternalData.ortValue")
	}
	return f.UnsafePointer(), nil
}
