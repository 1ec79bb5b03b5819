//go:build cgo

package embed

// Attacks on the session runner thread (pkg/onnxrt/thread.go)
// and on how pkg/embed uses it (pkg/embed/onnx.go).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/embed/embedtest"
	"agent/pkg/onnxrt"

	ort "github.com/yalue/onnxruntime_go"
)

func closeEnough(t *testing.T, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("lengths %d and %d", len(a), len(b))
	}
	for i := range a {
		if d := math.Abs(float64(a[i] - b[i])); d > 1e-5 {
			t.Fatalf("dim %d: %v vs %v", i, a[i], b[i])
		}
	}
}

func countEntries(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestNoThreadOrFDLeak: opening and closing embedders (each with a
// runner thread, a pipe, and ONNX Runtime's own workers) leaves no thread
// or file descriptor behind; an open embedder holds exactly one more
// thread than in-call mode would (the runner), and two more fds.
func TestNoThreadOrFDLeak(t *testing.T) {
	// Warm up: the first embedder loads the library and the global env.
	w := newTestEmbedder(t, Config{})
	if _, err := w.Embed(context.Background(), []string{"warm"}); err != nil {
		t.Fatal(err)
	}
	settle := func() {
		runtime.GC()
		time.Sleep(50 * time.Millisecond)
	}
	settle()
	fd0, task0 := countEntries(t, "/proc/self/fd"), countEntries(t, "/proc/self/task")
	const n = 12
	for i := range n {
		e, err := New(Config{LibraryPath: needRuntime(t), ModelDir: fixtureDir(t)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.session.thread == nil {
			t.Fatal("no runner thread")
		}
		if i == 0 {
			fd1, task1 := countEntries(t, "/proc/self/fd"), countEntries(t, "/proc/self/task")
			t.Logf("one open embedder: fds %d -> %d, threads %d -> %d", fd0, fd1, task0, task1)
		}
		if _, err := e.Embed(context.Background(), corpus()); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	fd2, task2 := countEntries(t, "/proc/self/fd"), countEntries(t, "/proc/self/task")
	t.Logf("after %d embedders: fds %d -> %d, threads %d -> %d", n, fd0, fd2, task0, task2)
	if fd2 > fd0 {
		t.Errorf("%d fds leaked over %d embedders", fd2-fd0, n)
	}
	// Go may start an M or two on its own; a leak is one per embedder.
	if task2 > task0+2 {
		t.Errorf("%d threads leaked over %d embedders", task2-task0, n)
	}
}

// TestCloseWhileEmbedding: Embedder.Close while Embeds are in
// flight on the runner (some with contexts that get cancelled) waits for
// them, and every Embed either finishes with the right vectors, returns
// the context's error, or ErrClosed. Never anything else, no hang.
func TestCloseWhileEmbedding(t *testing.T) {
	ref := newTestEmbedder(t, Config{})
	texts := corpus()
	want, err := ref.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 6 {
		e := newTestEmbedder(t, Config{})
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if g%2 == 1 {
					time.AfterFunc(time.Duration(rand.IntN(3000))*time.Microsecond, cancel)
				}
				got, err := e.Embed(ctx, texts)
				switch {
				case err == nil:
					for i := range got {
						closeEnough(t, got[i], want[i])
					}
				case errors.Is(err, context.Canceled), errors.Is(err, ErrClosed):
				default:
					t.Errorf("round %d goroutine %d: %v", round, g, err)
				}
			})
		}
		time.Sleep(time.Duration(round) * time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- e.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("Close hangs while Embeds are in flight")
		}
		wg.Wait()
		if err := e.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if _, err := e.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrClosed) {
			t.Errorf("Embed after Close: %v", err)
		}
		if n := e.live.Load(); n != 0 {
			t.Errorf("round %d: %d native values alive", round, n)
		}
	}
}

// TestCancelStorm: cancelling at random points, again and again,
// never gives an error other than the context's, never poisons the next
// run (ORT's terminate flag is per RunOptions), and leaks no value.
func TestCancelStorm(t *testing.T) {
	e := newTestEmbedder(t, Config{})
	probe := []string{"after the storm"}
	want, err := e.Embed(context.Background(), probe)
	if err != nil {
		t.Fatal(err)
	}
	big := slices.Repeat([]string{strings.Repeat("many tokens here ", 20)}, 4)
	cancelled := 0
	for i := range 60 {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Duration(rand.IntN(40000))*time.Microsecond, cancel)
		_, err := e.Embed(ctx, big)
		cancel()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("run %d: %v", i, err)
			}
			cancelled++
		}
		got, err := e.Embed(context.Background(), probe)
		if err != nil {
			t.Fatalf("run %d: the next Embed: %v", i, err)
		}
		closeEnough(t, got[0], want[0])
		// A context that is already over: no run at all.
		ctx, cancel = context.WithCancel(context.Background())
		cancel()
		if _, err := e.Embed(ctx, probe); !errors.Is(err, context.Canceled) {
			t.Fatalf("Embed with a context already cancelled: %v", err)
		}
	}
	t.Logf("%d of 60 cancelled", cancelled)
	if n := e.live.Load(); n != 0 {
		t.Errorf("%d native values alive", n)
	}
}

