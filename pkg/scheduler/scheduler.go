// Package scheduler runs jobs on time: recurring jobs on a cron expression
// (5 fields, per-job IANA time zone) and one-shot jobs at an ISO 8601 time,
// kept in the database so they survive restarts.
//
// robfig/cron/v3 only parses expressions and computes next fire times; the
// loop is ours and reads an injected clock.Clock, so tests drive time by
// hand (clock.Fake).
//
// Guarantees:
//   - A slot (job, scheduled time) runs at most once, also across a crash:
//     it is claimed in sched_runs (primary key job_id, slot) in the same
//     transaction that moves the job to its next slot, before the action
//     starts. A crash mid-run leaves the claim; the slot is not repeated.
//   - After downtime a one-shot whose time passed runs once if it is at most
//     Grace late, else it is marked missed and its owner told. A recurring
//     job resumes at its next future slot; missed slots are not replayed.
//   - A failing action backs off exponentially (1 min doubling to 1 h) and
//     records its last error and failure count; a one-shot gives up after
//     MaxAttempts and tells its owner.
//   - Wall-clock jumps: forward, slots more than Grace late are skipped
//     (one-shots marked missed); backward, recurring jobs are re-planned from
//     the new time, and a slot that already ran is not run again.
package scheduler

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"agent/pkg/clock"
)

// Job states.
const (
	StateActive  = "active"  // waiting for its next slot
	StateRunning = "running" // a one-shot whose action is in flight
	StateDone    = "done"    // a one-shot that ran
	StateMissed  = "missed"  // a one-shot whose time passed beyond the grace period
	StateFailed  = "failed"  // a one-shot that failed MaxAttempts times
)

// Defaults for Config.
const (
	DefaultGrace         = 10 * time.Minute
	DefaultMaxPerOwner   = 100
	DefaultMaxAttempts   = 5
	DefaultMaxConcurrent = 64
	DefaultRunTimeout    = 5 * time.Minute
	backoffMin           = time.Minute
	backoffMax           = time.Hour
	maxWait              = time.Minute // the loop re-reads the clock at least this often
	claimBatch           = 2000
	keepFinished         = 7 * 24 * time.Hour  // finished one-shots stay listed this long
	keepRuns             = 30 * 24 * time.Hour // run records
	maxPayload           = 4000
)

// Job is one stored job.
type Job struct {
	ID         int64     `json:"id"`
	Owner      string    `json:"owner"`   // user scope, e.g. "wecom:alice"
	Channel    string    `json:"channel"` // where the result goes
	To         string    `json:"to"`      // recipient on Channel
	Name       string    `json:"name,omitempty"`
	Kind       string    `json:"kind"` // cron | at
	Spec       string    `json:"spec"` // cron expression, or RFC 3339 time
	TZ         string    `json:"tz"`
	Action     string    `json:"action"`  // message | llm_task
	Payload    string    `json:"payload"` // the text, or the prompt
	State      string    `json:"state"`
	Created    time.Time `json:"created"`
	Next       time.Time `json:"next,omitzero"` // next attempt; zero when none
	LastRun    time.Time `json:"last_run,omitzero"`
	LastStatus string    `json:"last_status,omitempty"` // ok | deferred | failed | missed | interrupted | skipped
	LastError  string    `json:"last_error,omitempty"`
	Failures   int       `json:"failures"` // consecutive
	Runs       int       `json:"runs"`
}

// NewJob describes a job to add: exactly one of Cron and At; Action
// defaults to message.
type NewJob struct {
	Owner   string
	Channel string
	To      string
	Name    string
	Cron    string
	At      string
	TZ      string
	Action  string
	Payload string
}

// SendFunc delivers text to a recipient on a channel.
type SendFunc func(ctx context.Context, channel, to, text string) error

// PromptFunc runs a task's prompt through the agent as its owner (a user
// scope) and returns the answer. An error wrapping ErrDeferred means the
// task was kept to run when the model service is back (pkg/backlog),
// which then delivers its answer: the run is recorded "deferred", not
// failed, and nothing is sent now.
type PromptFunc func(ctx context.Context, t Task) (string, error)

