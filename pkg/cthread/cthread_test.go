//go:build cgo && linux

package cthread

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

func threads(t *testing.T) int {
	t.Helper()
	e, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(e)
}

func fds(t *testing.T) int {
	t.Helper()
	e, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(e)
}

// TestDoRunsOnItsThread: the function runs on the worker's own thread,
// the same one each time, and Do returns only after it has returned.
func TestDoRunsOnItsThread(t *testing.T) {
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := newProbe(2000)
	defer freeProbe(p)
	var first int64
	for i := range 3 {
		if err := w.Do(probeFn, probeArg(p)); err != nil {
			t.Fatal(err)
		}
		if int(p.runs) != i+1 {
			t.Fatalf("Do returned before the function: %d runs after %d calls", p.runs, i+1)
		}
		tid := int64(p.tid)
		if tid == int64(syscall.Gettid()) {
			t.Fatal("the function ran on the calling thread")
		}
		if first == 0 {
			first = tid
		} else if tid != first {
			t.Errorf("call %d ran on thread %d, the first on %d", i, tid, first)
		}
	}
	if err := w.Do(nil, nil); err == nil {
		t.Error("Do without a function: no error")
	}
}

// TestCloseWaitsAndRefuses: calls from many goroutines are serialised;
// Close waits for the call in flight; later calls get ErrClosed; nothing
// (thread, descriptor) is left behind.
func TestCloseWaitsAndRefuses(t *testing.T) {
	th0, fd0 := threads(t), fds(t)
	for range 20 {
		w, err := New()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	p := newProbe(1000)
	defer freeProbe(p)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for range 8 {
		wg.Go(func() {
			for range 5 {
				err := w.Do(probeFn, probeArg(p))
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		})
	}
	time.Sleep(10 * time.Millisecond)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if int(p.runs) != done {
		t.Errorf("%d calls returned, the function ran %d times (overlapping calls or one cut short)", done, p.runs)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Do(probeFn, probeArg(p)); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close: %v", err)
	}
	// The Go runtime may keep threads of its own; the workers' are gone.
	if th, fd := threads(t), fds(t); th > th0+2 || fd != fd0 {
		t.Errorf("after 21 workers: %d threads (from %d), %d descriptors (from %d)", th, th0, fd, fd0)
	}
}
