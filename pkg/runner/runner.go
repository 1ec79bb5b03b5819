// Package runner runs jobs one at a time per routing key, in submission order,
// with a global cap on how many keys run at once.
//
// Each key with work has one worker goroutine; it exits after IdleTimeout with
// nothing queued, so idle conversations cost nothing. When the global cap is
// saturated, keys get slots in the order they became ready, and a key goes to
// the back of the line after every job: a user with a long backlog cannot
// starve the others. Each key's backlog is bounded (ErrQueueFull).
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"agent/pkg/clock"
)

// Job is one unit of work for a key. ctx is cancelled by Cancel and Close.
type Job func(ctx context.Context)

var (
	// ErrQueueFull means the key already has QueueLen jobs pending; the
	// caller should tell the user to wait rather than drop the message silently.
	ErrQueueFull = errors.New("runner: queue full")
	// ErrClosed means Close has been called.
	ErrClosed = errors.New("runner: closed")
)

// Defaults, sized for a 2 GB edge box: a handful of turns in flight at once.
const (
	DefaultMaxConcurrent = 4
	DefaultIdleTimeout   = 2 * time.Minute
	DefaultQueueLen      = 32
)

// Config tunes a Runner. Zero values take the defaults.
type Config struct {
	MaxConcurrent int           // jobs running at once across all keys
	IdleTimeout   time.Duration // a key's worker exits after this long idle
	QueueLen      int           // pending (not yet running) jobs per key
	// Clock times the idle timeout and the start of each job (Oldest);
	// nil: the wall clock.
	Clock clock.Clock
}

func (c Config) withDefaults() Config {
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.QueueLen <= 0 {
		c.QueueLen = DefaultQueueLen
	}
	return c
}

// Stats is a snapshot of the runner.
type Stats struct {
	Keys    int // keys with a live worker
	Running int // jobs executing now
	Queued  int // jobs accepted but not yet started
}

// Runner is a per-key serial, globally bounded job runner.
type Runner struct {
	cfg    Config
	clock  clock.Clock
	log    *slog.Logger
	sem    *fairSem
	ctx    context.Context // parent of every job's ctx; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	keys    map[string]*worker
	running int
}

type worker struct {
	key     string
	queue   []Job
	wake    chan struct{} // buffered(1): "the queue may have grown"
	waiting bool          // holds a popped job while waiting for a slot
	cancel  context.CancelFunc
	started time.Time // when the running job started; zero when none (oldest.go)
}

// New returns a Runner. A nil logger discards logs.
func New(cfg Config, logger *slog.Logger) *Runner {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner{
		cfg:    cfg,
		clock:  clock.Or(cfg.Clock),
		log:    logger.With("component", "runner"),
		sem:    newFairSem(cfg.MaxConcurrent),
		ctx:    ctx,
		cancel: cancel,
		keys:   make(map[string]*worker),
	}
}

// Submit queues job for key. Jobs of one key run one at a time in the order
// they were submitted.
func (r *Runner) Submit(key string, job Job) error {
	if job == nil {
		return errors.New("runner: submit: nil job")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	w := r.keys[key]
	if w == nil {
		w = &worker{key: key, wake: make(chan struct{}, 1)}
		r.keys[key] = w
		r.wg.Add(1)
		go r.loop(w)
	}
	pending := len(w.queue)
	if w.waiting {
		pending++
	}
	if pending >= r.cfg.QueueLen {
		return fmt.Errorf("runner: submit %q: %w", key, ErrQueueFull)
	}
	w.queue = append(w.queue, job)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return nil
}

// Cancel cancels key's current job (running or waiting for a slot) and drops
// its queued jobs. Jobs submitted afterwards run normally.
func (r *Runner) Cancel(key string) {
	r.mu.Lock()
	w := r.keys[key]
	if w == nil {
		r.mu.Unlock()
		return
	}
	dropped := len(w.queue)
	clear(w.queue)
	w.queue = nil
	if w.cancel != nil {
		w.cancel()
	}
	r.mu.Unlock()
	r.log.Debug("cancelled", "key", key, "dropped", dropped)
}

// Close stops accepting jobs, cancels running jobs and waits for every
// worker to exit or for ctx to end. Jobs still queued are not dropped
// silently: each runs once, in this goroutine, with an already cancelled
// context, so its owner can tell the user the message went unanswered.
func (r *Runner) Close(ctx context.Context) error {
	type pending struct {
		key string
		job Job
	}
	var queued []pending
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		for _, w := range r.keys {
			for _, j := range w.queue {
				queued = append(queued, pending{w.key, j})
			}
			clear(w.queue)
			w.queue = nil
		}
		if len(queued) > 0 {
			r.log.Warn("closing: queued jobs run cancelled", "jobs", len(queued))
		}
	}
	r.mu.Unlock()
	r.cancel()
	for _, p := range queued {
		r.run(p.key, r.ctx, p.job) // r.ctx is cancelled now
	}

	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("runner: close: waiting for jobs: %w", ctx.Err())
	}
}

// Stats returns a snapshot.
func (r *Runner) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{Keys: len(r.keys), Running: r.running}
	for _, w := range r.keys {
		s.Queued += len(w.queue)
		if w.waiting {
			s.Queued++
		}
	}
	return s
}

// loop is a key's worker: it runs queued jobs in order, taking a global slot
// for each, and exits after IdleTimeout with nothing queued or on Close.
func (r *Runner) loop(w *worker) {
	defer r.wg.Done()
	idleExpired := false
	for {
		r.mu.Lock()
		if len(w.queue) == 0 {
			if r.closed || idleExpired {
				delete(r.keys, w.key)
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
			t := r.clock.NewTimer(r.cfg.IdleTimeout)
			select {
			case <-w.wake:
			case <-t.C():
				idleExpired = true
			case <-r.ctx.Done():
			}
			t.Stop()
			continue
		}
		idleExpired = false
		job := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		ctx, cancel := context.WithCancel(r.ctx)
		w.cancel = cancel
		w.waiting = true
		r.mu.Unlock()

		err := r.sem.acquire(ctx)

		r.mu.Lock()
		w.waiting = false
		if err != nil { // cancelled or closed before it started
			w.cancel = nil
			r.mu.Unlock()
			cancel()
			continue
		}
		r.running++
		w.started = r.clock.Now()
		r.mu.Unlock()

		r.run(w.key, ctx, job)

		r.mu.Lock()
		r.running--
		w.started = time.Time{}
		w.cancel = nil
		r.mu.Unlock()
		cancel()
		r.sem.release() // after running--, so Stats never shows more than the cap
	}
}

func (r *Runner) run(key string, ctx context.Context, job Job) {
	defer func() {
		if v := recover(); v != nil {
			r.log.Error("job panicked", "key", key, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		}
	}()
	job(ctx)
}