// Task is an llm_task slot being run.
type Task struct {
	Job     int64
	Owner   string // the user scope it runs as
	Prompt  string
	Channel string // where its answer goes
	To      string
	Due     time.Time // the slot
}

// ErrDeferred is wrapped by a PromptFunc that kept the task for later.
var ErrDeferred = errors.New("deferred until the model service is back")

// Config of a Scheduler.
type Config struct {
	DB       *sql.DB
	Clock    clock.Clock    // default clock.Real()
	Location *time.Location // default zone of new jobs; default UTC
	Send     SendFunc
	Prompt   PromptFunc // nil: llm_task jobs fail with a clear error
	// Check says whether owner (a user scope, "wecom:alice") may address
	// to on channel (recipient.Policy); nil allows every recipient. It is
	// asked when a job is added, before each action, and by Enforce.
	Check func(owner, channel, to string) error
	// Scrub removes secrets from an action's error before it is stored
	// (last_error, sched_runs.error) or sent to the owner
	// (logging.Scrubber.Scrub); nil: logging.ScrubPatterns.
	Scrub  func(string) string
	Logger *slog.Logger

	Grace         time.Duration // default DefaultGrace
	MaxPerOwner   int           // active jobs per owner; default DefaultMaxPerOwner
	MaxAttempts   int           // tries of a one-shot; default DefaultMaxAttempts
	MaxConcurrent int           // actions in flight; default DefaultMaxConcurrent
	RunTimeout    time.Duration // per action; default DefaultRunTimeout
}

// Scheduler stores and runs jobs. Safe for concurrent use.
type Scheduler struct {
	c      Config
	db     *sql.DB
	clock  clock.Clock
	logger *slog.Logger

	wake     chan struct{}
	results  chan result
	sem      chan struct{}
	inflight sync.WaitGroup // runs and notices not yet recorded

	mu        sync.Mutex
	running   map[int64]bool // jobs whose action is in flight
	lastNow   int64          // wall clock of the previous poll (ms), to see jumps
	lastPrune time.Time

	runCtx  context.Context
	cancel  context.CancelFunc
	started bool
	loopWG  sync.WaitGroup
	quit    chan struct{}
}