// TestGCDuringRuns: the runner's C thread reads and writes Go
// slices while the caller is parked; collections (and stack shrinking of
// the parked goroutine) during the runs must not change the results.
func TestGCDuringRuns(t *testing.T) {
	e := newTestEmbedder(t, Config{})
	texts := corpus()
	want, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var gc sync.WaitGroup
	gc.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			runtime.GC()
			_ = make([]byte, 1<<20) // churn
		}
	})
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			for i := range 10 {
				sub := texts[(g+i)%5:]
				got, err := e.Embed(context.Background(), sub)
				if err != nil {
					t.Error(err)
					return
				}
				for k := range sub {
					closeEnough(t, got[k], want[k+(g+i)%5])
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	gc.Wait()
}

// TestRunnerAbuse: the runner's edges. Close racing Runs from
// several goroutines (with RunOptions that get terminated), Close twice,
// Run after Close, values destroyed before Run, typed-nil outputs.
func TestRunnerAbuse(t *testing.T) {
	e := newTestEmbedder(t, Config{})
	ins, out := runnerInputs(t, e)
	r, err := onnxrt.NewThreadRunner(e.session.DynamicAdvancedSession)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ins, []ort.Value{out}, nil); err != nil {
		t.Fatal(err)
	}
	ref := slices.Clone(out.GetData())

	t.Run("terminated options", func(t *testing.T) {
		opts, err := ort.NewRunOptions()
		if err != nil {
			t.Fatal(err)
		}
		defer opts.Destroy()
		opts.Terminate()
		if err := r.Run(ins, []ort.Value{out}, opts); err == nil {
			t.Error("a run with the terminate flag set succeeded")
		}
		opts.UnsetTerminate()
		if err := r.Run(ins, []ort.Value{out}, opts); err != nil {
			t.Errorf("after UnsetTerminate: %v", err)
		}
		closeEnough(t, out.GetData(), ref)
	})

	t.Run("destroyed RunOptions", func(t *testing.T) {
		opts, err := ort.NewRunOptions()
		if err != nil {
			t.Fatal(err)
		}
		opts.Destroy()
		err = r.Run(ins, []ort.Value{out}, opts)
		if err == nil {
			t.Fatal("a run with destroyed RunOptions succeeded")
		}
		if strings.Contains(err.Error(), "not where this version expects it") {
			t.Errorf("destroyed RunOptions reported as a binding layout change: %v", err)
		}
	})

	t.Run("destroyed input", func(t *testing.T) {
		v, err := ort.NewTensor(ort.NewShape(1, 1), []int64{1})
		if err != nil {
			t.Fatal(err)
		}
		v.Destroy()
		bad := slices.Clone(ins)
		bad[0] = v
		err = r.Run(bad, []ort.Value{out}, nil)
		if err == nil {
			t.Fatal("a run with a destroyed input succeeded")
		}
		if strings.Contains(err.Error(), "not where this version expects it") {
			t.Errorf("a destroyed input reported as a binding layout change: %v", err)
		}
	})

	t.Run("typed nil output", func(t *testing.T) {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
					t.Errorf("Run with a typed-nil output panics instead of returning an error: %v", p)
				}
			}()
			err = r.Run(ins, []ort.Value{(*ort.Tensor[float32])(nil)}, nil)
		}()
		if err == nil {
			t.Error("Run with a typed-nil output: no error")
		}
		// The runner must still work (its mutex was released).
		done := make(chan error, 1)
		go func() { done <- r.Run(ins, []ort.Value{out}, nil) }()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the runner hangs after a bad Run")
		}
	})

	t.Run("close racing runs", func(t *testing.T) {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for range 20 {
					var opts *ort.RunOptions
					if g%2 == 1 {
						opts, _ = ort.NewRunOptions()
						tm := time.AfterFunc(time.Duration(rand.IntN(500))*time.Microsecond, func() { opts.Terminate() })
						defer func() { tm.Stop(); time.Sleep(time.Millisecond); opts.Destroy() }()
					}
					err := r.Run(ins, []ort.Value{out}, opts)
					if errors.Is(err, onnxrt.ErrRunnerClosed) {
						return
					}
					if err != nil && !strings.Contains(err.Error(), "erminat") {
						t.Errorf("Run: %v", err)
					}
				}
			})
		}
		time.Sleep(3 * time.Millisecond)
		var cw sync.WaitGroup
		for range 3 {
			cw.Go(func() {
				if err := r.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
		}
		cw.Wait()
		wg.Wait()
		if err := r.Run(ins, []ort.Value{out}, nil); !errors.Is(err, onnxrt.ErrRunnerClosed) {
			t.Errorf("Run after Close: %v", err)
		}
	})
	// The embedder's own runner was untouched by all this.
	got, err := e.Embed(context.Background(), []string{"hello world"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got[0]) != e.dim {
		t.Fatalf("dim %d", len(got[0]))
	}
}

