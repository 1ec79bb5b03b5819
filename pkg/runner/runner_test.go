package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/clock"
)

const testTimeout = 5 * time.Second

func closeRunner(t *testing.T, r *Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// recv fails the test if ch yields nothing within testTimeout.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// waitHook makes the semaphore signal each time a worker joins the line for
// a slot, so tests can order events without sleeping.
func waitHook(r *Runner) <-chan struct{} {
	ch := make(chan struct{}, 100)
	r.sem.onWait = func() { ch <- struct{}{} }
	return ch
}

func TestOrderPerKey(t *testing.T) {
	const keys, jobs = 50, 100
	r := New(Config{MaxConcurrent: 8, QueueLen: jobs}, nil)
	defer closeRunner(t, r)

	got := make([][]int, keys)
	var wg sync.WaitGroup
	wg.Add(keys * jobs)
	var subWG sync.WaitGroup
	for k := range keys {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			key := fmt.Sprintf("p2p:%d", k)
			for j := range jobs {
				err := r.Submit(key, func(context.Context) {
					defer wg.Done()
					got[k] = append(got[k], j)
				})
				if err != nil {
					t.Errorf("Submit(%s, %d): %v", key, j, err)
					wg.Done()
				}
			}
		}()
	}
	subWG.Wait()
	wg.Wait()
	for k, seq := range got {
		if len(seq) != jobs {
			t.Fatalf("key %d: ran %d jobs, want %d", k, len(seq), jobs)
		}
		for i, j := range seq {
			if i != j {
				t.Fatalf("key %d: position %d ran job %d, want %d", k, i, j, i)
			}
		}
	}
}

func TestGlobalCap(t *testing.T) {
	const limit, keys, jobs = 3, 20, 10
	r := New(Config{MaxConcurrent: limit}, nil)
	defer closeRunner(t, r)

	var cur, peak atomic.Int32
	var wg sync.WaitGroup
	for k := range keys {
		for range jobs {
			wg.Add(1)
			err := r.Submit(fmt.Sprint(k), func(context.Context) {
				defer wg.Done()
				n := cur.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				if s := r.Stats(); s.Running > limit {
					t.Errorf("Stats().Running = %d, want <= %d", s.Running, limit)
				}
				runtime.Gosched()
				cur.Add(-1)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	if p := peak.Load(); p > limit || p < 1 {
		t.Errorf("peak concurrency = %d, want 1..%d", p, limit)
	}
}

func TestFloodingKeyDoesNotStarveOthers(t *testing.T) {
	// Two slots: the flooder holds one, the other user gets the second at once.
	r := New(Config{MaxConcurrent: 2, QueueLen: 4}, nil)
	defer closeRunner(t, r)

	gate := make(chan struct{})
	var floodRan atomic.Int32
	flood := func(context.Context) { <-gate; floodRan.Add(1) }
	accepted := 0
	var err error
	for range 100 {
		if err = r.Submit("p2p:flooder", flood); err != nil {
			break
		}
		accepted++
	}
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("flooding Submit error = %v, want ErrQueueFull", err)
	}
	// 1 running (or waiting) + QueueLen pending.
	if accepted > 5 {
		t.Errorf("accepted %d flood jobs, want <= 5", accepted)
	}

	started := make(chan struct{})
	if err := r.Submit("p2p:other", func(context.Context) { close(started) }); err != nil {
		t.Fatalf("other key Submit: %v", err)
	}
	recv(t, started, "other key's job to start while the flooder's backlog is blocked")
	if n := floodRan.Load(); n != 0 {
		t.Errorf("flood jobs finished before other key ran: %d", n)
	}
	close(gate)
}

func TestFairnessFIFO(t *testing.T) {
	r := New(Config{MaxConcurrent: 1, QueueLen: 10}, nil)
	defer closeRunner(t, r)
	waiting := waitHook(r)

	// Every job says when it starts and then holds the slot until the test
	// lets it go, so the test steps the runner one job at a time and the
	// order below does not depend on goroutine scheduling.
	type gated struct {
		started chan struct{}
		release chan struct{}
	}
	jobs := map[string]gated{}
	var mu sync.Mutex
	var order []string
	submit := func(key, name string) {
		g := gated{make(chan struct{}), make(chan struct{})}
		jobs[name] = g
		must(t, r.Submit(key, func(context.Context) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			close(g.started)
			<-g.release
		}))
	}
	// step lets the running job finish, and waits until the next one has
	// started and, when the finished job's key has more queued, until that
	// key has joined the line for a slot again.
	step := func(done, next string, requeues bool) {
		t.Helper()
		close(jobs[done].release)
		recv(t, jobs[next].started, next+" to start")
		if requeues {
			recv(t, waiting, "the key of "+done+" to wait for a slot again")
		}
	}

	submit("A", "A1")
	recv(t, jobs["A1"].started, "A1 to start")
	// A has a backlog; B and C become ready later, one after the other.
	submit("A", "A2")
	submit("A", "A3")
	submit("B", "B1")
	recv(t, waiting, "B to wait for a slot")
	submit("C", "C1")
	recv(t, waiting, "C to wait for a slot")
	submit("B", "B2")

	// After each job a key goes to the back of the line: A1, then the keys
	// that were waiting (B, C), then A again, then B again.
	step("A1", "B1", true) // A waits behind C
	step("B1", "C1", true) // B waits behind A
	step("C1", "A2", false)
	step("A2", "B2", true) // A waits for A3
	step("B2", "A3", false)
	close(jobs["A3"].release)

	want := []string{"A1", "B1", "C1", "A2", "B2", "A3"}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("order = %v, want %v", order, want)
	}
}

func TestFloodingKeyYieldsSingleSlot(t *testing.T) {
	// One slot: when the flooder's running job ends, the waiting key goes
	// before the flooder's next queued job.
	r := New(Config{MaxConcurrent: 1, QueueLen: 3}, nil)
	defer closeRunner(t, r)
	waiting := waitHook(r)

	gate := make(chan struct{})
	first := make(chan struct{})
	var seq []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	add := func(s string) { mu.Lock(); seq = append(seq, s); mu.Unlock(); wg.Done() }

	wg.Add(1)
	must(t, r.Submit("F", func(context.Context) { close(first); <-gate; add("F") }))
	recv(t, first, "flooder's first job")
	for {
		wg.Add(1)
		if err := r.Submit("F", func(context.Context) { add("F") }); err != nil {
			wg.Done()
			if !errors.Is(err, ErrQueueFull) {
				t.Fatal(err)
			}
			break
		}
	}
	wg.Add(1)
	must(t, r.Submit("O", func(context.Context) { add("O") }))
	recv(t, waiting, "other key to wait")
	close(gate)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seq) < 2 || seq[1] != "O" {
		t.Errorf("run order = %v, want other key second", seq)
	}
}

