package wecom

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/logging"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

// hangAPI sends through the real client, then (after) or instead of it
// (before) blocks until released, ignoring its context: a process frozen
// mid-send, so nothing about the send is ever recorded by its outbox.
type hangAPI struct {
	*wx.Client
	after   bool
	reached chan struct{} // closed when the send reaches the hang
	release chan struct{}
	once    sync.Once
}

func newHangAPI(c *wx.Client, after bool) *hangAPI {
	return &hangAPI{Client: c, after: after, reached: make(chan struct{}), release: make(chan struct{})}
}

func (h *hangAPI) SendText(ctx context.Context, to, text string, opts ...wx.SendOption) error {
	if h.after {
		if err := h.Client.SendText(ctx, to, text, opts...); err != nil {
			return err
		}
	}
	h.once.Do(func() { close(h.reached) })
	<-h.release
	return errors.New("the process is gone")
}

// outboxEnv is an outbox on a database file with a fake WeCom API, that
// can "crash" (abandon an outbox without recording anything) and restart.
type outboxEnv struct {
	t      *testing.T
	path   string
	clock  *clock.Fake
	api    *wecomtest.Server
	client *wx.Client
	logs   *syncBuf
	st     *store.Store
	db     *sql.DB
	outbox *Outbox
	stop   func()
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newOutboxEnv(t *testing.T, secret string) *outboxEnv {
	t.Helper()
	e := &outboxEnv{t: t, path: filepath.Join(t.TempDir(), store.FileName), clock: newFakeClock(), logs: &syncBuf{}}
	e.api = wecomtest.NewServer(testCorpID, secret, testAgent)
	t.Cleanup(e.api.Close)
	e.api.SetClock(e.clock.Now)
	e.client = e.api.NewClient()
	e.client.MaxAttempts = 2
	return e
}

// open opens the database and an outbox sending through api (the plain
// client when nil) and starts it.
func (e *outboxEnv) open(api API, cfg OutboxConfig) {
	e.t.Helper()
	st := storetest.OpenAt(e.t, e.path)
	e.st, e.db = st, st.DB()
	if api == nil {
		api = e.client
	}
	cfg.API, cfg.Clock = api, e.clock
	cfg.Logger = slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.outbox = NewOutbox(e.db, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.outbox.Run(ctx) }()
	stopped := false
	e.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			st.Close()
		}
	}
	e.t.Cleanup(e.stop)
}

// crash abandons the running outbox whose send hangs in h: its database is
// closed under it, so it records nothing more (as after kill -9). The
// frozen goroutine is released when the test ends.
func (e *outboxEnv) crash(h *hangAPI) {
	e.t.Helper()
	<-h.reached
	stop := e.stop
	e.st.Close()
	e.t.Cleanup(func() { close(h.release); stop() })
	e.stop = func() {}
}

func (e *outboxEnv) enqueue(to, text string) {
	e.t.Helper()
	if err := e.outbox.Enqueue(context.Background(), to, text); err != nil {
		e.t.Fatal(err)
	}
}

func (e *outboxEnv) drained() bool {
	var n int
	if err := e.db.QueryRow(`SELECT count(*) FROM outbox WHERE state IN (0, 3)`).Scan(&n); err != nil {
		return false
	}
	return n == 0
}