// New returns a Scheduler; Start begins running jobs.
func New(c Config) (*Scheduler, error) {
	if c.DB == nil {
		return nil, errors.New("scheduler: no database")
	}
	if c.Send == nil {
		return nil, errors.New("scheduler: no send function")
	}
	c.Clock = clock.Or(c.Clock)
	if c.Location == nil {
		c.Location = time.UTC
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.MaxPerOwner <= 0 {
		c.MaxPerOwner = DefaultMaxPerOwner
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.RunTimeout <= 0 {
		c.RunTimeout = DefaultRunTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{
		c: c, db: c.DB, clock: c.Clock, logger: c.Logger.With("component", "scheduler"),
		wake:    make(chan struct{}, 1),
		results: make(chan result, 256),
		sem:     make(chan struct{}, c.MaxConcurrent),
		running: map[int64]bool{},
		runCtx:  ctx, cancel: cancel,
		quit: make(chan struct{}),
	}, nil
}

// Location is the default zone of new jobs.
func (s *Scheduler) Location() *time.Location { return s.c.Location }

// Start restores the stored jobs (see the package comment for downtime)
// and starts the loop.
func (s *Scheduler) Start(ctx context.Context) error {
	if err := s.recover(ctx, s.clock.Now()); err != nil {
		return err
	}
	if _, err := s.Enforce(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	s.loopWG.Add(2)
	go func() { defer s.loopWG.Done(); s.writer() }()
	go func() { defer s.loopWG.Done(); s.loop(s.runCtx) }()
	return nil
}

// Close stops the loop and waits, at most until ctx ends, for actions in
// flight to be recorded.
func (s *Scheduler) Close(ctx context.Context) error {
	s.cancel()
	s.mu.Lock()
	started := s.started
	s.started = false
	s.mu.Unlock()
	if !started {
		return nil
	}
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("scheduler: actions still running at shutdown: %w", ctx.Err())
	}
	close(s.quit)
	s.loopWG.Wait()
	return err
}

func (s *Scheduler) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// loop polls for due jobs and sleeps until the next one (at most maxWait,
// so wall-clock jumps are noticed).
func (s *Scheduler) loop(ctx context.Context) {
	for {
		next := s.poll(ctx)
		if ctx.Err() != nil {
			return
		}
		now := s.clock.Now()
		wait := maxWait
		if !next.IsZero() {
			if d := time.Duration(next.UnixMilli()-now.UnixMilli()) * time.Millisecond; d < wait {
				wait = d
			}
		}
		if wait <= 0 {
			continue
		}
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-s.wake:
			t.Stop()
		}
	}
}

// poll claims and starts every due job and returns when the next one is
// due (zero: nothing scheduled).
func (s *Scheduler) poll(ctx context.Context) time.Time {
	now := s.clock.Now()
	s.mu.Lock()
	jumpedBack := s.lastNow != 0 && now.UnixMilli() < s.lastNow-1000
	s.lastNow = now.UnixMilli()
	prune := now.Sub(s.lastPrune) > time.Hour || now.Before(s.lastPrune)
	if prune {
		s.lastPrune = now
	}
	s.mu.Unlock()
	if jumpedBack {
		s.logger.Warn("wall clock went backwards; re-planning recurring jobs", "now", now)
		if err := s.replan(ctx, now, false); err != nil {
			s.logger.Error("re-plan after clock jump", "err", err)
		}
	}
	if prune {
		s.prune(ctx, now)
	}
	fires, notices, more, err := s.claim(ctx, now)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Error("claim due jobs", "err", err)
		}
		return now.Add(5 * time.Second)
	}
	for _, f := range fires {
		s.fire(f)
	}
	for _, n := range notices {
		s.notify(n.job, n.text)
	}
	if more {
		return now
	}
	next, err := s.nextDue(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Error("read next due job", "err", err)
		}
		return now.Add(5 * time.Second)
	}
	return next
}

type fire struct {
	job     Job
	slot    int64
	attempt int
}

type notice struct {
	job  Job
	text string
}

type result struct {
	job     Job
	slot    int64
	attempt int
	at      time.Time
	err     error
}

// fire runs one claimed slot's action in the background.
func (s *Scheduler) fire(f fire) {
	s.mu.Lock()
	s.running[f.job.ID] = true
	s.mu.Unlock()
	s.inflight.Add(1)
	go func() {
		select {
		case s.sem <- struct{}{}:
		case <-s.runCtx.Done():
		}
		err := s.runCtx.Err()
		if err == nil {
			err = s.act(f.job, f.slot)
			<-s.sem
		} else {
			err = fmt.Errorf("not run: the scheduler stopped: %w", err)
		}
		select {
		case s.results <- result{job: f.job, slot: f.slot, attempt: f.attempt, at: s.clock.Now(), err: err}:
		case <-s.quit:
			s.inflight.Done()
		}
	}()
}

// act performs a job's action.
func (s *Scheduler) act(j Job, slot int64) (err error) {
	ctx, cancel := context.WithTimeout(s.runCtx, s.c.RunTimeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("action panicked: %v", v)
		}
	}()
	if err := s.checkRecipient(j.Owner, j.Channel, j.To); err != nil {
		return err
	}
	text := j.Payload
	if j.Action == ActionLLMTask {
		if s.c.Prompt == nil {
			return errors.New("llm_task: the conversation pipeline is not available")
		}
		text, err = s.c.Prompt(ctx, Task{Job: j.ID, Owner: j.Owner, Prompt: j.Payload, Channel: j.Channel, To: j.To, Due: time.UnixMilli(slot)})
		if errors.Is(err, ErrDeferred) {
			s.logger.Info("llm_task deferred until the model service is back", "job", j.ID)
			return err
		}
		if err != nil {
			return fmt.Errorf("llm_task: %w", err)
		}
		if strings.TrimSpace(text) == "" {
			return errors.New("llm_task: the assistant gave no answer")
		}
	}
	if err := s.c.Send(ctx, j.Channel, j.To, text); err != nil {
		return fmt.Errorf("send to %s on %s: %w", j.To, j.Channel, err)
	}
	return nil
}

