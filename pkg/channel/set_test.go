package channel

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/turn"
)

// testChannel is a channel whose Run does what the test says.
type testChannel struct {
	name  string
	runs  atomic.Int32
	run   func(ctx context.Context, n int32) error
	sent  chan string
	route string
}

func (c *testChannel) Name() string { return c.name }
func (c *testChannel) Routes() []Route {
	if c.route == "" {
		return nil
	}
	return []Route{{Pattern: c.route, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(c.name))
	})}}
}
func (c *testChannel) Run(ctx context.Context) error {
	n := c.runs.Add(1)
	if c.run == nil {
		<-ctx.Done()
		return nil
	}
	return c.run(ctx, n)
}
func (c *testChannel) Send(_ context.Context, to, text string) error {
	c.sent <- to + ": " + text
	return nil
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A channel whose Run fails or panics is restarted with backoff, reported
// degraded, and neither stops the other channel nor the caller.
func TestFailingAndPanickingChannelsAreRestarted(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	failing := &testChannel{name: "failing", run: func(ctx context.Context, n int32) error {
		if n <= 2 {
			return errors.New("dial: connection refused")
		}
		<-ctx.Done()
		return nil
	}}
	panicking := &testChannel{name: "panicking", run: func(ctx context.Context, n int32) error {
		if n == 1 {
			panic("a bug in the channel")
		}
		<-ctx.Done()
		return nil
	}}
	healthy := &testChannel{name: "healthy", sent: make(chan string, 1)}
	s, err := NewSet(nil, clk, failing, panicking, healthy)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.Start(ctx)

	// Both broken channels wait on a backoff timer; the healthy one runs.
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	if !clk.WaitTimers(2, done) {
		t.Fatal("no backoff timers")
	}
	if err := s.Check("failing")(ctx); !errors.Is(err, ErrDegraded) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("check of the failing channel = %v", err)
	}
	if err := s.Check("panicking")(ctx); !errors.Is(err, ErrDegraded) || !strings.Contains(err.Error(), "panic") {
		t.Errorf("check of the panicking channel = %v", err)
	}
	if err := s.Check("healthy")(ctx); err != nil {
		t.Errorf("check of the healthy channel = %v", err)
	}
	if err := s.Send(ctx, "healthy", "alice", "hi"); err != nil {
		t.Fatal(err)
	}
	if got := <-healthy.sent; got != "alice: hi" {
		t.Errorf("sent %q", got)
	}

	// First restart after 1 s; the failing one fails again and waits 2 s.
	clk.Advance(time.Second)
	waitUntil(t, "the panicking channel to run again", func() bool { return panicking.runs.Load() == 2 })
	waitUntil(t, "the failing channel's second backoff", func() bool { return failing.runs.Load() == 2 && clk.Pending() == 1 })
	clk.Advance(time.Second)
	if failing.runs.Load() != 2 {
		t.Fatal("restarted before its doubled backoff")
	}
	clk.Advance(time.Second)
	waitUntil(t, "the failing channel to recover", func() bool { return failing.runs.Load() == 3 })
	waitUntil(t, "checks to clear", func() bool {
		return s.Check("failing")(ctx) == nil && s.Check("panicking")(ctx) == nil
	})
	for _, st := range s.Statuses() {
		if !st.Running {
			t.Errorf("%s not running: %+v", st.Name, st)
		}
	}
	if healthy.runs.Load() != 1 {
		t.Errorf("the healthy channel ran %d times", healthy.runs.Load())
	}
	cancel()
	if err := s.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSendToUnknownChannel(t *testing.T) {
	s, _ := NewSet(nil, nil)
	if err := s.Send(context.Background(), "telegram", "bob", "hi"); !errors.Is(err, ErrNoChannel) {
		t.Fatalf("err = %v, want ErrNoChannel", err)
	}
}

func TestNamesAreUnique(t *testing.T) {
	if _, err := NewSet(nil, nil, &testChannel{name: "a"}, &testChannel{name: "a"}); err == nil {
		t.Fatal("two channels named a accepted")
	}
	if _, err := NewSet(nil, nil, &testChannel{}); err == nil {
		t.Fatal("a channel without a name accepted")
	}
}

func TestMountServesEveryChannelsRoutes(t *testing.T) {
	s, _ := NewSet(nil, nil, &testChannel{name: "one", route: "GET /one"}, &testChannel{name: "two", route: "/two"}, &testChannel{name: "none"})
	mux := http.NewServeMux()
	s.Mount(mux)
	for _, p := range []string{"/one", "/two"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
		if rec.Body.String() != strings.TrimPrefix(p, "/") {
			t.Errorf("%s answered %d %q", p, rec.Code, rec.Body)
		}
	}
}

// panicky's every method but Name panics: the set turns each into an
// error (or a log line) of that channel; the caller runs on.
type panicky struct{}

func (panicky) Name() string                                        { return "panicky" }
func (panicky) Routes() []Route                                     { return nil }
func (panicky) Run(context.Context) error                           { panic("run") }
func (panicky) Send(context.Context, string, string) error          { panic("send") }
func (panicky) SendMedia(context.Context, string, turn.Media) error { panic("media") }
func (panicky) Close(context.Context) error                         { panic("close") }
func (panicky) Disconnect(string) int                               { panic("disconnect") }

func TestPanicsInAChannelAreItsErrors(t *testing.T) {
	other := &testChannel{name: "other", sent: make(chan string, 1)}
	s, _ := NewSet(nil, nil, panicky{}, other)
	ctx := context.Background()
	if err := s.Send(ctx, "panicky", "bob", "hi"); err == nil || err.Error() != "panicky: send failed: an internal error in the channel (logged)" {
		t.Errorf("Send: %v", err)
	}
	if err := s.SendMedia(ctx, "panicky", "bob", turn.Media{Kind: "link"}); err == nil || !strings.Contains(err.Error(), "send media failed") || strings.Contains(err.Error(), "goroutine") {
		t.Errorf("SendMedia: %v", err)
	}
	if err := s.SendMedia(ctx, "other", "bob", turn.Media{Kind: "link"}); err == nil || !strings.Contains(err.Error(), "cannot send files") {
		t.Errorf("SendMedia to a text-only channel: %v", err)
	}
	if err := s.Close(ctx); err == nil || !strings.Contains(err.Error(), "close failed") {
		t.Errorf("Close: %v", err)
	}
	if n := s.Disconnect("panicky:bob"); n != 0 {
		t.Errorf("Disconnect = %d", n)
	}
	if err := s.Send(ctx, "other", "bob", "still here"); err != nil {
		t.Fatal(err)
	}
	if got := <-other.sent; got != "bob: still here" {
		t.Errorf("other channel sent %q", got)
	}
	if err := s.Send(ctx, "sms", "bob", "hi"); !errors.Is(err, ErrNoChannel) || err.Error() != `channel "sms" is not connected on this agent` {
		t.Errorf("unknown channel: %v", err)
	}
}

// claimingChannel takes the recipients of name that start with prefix.
type claimingChannel struct {
	testChannel
	claims string // "name:prefix"
	panics bool
}

func (c *claimingChannel) Claims(_ context.Context, name, to string) bool {
	if c.panics {
		panic("claims")
	}
	n, prefix, _ := strings.Cut(c.claims, ":")
	return name == n && strings.HasPrefix(to, prefix)
}

// A channel that claims some recipients of another channel's name gets
// them even while that channel is enabled (the AI Bot's group chats); the
// rest still go to the named channel. A claimer that panics claims
// nothing.
func TestClaimedRecipients(t *testing.T) {
	s, _ := NewSet(nil, nil)
	app := &testChannel{name: "wecom", sent: make(chan string, 4)}
	bot := &claimingChannel{testChannel: testChannel{name: "wecom_bot", sent: make(chan string, 4)}, claims: "wecom:group:"}
	bad := &claimingChannel{testChannel: testChannel{name: "broken", sent: make(chan string, 4)}, panics: true}
	for _, c := range []Channel{app, bad, bot} {
		if err := s.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := s.Send(ctx, "wecom", "group:wecom:c1", "to the group"); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, "wecom", "alice", "to alice"); err != nil {
		t.Fatal(err)
	}
	if got := <-bot.sent; got != "group:wecom:c1: to the group" {
		t.Fatalf("bot got %q", got)
	}
	if got := <-app.sent; got != "alice: to alice" {
		t.Fatalf("app got %q", got)
	}
	if len(bot.sent)+len(app.sent)+len(bad.sent) != 0 {
		t.Fatal("a message went twice")
	}
}