// TestRunAfterSessionDestroyed: the runner copies the session's C
// pointers (session, input and output names) once, in NewThreadRunner,
// and never looks again. A session destroyed before its runner is closed
// (DynamicAdvancedSession.Destroy is promoted through embed's session
// struct, and onnxrt.ThreadRunner is an exported API) leaves the runner
// calling ONNX Runtime with a freed session and freed names: a use after
// free, instead of an error. Run in a child process, as it may crash.
func TestRunAfterSessionDestroyed(t *testing.T) {
	if os.Getenv("AGENT_DESTROYED_SESSION_CHILD") == "1" {
		runDestroyedSessionChild(t)
		return
	}
	needRuntime(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunAfterSessionDestroyed$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "AGENT_DESTROYED_SESSION_CHILD=1")
	out, err := cmd.CombinedOutput()
	s := string(out)
	if i := strings.Index(s, "DESTROYED_SESSION:"); i >= 0 {
		t.Logf("child: %s", strings.SplitN(s[i:], "\n", 2)[0])
	}
	if err != nil {
		tail := s
		if len(tail) > 1500 {
			tail = tail[:1500]
		}
		t.Fatalf("the child died running a destroyed session through its runner: %v\n%s", err, tail)
	}
	if !strings.Contains(s, "DESTROYED_SESSION: refused") {
		t.Fatalf("Run on a runner whose session was destroyed did not return an error:\n%s", s)
	}
	// An error that ONNX Runtime gave means it was called with the freed
	// session (the names it complains about are freed memory).
	if strings.Contains(s, "DESTROYED_SESSION: refused: onnxrt: run:") {
		t.Fatalf("the runner called ONNX Runtime with a destroyed session and freed names (use after free); it should refuse before the call")
	}
}

func runDestroyedSessionChild(t *testing.T) {
	e := newTestEmbedder(t, Config{})
	ins, out := runnerInputs(t, e)
	r, err := onnxrt.NewThreadRunner(e.session.DynamicAdvancedSession)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ins, []ort.Value{out}, nil); err != nil {
		t.Fatal(err)
	}
	// The session goes; r does not know.
	e.session.thread.Close()
	e.session.thread = nil
	if err := e.session.DynamicAdvancedSession.Destroy(); err != nil {
		t.Fatal(err)
	}
	e.closed = true // its Close must not destroy the session again
	err = r.Run(ins, []ort.Value{out}, nil)
	if err != nil {
		fmt.Printf("DESTROYED_SESSION: refused: %v\n", err)
	} else {
		fmt.Printf("DESTROYED_SESSION: ran on a destroyed session without an error\n")
	}
	r.Close()
}