func (e *outboxEnv) lastError(content string) string {
	e.t.Helper()
	var s string
	if err := e.db.QueryRow(`SELECT last_error FROM outbox WHERE content = ?`, content).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// dupFields returns the duplicate-check fields of a delivered request.
func dupFields(t *testing.T, m wecomtest.Sent) (enable, interval int64) {
	t.Helper()
	var b struct {
		Enable   int64 `json:"enable_duplicate_check"`
		Interval int64 `json:"duplicate_check_interval"`
	}
	if err := json.Unmarshal(m.Raw, &b); err != nil {
		t.Fatal(err)
	}
	return b.Enable, b.Interval
}

// Two identical legitimate replies both arrive: the first carries the
// duplicate check, the repeat inside the window does not (WeCom would
// drop it). Once the window has passed, the same text carries it again.
func TestIdenticalRepliesBothDelivered(t *testing.T) {
	e := newOutboxEnv(t, "secret")
	e.open(nil, OutboxConfig{})
	e.enqueue("alice", "OK")
	e.enqueue("alice", "OK")
	e.enqueue("bob", "OK")
	eventually(t, e.clock, 10*time.Millisecond, "three deliveries", e.drained)
	if n := e.api.Delivered("alice", "OK"); n != 2 {
		t.Fatalf("alice got OK %d times, want 2", n)
	}
	if n := e.api.Delivered("bob", "OK"); n != 1 {
		t.Fatalf("bob got OK %d times, want 1", n)
	}
	var alice, bob []wecomtest.Sent
	for _, m := range e.api.Messages() {
		switch m.ToUser {
		case "alice":
			alice = append(alice, m)
		case "bob":
			bob = append(bob, m)
		}
	}
	window := int64(DefaultDupWindow / time.Second)
	if en, iv := dupFields(t, alice[0]); en != 1 || iv != window {
		t.Fatalf("first OK: check %d interval %d, want 1 %d", en, iv, window)
	}
	if en, _ := dupFields(t, alice[1]); en != 0 {
		t.Fatalf("the legitimate repeat carries the check: %s", alice[1].Raw)
	}
	if en, _ := dupFields(t, bob[0]); en != 1 {
		t.Fatal("bob's OK (another recipient) lost the check")
	}
	e.clock.Advance(DefaultDupWindow + time.Second)
	e.enqueue("alice", "OK")
	eventually(t, e.clock, 10*time.Millisecond, "the third OK", e.drained)
	msgs := e.api.Messages()
	if en, _ := dupFields(t, msgs[len(msgs)-1]); en != 1 || e.api.Delivered("alice", "OK") != 3 {
		t.Fatalf("after the window: %s, delivered %d", msgs[len(msgs)-1].Raw, e.api.Delivered("alice", "OK"))
	}
	if len(e.api.Dropped()) != 0 {
		t.Fatalf("WeCom dropped legitimate messages: %+v", e.api.Dropped())
	}
}

// WeCom's window runs from when it accepted a message, which can be long
// after its first attempt (retries, a stop in between): an identical
// reply within the window of the acceptance goes without the check, so
// it is not dropped.
func TestIdenticalAfterLateAcceptanceDelivered(t *testing.T) {
	e := newOutboxEnv(t, "secret")
	e.open(nil, OutboxConfig{})
	e.enqueue("alice", "OK")
	eventually(t, e.clock, 10*time.Millisecond, "the first OK", e.drained)
	// As if its first attempt had been 3 h before WeCom took it.
	if _, err := e.db.Exec(`UPDATE outbox SET first_try_at = first_try_at - ?`, (3 * time.Hour).Milliseconds()); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour + time.Minute)
	e.enqueue("alice", "OK")
	eventually(t, e.clock, 10*time.Millisecond, "the second OK", e.drained)
	if n := e.api.Delivered("alice", "OK"); n != 2 || len(e.api.Dropped()) != 0 {
		t.Fatalf("delivered %d, dropped %+v; want 2 and none", n, e.api.Dropped())
	}
}

// The kill -9 case: the send reached WeCom, the process died before
// recording it. After the restart the row is sent again with the same
// duplicate check, WeCom drops it, and the user sees the reply once; the
// rest of the queue follows in order.
func TestInDoubtResendNotDeliveredTwice(t *testing.T) {
	e := newOutboxEnv(t, "secret")
	h := newHangAPI(e.client, true)
	e.open(h, OutboxConfig{})
	e.enqueue("alice", "the answer")
	e.enqueue("alice", "and more")
	e.crash(h)
	if n := e.api.Delivered("alice", "the answer"); n != 1 {
		t.Fatalf("before the restart: delivered %d", n)
	}
	e.clock.Advance(3 * time.Second) // systemd restarts it
	e.open(nil, OutboxConfig{})
	eventually(t, e.clock, 10*time.Millisecond, "the queue drained", e.drained)
	if n := e.api.Delivered("alice", "the answer"); n != 1 {
		t.Fatalf("the in-doubt reply arrived %d times, want once", n)
	}
	if d := e.api.Dropped(); len(d) != 1 || d[0].Content != "the answer" {
		t.Fatalf("dropped by the duplicate check: %+v", d)
	}
	var got []string
	for _, m := range e.api.Messages() {
		got = append(got, m.Content)
	}
	if strings.Join(got, "|") != "the answer|and more" {
		t.Fatalf("delivered %q", got)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "in_doubt=1") || !strings.Contains(logs, "drops any that already arrived") {
		t.Fatalf("recovery not logged as covered:\n%s", logs)
	}
}

// In doubt but never reached WeCom: the resend is delivered (nothing lost).
func TestInDoubtNeverSentIsDelivered(t *testing.T) {
	e := newOutboxEnv(t, "secret")
	h := newHangAPI(e.client, false)
	e.open(h, OutboxConfig{})
	e.enqueue("alice", "lost in flight")
	e.crash(h)
	e.open(nil, OutboxConfig{})
	eventually(t, e.clock, 10*time.Millisecond, "the resend", e.drained)
	if n := e.api.Delivered("alice", "lost in flight"); n != 1 {
		t.Fatalf("delivered %d, want 1", n)
	}
}