func TestCancel(t *testing.T) {
	r := New(Config{MaxConcurrent: 2}, nil)
	defer closeRunner(t, r)

	started := make(chan struct{})
	cancelled := make(chan error, 1)
	must(t, r.Submit("k", func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		cancelled <- ctx.Err()
	}))
	var droppedRan atomic.Bool
	for range 3 {
		must(t, r.Submit("k", func(context.Context) { droppedRan.Store(true) }))
	}
	recv(t, started, "first job")
	r.Cancel("k")
	if err := recv(t, cancelled, "running job's ctx to be cancelled"); !errors.Is(err, context.Canceled) {
		t.Errorf("ctx.Err() = %v, want context.Canceled", err)
	}

	// A job submitted after Cancel runs, with a live ctx; the dropped ones
	// would have run before it had they not been dropped.
	after := make(chan error, 1)
	must(t, r.Submit("k", func(ctx context.Context) { after <- ctx.Err() }))
	if err := recv(t, after, "job after Cancel"); err != nil {
		t.Errorf("job after Cancel: ctx.Err() = %v, want nil", err)
	}
	if droppedRan.Load() {
		t.Error("queued jobs ran after Cancel")
	}
	r.Cancel("no-such-key") // no-op
}

func TestCancelWhileWaitingForSlot(t *testing.T) {
	r := New(Config{MaxConcurrent: 1}, nil)
	defer closeRunner(t, r)
	waiting := waitHook(r)

	gate := make(chan struct{})
	started := make(chan struct{})
	must(t, r.Submit("A", func(context.Context) { close(started); <-gate }))
	recv(t, started, "A")
	var ran atomic.Bool
	must(t, r.Submit("B", func(context.Context) { ran.Store(true) }))
	recv(t, waiting, "B to wait")
	r.Cancel("B")
	close(gate)

	next := make(chan struct{})
	must(t, r.Submit("B", func(context.Context) { close(next) }))
	recv(t, next, "B's next job")
	if ran.Load() {
		t.Error("cancelled waiting job ran")
	}
	if s := r.Stats(); s.Queued != 0 {
		t.Errorf("Stats().Queued = %d, want 0", s.Queued)
	}
}

