//go:build cgo

package onnxrt

// A session run on a thread of its own (package cthread says why).

/*
#include <stdlib.h>
#include <string.h>

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

// One run's arguments and result, in C memory: the worker thread reads
// them after the cgo call that filled them has returned.
typedef struct {
	OrtSession *session;
	char **in_names, **out_names;
	int nin, nout;
	OrtValue **ins, **outs;
	OrtRunOptions *opts;
	OrtStatus *status;
} agent_ort_job;

// Not static: Go takes its address for cthread.
void agent_ort_job_run(void *arg) {
	agent_ort_job *j = arg;
	j->status = RunOrtSessionWithOptions(j->session, j->ins, j->in_names, j->nin,
		j->outs, j->out_names, j->nout, j->opts);
}

static agent_ort_job *agent_ort_job_new(OrtSession *s, int nin, int nout) {
	agent_ort_job *j = calloc(1, sizeof *j);
	if (!j) return NULL;
	j->session = s;
	j->nin = nin;
	j->nout = nout;
	j->in_names = calloc(nin, sizeof(char *));
	j->out_names = calloc(nout, sizeof(char *));
	j->ins = calloc(nin, sizeof(OrtValue *));
	j->outs = calloc(nout, sizeof(OrtValue *));
	if (!j->in_names || !j->out_names || !j->ins || !j->outs) {
		free(j->in_names); free(j->out_names); free(j->ins); free(j->outs); free(j);
		return NULL;
	}
	return j;
}

static void agent_ort_job_set_name(agent_ort_job *j, int out, int i, char *name) {
	(out ? j->out_names : j->in_names)[i] = name;
}

static void agent_ort_job_set_value(agent_ort_job *j, int out, int i, OrtValue *v) {
	(out ? j->outs : j->ins)[i] = v;
}

// agent_ort_job_result takes the finished run's error message (NULL when
// it succeeded); the caller frees it.
static char *agent_ort_job_result(agent_ort_job *j) {
	OrtStatus *st = j->status;
	j->status = NULL;
	if (!st) return NULL;
	const char *m = GetErrorMessage(st);
	char *out = m ? strdup(m) : NULL;
	ReleaseOrtStatus(st);
	return out;
}

static void agent_ort_job_free(agent_ort_job *j) {
	free(j->in_names); free(j->out_names); free(j->ins); free(j->outs); free(j);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"agent/pkg/cthread"

	ort "github.com/yalue/onnxruntime_go"
)

// ErrRunnerClosed is returned by Run after Close.
var ErrRunnerClosed = errors.New("onnxrt: runner closed")

// ThreadRunner runs one session on a dedicated OS thread (a
// cthread.Worker). Runs are serialised. Outputs must be allocated by the
// caller; the session and the values must outlive the runner and the run,
// and Go memory behind the values must be pinned for the run.
type ThreadRunner struct {
	mu     sync.Mutex
	sess   *ort.DynamicAdvancedSession
	worker *cthread.Worker
	job    *C.agent_ort_job
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
	j := C.agent_ort_job_new((*C.OrtSession)(sess), C.int(len(ins)), C.int(len(outs)))
	if j == nil {
		return nil, errors.New("onnxrt: runner: out of memory")
	}
	for i, p := range ins {
		C.agent_ort_job_set_name(j, 0, C.int(i), (*C.char)(p))
	}
	for i, p := range outs {
		C.agent_ort_job_set_name(j, 1, C.int(i), (*C.char)(p))
	}
	w, err := cthread.New()
	if err != nil {
		C.agent_ort_job_free(j)
		return nil, fmt.Errorf("onnxrt: runner: %w", err)
	}
	return &ThreadRunner{sess: s, worker: w, job: j, nin: len(ins), nout: len(outs)}, nil
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
	// A session destroyed before its runner has freed the pointers the
	// job holds: refuse rather than hand them to ONNX Runtime.
	if p, err := livePointer(reflect.ValueOf(t.sess).Elem().FieldByName("s"), "ortSession"); err != nil || p != unsafe.Pointer(t.job.session) {
		return errors.New("onnxrt: runner: the session was destroyed")
	}
	if len(inputs) != t.nin || len(outputs) != t.nout {
		return fmt.Errorf("onnxrt: runner: %d inputs and %d outputs given, the session has %d and %d", len(inputs), len(outputs), t.nin, t.nout)
	}
	for i, v := range inputs {
		p, err := valuePtr(v)
		if err != nil {
			return fmt.Errorf("onnxrt: runner: input %d: %w", i, err)
		}
		C.agent_ort_job_set_value(t.job, 0, C.int(i), (*C.OrtValue)(p))
	}
	for i, v := range outputs {
		p, err := valuePtr(v)
		if err != nil {
			return fmt.Errorf("onnxrt: runner: output %d: %w", i, err)
		}
		C.agent_ort_job_set_value(t.job, 1, C.int(i), (*C.OrtValue)(p))
	}
	t.job.opts = nil
	if opts != nil {
		p, err := livePointer(reflect.ValueOf(opts), "o")
		if err != nil {
			return fmt.Errorf("onnxrt: runner: run options: %w", err)
		}
		t.job.opts = (*C.OrtRunOptions)(p)
	}
	if err := t.worker.Do(unsafe.Pointer(C.agent_ort_job_run), unsafe.Pointer(t.job)); err != nil {
		return fmt.Errorf("onnxrt: runner: %w", err)
	}
	if msg := C.agent_ort_job_result(t.job); msg != nil {
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
	err := t.worker.Close()
	C.agent_ort_job_free(t.job)
	t.job = nil
	return err
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
	p := reflect.ValueOf(s).Elem().FieldByName("s")
	if sess, err = livePointer(p, "ortSession"); err != nil {
		return nil, nil, nil, fmt.Errorf("onnxrt: runner: session: %w", err)
	}
	a := p.Elem()
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
	return sess, ins, outs, nil
}

// errDestroyed: a value or run options whose C object is gone.
var errDestroyed = errors.New("destroyed")

// livePointer reads the C pointer in field of the struct v points to
// (a pointer to a struct of the binding): errDestroyed when it is nil (the
// binding's Destroy sets it so), errLayout when there is no such field.
func livePointer(v reflect.Value, field string) (unsafe.Pointer, error) {
	if !v.IsValid() || v.Kind() != reflect.Pointer {
		return nil, errLayout("pointer to " + field + "'s struct")
	}
	if v.IsNil() {
		return nil, errDestroyed
	}
	if v.Elem().Kind() != reflect.Struct {
		return nil, errLayout(v.Type().String())
	}
	f := v.Elem().FieldByName(field)
	if !f.IsValid() || f.Kind() != reflect.Pointer {
		return nil, errLayout(v.Type().Elem().String() + "." + field)
	}
	if f.IsNil() {
		return nil, errDestroyed
	}
	return f.UnsafePointer(), nil
}

// valuePtr is v's C OrtValue (ValueInternalData.ortValue).
func valuePtr(v ort.Value) (unsafe.Pointer, error) {
	if v == nil {
		return nil, errors.New("nil value (outputs must be allocated by the caller)")
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil, fmt.Errorf("nil %T (outputs must be allocated by the caller)", v)
	}
	return livePointer(reflect.ValueOf(v.GetInternals()), "ortValue")
}