// TestORTErrorOnThread: an input the model cannot take (a text
// longer than its position table, reachable with a MaxTokens set above
// the model's limit, as a hostile long text then triggers) fails inside
// ONNX Runtime on the runner's thread: the error must come back as an
// error, the same way as in a cgo call, and the session must stay usable.
// Empty batches and empty texts still work.
func TestORTErrorOnThread(t *testing.T) {
	onThread := newTestEmbedder(t, Config{MaxTokens: 2048})
	inCall := newTestEmbedder(t, Config{MaxTokens: 2048})
	cgoOnly(t, inCall)
	long := strings.Repeat("word ", 1500)
	for _, ctx := range []context.Context{context.Background(), t.Context()} {
		_, errT := onThread.Embed(ctx, []string{"short", long})
		_, errC := inCall.Embed(ctx, []string{"short", long})
		t.Logf("thread: %v\ncgo: %v", errT, errC)
		if (errT == nil) != (errC == nil) {
			t.Fatalf("thread and cgo disagree: %v / %v", errT, errC)
		}
		if errT == nil {
			t.Skip("the model takes 1500 positions; nothing to test")
		}
		if !strings.Contains(errT.Error(), "embed: inference:") {
			t.Errorf("thread error: %v", errT)
		}
	}
	got, err := onThread.Embed(context.Background(), []string{"", "after the error"})
	if err != nil {
		t.Fatalf("after an ORT error: %v", err)
	}
	want, err := inCall.Embed(context.Background(), []string{"", "after the error"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		closeEnough(t, got[i], want[i])
	}
	if out, err := onThread.Embed(context.Background(), nil); err != nil || len(out) != 0 {
		t.Errorf("empty batch: %v %v", out, err)
	}
	if n := onThread.live.Load(); n != 0 {
		t.Errorf("%d native values alive", n)
	}
}

// TestRunnerWrongShapes: inputs whose shapes disagree with each
// other or with the output reach ONNX Runtime on the thread and come back
// as its error; the runner keeps working.
func TestRunnerWrongShapes(t *testing.T) {
	e := newTestEmbedder(t, Config{})
	ins, out := runnerInputs(t, e)
	r, err := onnxrt.NewThreadRunner(e.session.DynamicAdvancedSession)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	odd, err := ort.NewTensor(ort.NewShape(1, 7), make([]int64, 7))
	if err != nil {
		t.Fatal(err)
	}
	defer odd.Destroy()
	for i := range ins {
		bad := slices.Clone(ins)
		bad[i] = odd
		if err := r.Run(bad, []ort.Value{out}, nil); err == nil || !strings.Contains(err.Error(), "onnxrt: run:") {
			t.Errorf("input %d of another shape: %v", i, err)
		}
	}
	f, err := ort.NewEmptyTensor[float32](ort.NewShape(1, 4))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Destroy()
	bad := slices.Clone(ins)
	bad[0] = f // a float where int64 is wanted
	if err := r.Run(bad, []ort.Value{out}, nil); err == nil {
		t.Error("a float input: no error")
	}
	if err := r.Run(ins, []ort.Value{out}, nil); err != nil {
		t.Errorf("after the errors: %v", err)
	}
}

// threadSwitches reads every thread's voluntary context switches.
func threadSwitches(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ents {
		b, err := os.ReadFile("/proc/self/task/" + d.Name() + "/status")
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
				var n int
				fmt.Sscan(strings.TrimSpace(v), &n)
				out[d.Name()] = n
			}
		}
	}
	return out
}

// TestSysmonClaim measures the file comment's mechanism on the
// bge-small shape: per thread, the voluntary context switches an
// embedding (sysmon sleeps with usleep, so each of its wakes is one), in a
// cgo call and on the runner's thread. It reports what it sees and fails
// only when the runner path is slower by more than a quarter. Measured on
// a box with 2 cores, under load: sysmon (the process's second
// thread) woke 19-22 times an embedding in a cgo call, 4.5-7.5 times with
// the runner.
func TestSysmonClaim(t *testing.T) {
	if os.Getenv("AGENT_SYSMON_MEASURE") != "1" {
		t.Skip("a measurement (noisy on a loaded box): set AGENT_SYSMON_MEASURE=1")
	}
	dir := filepath.Join(repoRoot(t), "testdata", "models", "bge-small-random")
	if err := embedtest.EnsureBGESmall(dir); err != nil {
		t.Fatal(err)
	}
	e := newTestEmbedder(t, Config{ModelDir: dir, Threads: 2})
	texts := []string{benchSentence}
	measure := func(name string) time.Duration {
		for range 10 {
			e.Embed(context.Background(), texts)
		}
		const n = 150
		before := threadSwitches(t)
		start := time.Now()
		for range n {
			if _, err := e.Embed(context.Background(), texts); err != nil {
				t.Fatal(err)
			}
		}
		el := time.Since(start)
		after := threadSwitches(t)
		var d []string
		for id, v := range after {
			if x := v - before[id]; x > n/10 {
				d = append(d, fmt.Sprintf("%s:%.1f", id, float64(x)/n))
			}
		}
		slices.Sort(d)
		t.Logf("%s: %v an embedding; threads waking more than every 10th embedding (tid:switches an embedding): %v", name, el/n, d)
		return el / n
	}
	onThread := measure("runner thread")
	cgoOnly(t, e)
	inCall := measure("cgo call")
	if onThread > inCall*5/4 {
		t.Errorf("the runner path is slower: %v against %v in a cgo call", onThread, inCall)
	}
}