// notify tells a job's owner something (a missed or abandoned one-shot).
func (s *Scheduler) notify(j Job, text string) {
	channel, user, ok := strings.Cut(j.Owner, ":")
	if !ok {
		s.logger.Warn("job owner has no channel; notice not sent", "job", j.ID, "owner", j.Owner, "notice", text)
		return
	}
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.runCtx), 30*time.Second)
		defer cancel()
		if err := s.c.Send(ctx, channel, user, text); err != nil {
			s.logger.Warn("job notice not delivered", "job", j.ID, "owner", j.Owner, "err", err, "notice", text)
		}
	}()
}

// writer records finished actions in batches, so a minute with a thousand
// due jobs is a handful of transactions.
func (s *Scheduler) writer() {
	for {
		var batch []result
		select {
		case r := <-s.results:
			batch = append(batch, r)
		case <-s.quit:
			return
		}
	drain:
		for len(batch) < 256 {
			select {
			case r := <-s.results:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		notices, err := s.finish(context.Background(), batch)
		if err != nil {
			s.logger.Error("record job results", "err", err, "jobs", len(batch))
		}
		s.mu.Lock()
		for _, r := range batch {
			delete(s.running, r.job.ID)
		}
		s.mu.Unlock()
		for _, n := range notices {
			s.notify(n.job, n.text)
		}
		for _, r := range batch {
			if r.err != nil {
				s.logger.Warn("job failed", "job", r.job.ID, "owner", r.job.Owner, "attempt", r.attempt, "err", r.err)
			} else {
				s.logger.Info("job ran", "job", r.job.ID, "owner", r.job.Owner, "action", r.job.Action)
			}
			s.inflight.Done()
		}
		s.kick() // a retry may be due sooner than the loop thinks
	}
}

// backoff is the wait after the n-th consecutive failure.
func backoff(n int) time.Duration {
	d := backoffMin
	for i := 1; i < n && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// Describe is one line about a job for people and the model.
func (j Job) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d ", j.ID)
	if j.Name != "" {
		fmt.Fprintf(&b, "%q ", j.Name)
	}
	loc, err := time.LoadLocation(j.TZ)
	if err != nil {
		loc = time.UTC
	}
	if j.Kind == KindCron {
		fmt.Fprintf(&b, "cron %q (%s)", j.Spec, j.TZ)
	} else if t, err := time.Parse(time.RFC3339, j.Spec); err == nil {
		fmt.Fprintf(&b, "once at %s", t.In(loc).Format("2006-01-02 15:04 MST"))
	}
	fmt.Fprintf(&b, ", %s", j.State)
	if !j.Next.IsZero() {
		fmt.Fprintf(&b, ", next %s", j.Next.In(loc).Format("2006-01-02 15:04 MST"))
	}
	what := j.Payload
	if len([]rune(what)) > 80 {
		what = string([]rune(what)[:80]) + "…"
	}
	if j.Action == ActionLLMTask {
		fmt.Fprintf(&b, "; runs prompt %q", what)
	} else {
		fmt.Fprintf(&b, "; sends %q", what)
	}
	fmt.Fprintf(&b, " to %s:%s; owner %s", j.Channel, j.To, j.Owner)
	if j.LastStatus != "" {
		fmt.Fprintf(&b, "; last %s", j.LastStatus)
		if !j.LastRun.IsZero() {
			fmt.Fprintf(&b, " at %s", j.LastRun.In(loc).Format("2006-01-02 15:04"))
		}
	}
	if j.Failures > 0 {
		fmt.Fprintf(&b, "; %d failure(s) in a row, last error: %s", j.Failures, j.LastError)
	}
	return b.String()
}