func TestCloseCancelsAndWaits(t *testing.T) {
	r := New(Config{MaxConcurrent: 4}, nil)
	const n = 3
	started := make(chan struct{}, n)
	var finished atomic.Int32
	for i := range n {
		must(t, r.Submit(fmt.Sprint(i), func(ctx context.Context) {
			started <- struct{}{}
			<-ctx.Done()
			finished.Add(1)
		}))
	}
	for range n {
		recv(t, started, "jobs to start")
	}
	closeRunner(t, r)
	if got := finished.Load(); got != n {
		t.Errorf("finished = %d after Close, want %d", got, n)
	}
	if s := r.Stats(); s != (Stats{}) {
		t.Errorf("Stats after Close = %+v, want zero", s)
	}
	if err := r.Submit("x", func(context.Context) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
	closeRunner(t, r) // second Close is fine
}

func TestCloseTimesOutOnStuckJob(t *testing.T) {
	r := New(Config{}, nil)
	release := make(chan struct{})
	started := make(chan struct{})
	must(t, r.Submit("k", func(context.Context) { close(started); <-release })) // ignores ctx
	recv(t, started, "stuck job")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := r.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want DeadlineExceeded", err)
	}
	close(release)
	closeRunner(t, r)
}

func TestPanicRecovered(t *testing.T) {
	var buf bytes.Buffer
	var bufMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &bufMu}, nil))
	r := New(Config{}, logger)
	defer closeRunner(t, r)

	must(t, r.Submit("k", func(context.Context) { panic("boom") }))
	done := make(chan struct{})
	must(t, r.Submit("k", func(context.Context) { close(done) }))
	recv(t, done, "job after panic")
	bufMu.Lock()
	defer bufMu.Unlock()
	if !bytes.Contains(buf.Bytes(), []byte("job panicked")) || !bytes.Contains(buf.Bytes(), []byte("boom")) {
		t.Errorf("log = %q, want the panic logged", buf.String())
	}
	// The slot of the job after the panic is given back just after it
	// returns: wait for that, bounded.
	deadline := time.Now().Add(testTimeout)
	for r.Stats().Running != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Running = %d after panic, want 0 (slot leaked)", r.Stats().Running)
		}
		runtime.Gosched()
	}
}

func TestIdleWorkersExit(t *testing.T) {
	before := runtime.NumGoroutine()
	clk := clock.NewFake(time.Time{})
	r := New(Config{MaxConcurrent: 4, IdleTimeout: time.Minute, Clock: clk}, nil)
	defer closeRunner(t, r)

	const keys = 50
	var wg sync.WaitGroup
	wg.Add(keys)
	for k := range keys {
		must(t, r.Submit(fmt.Sprint(k), func(context.Context) { wg.Done() }))
	}
	wg.Wait()
	// Every worker waits out its idle timeout; short of it none exits.
	waitTimers(t, clk, keys)
	clk.Advance(time.Minute - time.Nanosecond)
	if s := r.Stats(); s.Keys != keys {
		t.Fatalf("before the idle timeout: Stats = %+v, want %d keys", s, keys)
	}

	// The workers exit on their own goroutines: poll until they are gone,
	// moving the clock past every idle timer (a worker woken by the wake-up
	// of its last Submit starts its timer again, later).
	deadline := time.Now().Add(testTimeout)
	for r.Stats().Keys != 0 || runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("after idle: Stats = %+v, goroutines = %d (before %d)", r.Stats(), runtime.NumGoroutine(), before)
		}
		if next, ok := clk.Next(); ok {
			clk.Set(next)
		}
		runtime.Gosched()
	}

	// A key whose worker exited gets a new one.
	done := make(chan struct{})
	must(t, r.Submit("0", func(context.Context) { close(done) }))
	recv(t, done, "job on a revived key")
}

// waitTimers waits until n timers are pending on c (workers asleep).
func waitTimers(t *testing.T, c *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if !c.WaitTimers(n, ctx.Done()) {
		t.Fatalf("%d timers pending, want %d", c.Pending(), n)
	}
}

func TestSubmitNilJob(t *testing.T) {
	r := New(Config{}, nil)
	defer closeRunner(t, r)
	if err := r.Submit("k", nil); err == nil {
		t.Error("Submit(nil) = nil, want error")
	}
}

func TestDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	want := Config{MaxConcurrent: DefaultMaxConcurrent, IdleTimeout: DefaultIdleTimeout, QueueLen: DefaultQueueLen}
	if c != want {
		t.Errorf("defaults = %+v, want %+v", c, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Jobs still queued at Close run once with a cancelled context, so their
// owner can tell the user; nothing is dropped silently.
func TestCloseRunsQueuedJobsCancelled(t *testing.T) {
	r := New(Config{MaxConcurrent: 1}, nil)
	started := make(chan struct{})
	if err := r.Submit("k", func(ctx context.Context) { close(started); <-ctx.Done() }); err != nil {
		t.Fatal(err)
	}
	<-started
	got := make(chan error, 1)
	if err := r.Submit("k", func(ctx context.Context) { got <- ctx.Err() }); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("queued job ran with a live context after Close")
		}
	default:
		t.Fatal("queued job was dropped silently")
	}
}
