// Package health runs the daemon's health checks. /healthz, the systemd
// watchdog and agentctl status all read the same report, so "healthy" means
// one thing everywhere.
package health

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrDegraded marks a check whose failure is reported but does not make the
// daemon unhealthy (an optional model is missing, the LLM is unreachable).
var ErrDegraded = errors.New("degraded")

// Check returns nil when healthy. Wrap ErrDegraded for a non-fatal problem.
type Check func(ctx context.Context) error

// Status of one check.
type Status string

const (
	OK       Status = "ok"
	Degraded Status = "degraded"
	Failing  Status = "failing"
)

// Result is one check's outcome.
type Result struct {
	Name     string        `json:"name"`
	Status   Status        `json:"status"`
	Detail   string        `json:"detail,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Report is every check's outcome. Healthy is false when any check fails;
// Alive is false only when a liveness check fails.
type Report struct {
	Healthy bool      `json:"healthy"`
	Alive   bool      `json:"alive"`
	Checks  []Result  `json:"checks"`
	At      time.Time `json:"at"`
}

// Checker holds named checks. Safe for concurrent use.
type Checker struct {
	mu       sync.RWMutex
	checks   map[string]Check
	liveness map[string]bool
	timeout  time.Duration
	now      func() time.Time
}

// New returns a Checker whose checks each get at most timeout.
func New(timeout time.Duration, now func() time.Time) *Checker {
	if now == nil {
		now = time.Now
	}
	return &Checker{checks: map[string]Check{}, liveness: map[string]bool{}, timeout: timeout, now: now}
}

// Register adds or replaces a readiness check: its failure makes the
// report unhealthy (/healthz answers 503) but a restart would not fix it
// (a full disk, a corrupt database page).
func (c *Checker) Register(name string, check Check) {
	c.mu.Lock()
	c.checks[name] = check
	delete(c.liveness, name)
	c.mu.Unlock()
}

// RegisterLiveness adds or replaces a liveness check: its failure means the
// process is wedged, so the watchdog stops and systemd restarts it.
func (c *Checker) RegisterLiveness(name string, check Check) {
	c.mu.Lock()
	c.checks[name] = check
	c.liveness[name] = true
	c.mu.Unlock()
}

// Run executes all checks concurrently, each bounded by the timeout.
func (c *Checker) Run(ctx context.Context) Report {
	c.mu.RLock()
	names := make([]string, 0, len(c.checks))
	for n := range c.checks {
		names = append(names, n)
	}
	checks := make([]Check, len(names))
	live := make([]bool, len(names))
	sort.Strings(names)
	for i, n := range names {
		checks[i] = c.checks[n]
		live[i] = c.liveness[n]
	}
	c.mu.RUnlock()

	results := make([]Result, len(names))
	var wg sync.WaitGroup
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.runOne(ctx, names[i], checks[i])
		}()
	}
	wg.Wait()
	rep := Report{Healthy: true, Alive: true, Checks: results, At: c.now()}
	for i, r := range results {
		if r.Status == Failing {
			rep.Healthy = false
			if live[i] {
				rep.Alive = false
			}
		}
	}
	return rep
}

func (c *Checker) runOne(ctx context.Context, name string, check Check) Result {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := c.now()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- errors.New("check panicked")
			}
		}()
		done <- check(ctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = errors.New("timed out")
	}
	r := Result{Name: name, Status: OK, Duration: c.now().Sub(start)}
	switch {
	case err == nil:
	case errors.Is(err, ErrDegraded):
		r.Status, r.Detail = Degraded, strings.TrimPrefix(err.Error(), ErrDegraded.Error()+": ")
	default:
		r.Status, r.Detail = Failing, err.Error()
	}
	return r
}
