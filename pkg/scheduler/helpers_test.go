package scheduler

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/store"
)

// fakeClock is a Clock the test moves by hand. Timers fire when Advance or
// Set passes their deadline; BlockUntil waits for the loop to be asleep.
type fakeClock struct {
	mu     sync.Mutex
	cond   *sync.Cond
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c  *fakeClock
	at time.Time
	ch chan time.Time
}

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{now: t}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	c.cond.Broadcast()
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Set moves the clock to t (forwards or backwards) and fires due timers.
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	keep := c.timers[:0]
	for _, x := range c.timers {
		if !x.at.After(t) {
			x.ch <- t
		} else {
			keep = append(keep, x)
		}
	}
	c.timers = keep
}

func (c *fakeClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// BlockUntil waits until n timers are pending (the loop is asleep).
func (c *fakeClock) BlockUntil(t *testing.T, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		c.mu.Lock()
		for len(c.timers) < n {
			c.cond.Wait()
		}
		c.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("loop did not go to sleep (want %d timers)", n)
	}
}

type sent struct {
	Channel, To, Text string
	At                time.Time
}

// outbox records sends; fail makes them fail.
type outbox struct {
	mu    sync.Mutex
	clock Clock
	msgs  []sent
	fail  error
	ch    chan sent
}

func newOutbox(c Clock) *outbox { return &outbox{clock: c, ch: make(chan sent, 1000)} }

func (o *outbox) send(_ context.Context, channel, to, text string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := sent{channel, to, text, o.clock.Now()}
	if o.fail != nil && !strings.HasPrefix(text, "Scheduled job #") { // notices still arrive
		return o.fail
	}
	o.msgs = append(o.msgs, m)
	o.ch <- m
	return nil
}

func (o *outbox) setFail(err error) {
	o.mu.Lock()
	o.fail = err
	o.mu.Unlock()
}

func (o *outbox) all() []sent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]sent(nil), o.msgs...)
}

func (o *outbox) wait(t *testing.T) sent {
	t.Helper()
	select {
	case m := <-o.ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message sent")
		return sent{}
	}
}

var errBoom = errors.New("boom")

func openDB(t *testing.T) (*store.Store, string) { return openDBB(t) }

func openDBB(t testing.TB) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.db")
	st, err := store.Open(context.Background(), path, nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, path
}

var shanghai = mustZone("Asia/Shanghai")

func mustZone(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

// harness is a scheduler on a fake clock whose loop the test drives with
// step (no background loop): step polls once and waits for every action
// started to be recorded.
type harness struct {
	t     *testing.T
	st    *store.Store
	clock *fakeClock
	out   *outbox
	s     *Scheduler
	cfg   Config
}

func newHarness(t *testing.T, now time.Time, mod func(*Config)) *harness {
	t.Helper()
	st, _ := openDB(t)
	h := &harness{t: t, st: st, clock: newFakeClock(now)}
	h.out = newOutbox(h.clock)
	h.cfg = Config{DB: st.DB(), Clock: h.clock, Location: shanghai, Send: h.out.send}
	if mod != nil {
		mod(&h.cfg)
	}
	h.restart()
	return h
}

// restart replaces the scheduler with a fresh one on the same database,
// as after a daemon restart, and runs its start-up recovery.
func (h *harness) restart() {
	h.t.Helper()
	if h.s != nil {
		h.s.Close(context.Background())
	}
	s, err := New(h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := s.recover(context.Background(), h.clock.Now()); err != nil {
		h.t.Fatal(err)
	}
	s.started = true
	s.loopWG.Add(1)
	go func() { defer s.loopWG.Done(); s.writer() }()
	h.s = s
	h.t.Cleanup(func() { s.Close(context.Background()) })
}

func (h *harness) step() time.Time {
	h.t.Helper()
	next := h.s.poll(context.Background())
	h.s.inflight.Wait()
	return next
}

func (h *harness) add(n NewJob) Job {
	h.t.Helper()
	if n.Owner == "" {
		n.Owner = "wecom:alice"
	}
	if n.Channel == "" {
		n.Channel = "wecom"
	}
	if n.To == "" {
		n.To = "alice"
	}
	j, err := h.s.Add(context.Background(), n)
	if err != nil {
		h.t.Fatalf("Add(%+v): %v", n, err)
	}
	return j
}

func (h *harness) job(id int64) Job {
	h.t.Helper()
	j, err := h.s.Get(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}
