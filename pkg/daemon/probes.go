package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"agent/pkg/agent"
	"agent/pkg/errlog"
)

// The watchdog's liveness probes (database writable, event loop
// responsive, runner not wedged; the HTTP probe is in daemon.go) and the
// error log in the database (pkg/errlog) that the self-check reads.

// wedgeGrace is how far past the longest a turn may take (turn timeout
// plus the closing summary's grace) a runner job may run before the
// runner counts as wedged.
const wedgeGrace = 2 * time.Minute

// wedgedAfter is the age of a running job that withholds the watchdog.
const wedgedAfter = agent.DefaultTurnTimeout + agent.DefaultFinalGrace + wedgeGrace

// probes is the state of the liveness probes.
type probes struct {
	errlog *errlog.Recorder

	hbMu   sync.Mutex
	lastHB time.Time // last successful heartbeat write
}

// startErrorLog keeps warnings and errors in error_log from here on: the
// daemon's logger is wrapped (records still reach the journal first).
// The returned function flushes and stops the writer.
func (d *Daemon) startErrorLog() func() {
	scrub := func(s string) string { return s }
	if d.opts.Scrubber != nil {
		scrub = d.opts.Scrubber.Scrub
	}
	p := &probes{errlog: errlog.New(d.store.DB(), errlog.Options{Now: d.now, Scrub: scrub})}
	d.probes = p
	d.logger = slog.New(p.errlog.Handler(d.logger.Handler()))
	d.metrics.GaugeFunc("agent_error_log_dropped", "Warnings and errors not kept in the database error log (rate limit, full queue) since start.", nil,
		func() float64 { return float64(p.errlog.Dropped()) })
	d.metrics.GaugeFunc("agent_error_log_queued", "Warnings and errors waiting to be written to the error log.", nil,
		func() float64 { return float64(p.errlog.Queued()) })
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		p.errlog.Close(ctx)
	}
}

// checkDatabaseWritable is the database liveness probe: a real write (the
// heartbeat row in meta), at most every few seconds however often health
// is asked.
func (d *Daemon) checkDatabaseWritable(ctx context.Context) error {
	now := d.now()
	if p := d.probes; p != nil {
		p.hbMu.Lock()
		fresh := !p.lastHB.IsZero() && now.Sub(p.lastHB) >= 0 && now.Sub(p.lastHB) < 5*time.Second
		p.hbMu.Unlock()
		if fresh {
			return nil
		}
	}
	_, err := d.store.DB().ExecContext(ctx, `INSERT INTO meta(key, value) VALUES ('heartbeat', ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, now.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("database is not writable: %w", err)
	}
	if p := d.probes; p != nil {
		p.hbMu.Lock()
		p.lastHB = now
		p.hbMu.Unlock()
	}
	return nil
}

// checkEventLoop proves the main loop (signals, reloads, listener
// failures) still turns: it must take a ping.
func (d *Daemon) checkEventLoop(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case d.loopPing <- ack:
	case <-ctx.Done():
		return errors.New("the main event loop does not respond")
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return errors.New("the main event loop does not respond")
	}
}

// checkRunner fails while a conversation turn has run far longer than a
// turn may (the runner is wedged).
func (d *Daemon) checkRunner(context.Context) error {
	if d.asst == nil || d.asst.Runner() == nil {
		return nil
	}
	return runnerWedged(d.asst.Runner(), d.now(), wedgedAfter)
}

// oldestRunner is the part of *runner.Runner the probe reads.
type oldestRunner interface {
	Oldest(now time.Time) (time.Duration, string)
}

func runnerWedged(r oldestRunner, now time.Time, limit time.Duration) error {
	if age, key := r.Oldest(now); age > limit {
		return fmt.Errorf("runner wedged: the turn of %s has run for %s (limit %s)", key, age.Round(time.Second), limit)
	}
	return nil
}