// A legitimate repeat in flight at the crash goes out without the check
// (so it is never dropped): if it had not reached WeCom it is delivered
// now, and the recovery log says it was not covered.
func TestInDoubtRepeatDelivered(t *testing.T) {
	e := newOutboxEnv(t, "secret")
	e.open(nil, OutboxConfig{})
	e.enqueue("alice", "OK")
	eventually(t, e.clock, 10*time.Millisecond, "the first OK", e.drained)
	e.stop()
	h := newHangAPI(e.client, false)
	e.open(h, OutboxConfig{})
	e.enqueue("alice", "OK")
	e.crash(h)
	e.open(nil, OutboxConfig{})
	eventually(t, e.clock, 10*time.Millisecond, "the repeat", e.drained)
	if n := e.api.Delivered("alice", "OK"); n != 2 {
		t.Fatalf("OK delivered %d times, want 2", n)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "repeats_without_check=1") {
		t.Fatalf("uncovered repeat not logged:\n%s", logs)
	}
}

// Past WeCom's window the duplicate check cannot help: the in-doubt row
// is still sent (at least once: a lost reply is worse than a repeated
// one), and the log says it may arrive twice.
func TestInDoubtPastWindowSentAndLogged(t *testing.T) {
	e := newOutboxEnv(t, "secret")
	h := newHangAPI(e.client, true)
	e.open(h, OutboxConfig{DupWindow: time.Hour})
	e.enqueue("alice", "late")
	e.crash(h)
	e.clock.Advance(time.Hour + time.Minute)
	e.open(nil, OutboxConfig{DupWindow: time.Hour})
	eventually(t, e.clock, 10*time.Millisecond, "the resend", e.drained)
	if n := e.api.Delivered("alice", "late"); n != 2 {
		t.Fatalf("delivered %d; past the window the fake (like WeCom) delivers again", n)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "past_window=1") || !strings.Contains(logs, "after WeCom's duplicate-check window") {
		t.Fatalf("not logged:\n%s", logs)
	}
}

// A send whose answer is lost (it arrived; a 502 came back) is retried by
// the outbox later with the same request, and WeCom drops the repeat.
func TestLostAnswerRetriedByOutboxOnce(t *testing.T) {
	e := newOutboxEnv(t, "secret")
	e.client.MaxAttempts = 1 // the outbox's retry, not the client's
	e.open(nil, OutboxConfig{})
	e.api.LoseAnswerNext(1)
	e.enqueue("alice", "once")
	eventually(t, e.clock, 100*time.Millisecond, "the retry", e.drained)
	var attempts int
	e.db.QueryRow(`SELECT attempts FROM outbox WHERE content = 'once'`).Scan(&attempts)
	if n := e.api.Delivered("alice", "once"); n != 1 || attempts != 2 || len(e.api.Dropped()) != 1 {
		t.Fatalf("delivered %d after %d attempts, dropped %d", n, attempts, len(e.api.Dropped()))
	}
}

// An error text stored in last_error passes the log redaction: a corp
// secret or access token the API echoes is not written to the database.
func TestLastErrorRedacted(t *testing.T) {
	const corpSecret = "Corp-S3cret-9f8e7d"
	e := newOutboxEnv(t, corpSecret)
	sc := &logging.Scrubber{}
	sc.Set([]string{corpSecret})
	e.open(nil, OutboxConfig{Scrub: sc.Scrub})
	// Permanent: stored once, failed.
	e.api.FailNextWith(wecomtest.EndpointSend, wecomtest.CodeInvalidParameter,
		"invalid parameter, app secret "+corpSecret+" with access_token=TOKEN123456 rejected", 1)
	e.enqueue("alice", "permanent")
	eventually(t, e.clock, 10*time.Millisecond, "the failure", e.drained)
	// Retryable (system busy): stored while it waits.
	e.api.FailNextWith(wecomtest.EndpointSend, wx.CodeSystemBusy, "busy; corpsecret="+corpSecret+"&access_token=TOKEN123456", 2)
	e.enqueue("bob", "retried")
	eventually(t, e.clock, 0, "the retryable failure recorded", func() bool {
		var s string
		e.db.QueryRow(`SELECT last_error FROM outbox WHERE content = 'retried'`).Scan(&s)
		return s != ""
	})
	for _, c := range []string{"permanent", "retried"} {
		le := e.lastError(c)
		if le == "" || !strings.Contains(le, "errcode") {
			t.Fatalf("%s: last_error %q does not say what failed", c, le)
		}
		for _, bad := range []string{corpSecret, "TOKEN123456"} {
			if strings.Contains(le, bad) {
				t.Fatalf("%s: last_error stores %q: %s", c, bad, le)
			}
		}
	}
}
