package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/nativetest"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
)

// newFakeClock returns a clock.Fake reading t.
func newFakeClock(t time.Time) *clock.Fake { return clock.NewFake(t) }

// blockUntil waits until n timers are pending on c (the loop is asleep).
func blockUntil(t *testing.T, c *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !c.WaitTimers(n, ctx.Done()) {
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
	clock clock.Clock
	msgs  []sent
	fail  error
	ch    chan sent
}

func newOutbox(c clock.Clock) *outbox { return &outbox{clock: c, ch: make(chan sent, 1000)} }

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
	st := storetest.Open(t)
	return st, st.Path()
}

// shanghai is the zone of most tests; a test using it goes through
// newHarness or needZones, which stop it when tzdata is missing.
var shanghai = zoneOrUTC("Asia/Shanghai")

func zoneOrUTC(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		return time.UTC // needZones skips (or fails) the test
	}
	return l
}

// needZones stops the test unless the time-zone database is installed
// (nativetest: a skip, or a failure under AGENT_REQUIRE_NATIVE=1).
func needZones(t testing.TB) { nativetest.TZData(t) }

// harness is a scheduler on a fake clock whose loop the test drives with
// step (no background loop): step polls once and waits for every action
// started to be recorded.
type harness struct {
	t     *testing.T
	st    *store.Store
	clock *clock.Fake
	out   *outbox
	s     *Scheduler
	cfg   Config
}

func newHarness(t *testing.T, now time.Time, mod func(*Config)) *harness {
	t.Helper()
	needZones(t)
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
