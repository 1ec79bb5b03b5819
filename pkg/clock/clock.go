// Package clock is the one source of time for everything whose behaviour
// depends on it (timers, debounce, retries, schedules, timeouts that decide
// an outcome). Production code takes a Clock and gets Real(); tests pass a
// *Fake and move it by hand, so no test sleeps to let wall time pass.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
	// After fires once d has passed (a timer nobody stops).
	After(d time.Duration) <-chan time.Time
}

// Timer is the part of *time.Timer callers use.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// Real is the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer         { return realTimer{time.NewTimer(d)} }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// Or returns c, or Real() when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real()
	}
	return c
}

// Func adapts a now function (the daemon's injected Now) to a Clock whose
// timers are real: time moves as now says, waits take wall time.
func Func(now func() time.Time) Clock {
	if now == nil {
		return Real()
	}
	return funcClock{now}
}

type funcClock struct{ now func() time.Time }

func (c funcClock) Now() time.Time                       { return c.now() }
func (funcClock) NewTimer(d time.Duration) Timer         { return realTimer{time.NewTimer(d)} }
func (funcClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Fake is a clock a test moves by hand: Now changes only on Set or Advance,
// and timers fire when the clock passes their deadline. Safe for
// concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	waiters []chan struct{} // woken whenever a timer is added
}

// NewFake returns a fake clock reading t (a fixed instant when t is zero).
func NewFake(t time.Time) *Fake {
	if t.IsZero() {
		t = time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	}
	return &Fake{now: t}
}

type fakeTimer struct {
	c       *Fake
	at      time.Time
	ch      chan time.Time
	stopped bool
	fired   bool
}

// Now reads the clock.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer makes a timer that fires when the clock reaches now+d (at once
// when d <= 0).
func (c *Fake) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.fired = true
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	for _, w := range c.waiters {
		close(w)
	}
	c.waiters = nil
	return t
}

// After is NewTimer(d).C().
func (c *Fake) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.fired || t.stopped {
		return false
	}
	t.stopped = true
	return true
}

// Set moves the clock to t (backwards too) and fires every timer due.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	keep := c.timers[:0]
	for _, tm := range c.timers {
		switch {
		case tm.stopped:
		case !tm.at.After(c.now):
			tm.fired = true
			tm.ch <- c.now
		default:
			keep = append(keep, tm)
		}
	}
	clear(c.timers[len(keep):])
	c.timers = keep
}

// Advance moves the clock forward by d.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	now := c.now.Add(d)
	c.mu.Unlock()
	c.Set(now)
}

// Pending is the number of timers not yet fired or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

// WaitTimers blocks until at least n timers are pending or done is
// closed (a test's deadline); it reports whether they are.
func (c *Fake) WaitTimers(n int, done <-chan struct{}) bool {
	for {
		c.mu.Lock()
		pending := 0
		for _, t := range c.timers {
			if !t.stopped {
				pending++
			}
		}
		if pending >= n {
			c.mu.Unlock()
			return true
		}
		w := make(chan struct{})
		c.waiters = append(c.waiters, w)
		c.mu.Unlock()
		select {
		case <-w:
		case <-done:
			return false
		}
	}
}

// Next is the deadline of the earliest timer not yet fired or stopped, and
// whether there is one. A test that drives a loop step by step moves the
// clock to it: c.Advance(next.Sub(c.Now())).
func (c *Fake) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	found := false
	for _, t := range c.timers {
		if !t.stopped && (!found || t.at.Before(next)) {
			next, found = t.at, true
		}
	}
	return next, found
}

// Sleep waits d on c, or until ctx ends (then it returns ctx.Err()).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := Or(c).NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WithTimeout is context.WithTimeout on c. With Real and Func it is
// context.WithTimeout itself (timers are real). On a Fake the context ends
// with context.DeadlineExceeded when the clock is moved past now+d; its
// Deadline is the parent's (a fake instant must not reach deadlines that
// the network stack compares with the wall clock).
func WithTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	f, ok := c.(*Fake)
	if !ok {
		return context.WithTimeout(parent, d)
	}
	ctx := &fakeTimeout{Context: parent, done: make(chan struct{}), stop: make(chan struct{})}
	t := f.NewTimer(d)
	go func() {
		var err error
		select {
		case <-parent.Done():
			err = parent.Err()
		case <-t.C():
			err = context.DeadlineExceeded
		case <-ctx.stop:
			t.Stop()
			err = context.Canceled
		}
		t.Stop()
		ctx.end(err)
	}()
	return ctx, func() { ctx.once.Do(func() { close(ctx.stop) }) }
}

// fakeTimeout is the context WithTimeout returns on a Fake.
type fakeTimeout struct {
	context.Context
	done chan struct{}
	stop chan struct{}
	once sync.Once
	mu   sync.Mutex
	err  error
}

func (c *fakeTimeout) end(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

func (c *fakeTimeout) Done() <-chan struct{} { return c.done }

func (c *fakeTimeout) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
