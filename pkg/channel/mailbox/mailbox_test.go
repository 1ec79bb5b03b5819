package mailbox

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/store/storetest"
)

func openDB(t *testing.T) *sql.DB {
	t.Helper()
	return storetest.DB(t)
}

func TestInboxPutDedupPendingMark(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	clk := clock.NewFake(time.Time{})
	wecom, voice := NewInbox(db, "wecom", clk), NewInbox(db, "voice", clk)
	put := func(in *Inbox, m Received, want bool) {
		t.Helper()
		if fresh, err := in.Put(ctx, m); err != nil || fresh != want {
			t.Fatalf("%s Put(%s) = %v, %v; want %v", in.Channel(), m.DedupKey, fresh, err, want)
		}
	}
	put(wecom, Received{DedupKey: "msg:1", Sender: "alice", Kind: "text", Content: "one", Raw: "{}"}, true)
	clk.Advance(time.Second)
	put(wecom, Received{DedupKey: "msg:1", Sender: "alice", Kind: "text", Content: "again"}, false)
	put(voice, Received{DedupKey: "msg:1", Sender: "alice", Kind: "text", Content: "voice's own"}, true)
	put(wecom, Received{DedupKey: "ev:1", Sender: "bob", Kind: "event", State: InIgnored}, true)
	put(wecom, Received{DedupKey: "msg:2", Sender: "bob", ChatID: "chat42", Kind: "text", Content: "two"}, true)

	rows, err := wecom.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Content != "one" || rows[1].Content != "two" || rows[1].ChatID != "chat42" || rows[0].Raw != "{}" {
		t.Fatalf("pending %+v", rows)
	}
	if !rows[0].Received.Equal(clk.Now().Add(-time.Second)) || rows[0].ID >= rows[1].ID {
		t.Fatalf("received %v (clock %v), ids %d %d", rows[0].Received, clk.Now(), rows[0].ID, rows[1].ID)
	}
	vrows, _ := voice.Pending(ctx)
	if len(vrows) != 1 || vrows[0].Content != "voice's own" {
		t.Fatalf("voice pending %+v", vrows)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A channel marks only its own rows.
	if err := wecom.Mark(ctx, tx, InDone, clk.Now(), rows[0].ID, vrows[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if rows, _ := wecom.Pending(ctx); len(rows) != 1 || rows[0].Content != "two" {
		t.Fatalf("after mark: %+v", rows)
	}
	if vrows, _ := voice.Pending(ctx); len(vrows) != 1 {
		t.Fatalf("wecom marked voice's row: %+v", vrows)
	}
	var done int64
	if err := db.QueryRow(`SELECT done_at FROM inbox WHERE id = ?`, rows[0].ID).Scan(&done); err != nil || done != clk.Now().UnixMilli() {
		t.Fatalf("done_at %d (%v)", done, err)
	}
}

// sink records sends and fails them as told.
type sink struct {
	mu   sync.Mutex
	sent []Message
	fail func(m Message) error
}

func (s *sink) send(_ context.Context, m Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(m); err != nil {
			return err
		}
	}
	s.sent = append(s.sent, m)
	return nil
}

func (s *sink) contents(to string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.sent {
		if to == "" || m.To == to {
			out = append(out, m.Content)
		}
	}
	return out
}

func (s *sink) last(content string) Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.sent) - 1; i >= 0; i-- {
		if s.sent[i].Content == content {
			return s.sent[i]
		}
	}
	return Message{}
}

var errPermanent = errors.New("refused for good")

// run starts an outbox for channel with s and returns it; it stops when
// the test ends.
func run(t *testing.T, db *sql.DB, clk *clock.Fake, s *sink, cfg OutboxConfig) *Outbox {
	t.Helper()
	if cfg.Channel == "" {
		cfg.Channel = "wecom"
	}
	cfg.Send, cfg.Clock = s.send, clk
	cfg.Permanent = func(err error) bool { return errors.Is(err, errPermanent) }
	o := NewOutbox(db, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return o
}

// eventually polls cond, moving the fake clock by step, until it holds
// or a real-time deadline passes (a hung test, not a timing assertion).
func eventually(t *testing.T, clk *clock.Fake, step time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		if step > 0 {
			clk.Advance(step)
		}
		time.Sleep(2 * time.Millisecond) // poll interval
	}
}

func drained(o *Outbox) func() bool {
	return func() bool {
		p, _, _, err := o.Stats(context.Background())
		return err == nil && p == 0
	}
}

func texts(contents ...string) []Item {
	out := make([]Item, len(contents))
	for i, c := range contents {
		out[i] = Item{Kind: "text", Content: c}
	}
	return out
}

// One recipient's messages go out in order, also when one of them has to
// be retried; a permanent failure drops that message only; the backoff
// is persisted in next_at.
func TestOutboxOrderRetryAndFailure(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	clk := clock.NewFake(time.Time{})
	s := &sink{}
	fails := map[string]int{"a1": 2}
	s.fail = func(m Message) error {
		switch {
		case m.Content == "b1":
			return errPermanent
		case fails[m.Content] > 0:
			fails[m.Content]--
			return errors.New("busy: access_token=SECRET")
		}
		return nil
	}
	o := NewOutbox(db, OutboxConfig{Channel: "wecom", Send: s.send, Clock: clk,
		Permanent: func(err error) bool { return errors.Is(err, errPermanent) },
		Redact:    func(s string) string { return strings.ReplaceAll(s, "SECRET", "[redacted]") }})
	if err := o.Enqueue(ctx, "alice", texts("a1", "a2", "a3")...); err != nil {
		t.Fatal(err)
	}
	if err := o.Enqueue(ctx, "bob", texts("b1", "b2")...); err != nil {
		t.Fatal(err)
	}
	if err := o.Enqueue(ctx, "", texts("x")...); err == nil {
		t.Fatal("an empty recipient was queued")
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); o.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	eventually(t, clk, 0, "the first failure recorded", func() bool {
		var attempts int
		var next int64
		db.QueryRow(`SELECT attempts, next_at FROM outbox WHERE content = 'a1'`).Scan(&attempts, &next)
		return attempts == 1 && next == clk.Now().Add(RetryDelay(1)).UnixMilli()
	})
	var lastErr string
	db.QueryRow(`SELECT last_error FROM outbox WHERE content = 'a1'`).Scan(&lastErr)
	if lastErr != "busy: access_token=[redacted]" {
		t.Fatalf("last_error %q", lastErr)
	}
	eventually(t, clk, 100*time.Millisecond, "the queue drained", drained(o))
	if got := s.contents("alice"); !slices.Equal(got, []string{"a1", "a2", "a3"}) {
		t.Fatalf("alice got %q", got)
	}
	if got := s.contents("bob"); !slices.Equal(got, []string{"b2"}) {
		t.Fatalf("bob got %q", got)
	}
	pending, sent, failed, err := o.Stats(ctx)
	if err != nil || pending != 0 || sent != 4 || failed != 1 {
		t.Fatalf("stats %d %d %d %v", pending, sent, failed, err)
	}
	var state, attempts int
	db.QueryRow(`SELECT state, attempts FROM outbox WHERE content = 'a1'`).Scan(&state, &attempts)
	if state != OutSent || attempts != 3 {
		t.Fatalf("a1: state %d attempts %d", state, attempts)
	}
}

// After MaxAttempts transient failures a message fails and the next one
// to its recipient goes.
func TestOutboxMaxAttempts(t *testing.T) {
	db := openDB(t)
	clk := clock.NewFake(time.Time{})
	s := &sink{fail: func(m Message) error {
		if m.Content == "doomed" {
			return errors.New("busy")
		}
		return nil
	}}
	o := run(t, db, clk, s, OutboxConfig{MaxAttempts: 3})
	o.Enqueue(context.Background(), "alice", texts("doomed", "next")...)
	eventually(t, clk, time.Second, "the queue drained", drained(o))
	var state, attempts int
	db.QueryRow(`SELECT state, attempts FROM outbox WHERE content = 'doomed'`).Scan(&state, &attempts)
	if state != OutFailed || attempts != 3 || !slices.Equal(s.contents("alice"), []string{"next"}) {
		t.Fatalf("doomed: state %d attempts %d; sent %q", state, attempts, s.contents("alice"))
	}
}

func TestRetryDelay(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {5, 16 * time.Second}, {9, 256 * time.Second}, {10, 5 * time.Minute}, {100, 5 * time.Minute}} {
		if got := RetryDelay(tt.n); got != tt.want {
			t.Errorf("RetryDelay(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// A row's duplicate-check window is fixed before its first attempt: the
// configured one, or none for an identical message to the same recipient
// within the window (the API would drop it), and the window again once
// it has passed.
func TestOutboxDupWindow(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	clk := clock.NewFake(time.Time{})
	s := &sink{}
	o := run(t, db, clk, s, OutboxConfig{DupWindow: time.Hour - time.Millisecond}) // rounded up to whole seconds
	o.Enqueue(ctx, "alice", texts("OK", "OK")...)
	o.Enqueue(ctx, "bob", texts("OK")...)
	eventually(t, clk, 0, "three sends", func() bool { return len(s.contents("")) == 3 })
	s.mu.Lock()
	var windows []string
	for _, m := range s.sent {
		windows = append(windows, m.To+"="+m.Window.String())
		if !m.FirstTry.Equal(clk.Now()) {
			t.Errorf("%+v: first try %v, want %v", m, m.FirstTry, clk.Now())
		}
	}
	s.mu.Unlock()
	slices.Sort(windows)
	if strings.Join(windows, " ") != "alice=0s alice=1h0m0s bob=1h0m0s" {
		t.Fatalf("windows %v", windows)
	}
	clk.Advance(time.Hour + time.Second)
	o.Enqueue(ctx, "alice", texts("OK")...)
	eventually(t, clk, 0, "the fourth send", func() bool { return len(s.contents("")) == 4 })
	if m := s.last("OK"); m.Window != time.Hour {
		t.Fatalf("after the window: %+v", m)
	}
}

// Without a window no row carries a check.
func TestOutboxNoDupWindow(t *testing.T) {
	db := openDB(t)
	clk := clock.NewFake(time.Time{})
	s := &sink{}
	o := run(t, db, clk, s, OutboxConfig{})
	o.Enqueue(context.Background(), "alice", texts("hi")...)
	eventually(t, clk, 0, "the send", drained(o))
	if m := s.last("hi"); m.Window != 0 || m.FirstTry.IsZero() {
		t.Fatalf("%+v", m)
	}
}

// Rows in doubt (claimed when the process died) are sent again first,
// with the first attempt's stamp and window; Recovered says how many the
// window covers.
func TestOutboxRecoversInDoubt(t *testing.T) {
	db := openDB(t)
	clk := clock.NewFake(time.Time{})
	now := clk.Now().UnixMilli()
	first := now - time.Minute.Milliseconds()
	for _, r := range []struct {
		to, content string
		state       int
		first       any
		window      int
	}{
		{"alice", "covered", OutSending, first, 3600},
		{"alice", "after", OutPending, nil, 0},
		{"bob", "repeat", OutSending, first, 0},
		{"carol", "expired", OutSending, now - 2*time.Hour.Milliseconds(), 3600},
	} {
		if _, err := db.Exec(`INSERT INTO outbox(channel, to_user, content, created_at, state, first_try_at, dup_window) VALUES ('wecom', ?, ?, ?, ?, ?, ?)`,
			r.to, r.content, now, r.state, r.first, r.window); err != nil {
			t.Fatal(err)
		}
	}
	// Another channel's row in doubt is not this outbox's.
	if _, err := db.Exec(`INSERT INTO outbox(channel, to_user, content, created_at, state) VALUES ('voice', 'alice', 'not mine', ?, 3)`, now); err != nil {
		t.Fatal(err)
	}
	var got Recovery
	var mu sync.Mutex
	s := &sink{}
	o := run(t, db, clk, s, OutboxConfig{DupWindow: time.Hour, Recovered: func(r Recovery) { mu.Lock(); got = r; mu.Unlock() }})
	eventually(t, clk, 0, "the queue drained", drained(o))
	mu.Lock()
	defer mu.Unlock()
	if got != (Recovery{InDoubt: 3, Covered: 1, Unchecked: 1, PastWindow: 1}) {
		t.Fatalf("recovery %+v", got)
	}
	if c := s.contents("alice"); !slices.Equal(c, []string{"covered", "after"}) {
		t.Fatalf("alice got %q", c)
	}
	if m := s.last("covered"); m.Window != time.Hour || m.FirstTry.UnixMilli() != first {
		t.Fatalf("resend %+v; want the first attempt's window and stamp", m)
	}
	if m := s.last("repeat"); m.Window != 0 {
		t.Fatalf("the repeat gained a check: %+v", m)
	}
	var state int
	db.QueryRow(`SELECT state FROM outbox WHERE channel = 'voice'`).Scan(&state)
	if state != OutSending {
		t.Fatalf("another channel's row was recovered: state %d", state)
	}
}

// Channels share the tables, not their queues or counts.
func TestOutboxChannelsSeparate(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	clk := clock.NewFake(time.Time{})
	ws, vs := &sink{}, &sink{}
	w := run(t, db, clk, ws, OutboxConfig{Channel: "wecom"})
	v := NewOutbox(db, OutboxConfig{Channel: "voice", Send: vs.send, Clock: clk})
	if err := v.Enqueue(ctx, "alice", texts("for voice")...); err != nil {
		t.Fatal(err)
	}
	if err := w.Enqueue(ctx, "alice", texts("for wecom")...); err != nil {
		t.Fatal(err)
	}
	eventually(t, clk, 0, "the wecom send", drained(w))
	if c := ws.contents(""); !slices.Equal(c, []string{"for wecom"}) {
		t.Fatalf("wecom sent %q", c)
	}
	if p, _, _, _ := v.Stats(ctx); p != 1 {
		t.Fatalf("voice pending %d, want 1", p)
	}
}

// EnqueueTx queues inside the caller's transaction: rolled back, nothing
// is sent.
func TestOutboxEnqueueTx(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	o := NewOutbox(db, OutboxConfig{Channel: "wecom"})
	tx, _ := db.BeginTx(ctx, nil)
	if err := o.EnqueueTx(ctx, tx, "alice", texts("a", "b")...); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if p, _, _, _ := o.Stats(ctx); p != 0 {
		t.Fatalf("%d pending after a rollback", p)
	}
	if err := o.Run(ctx); err == nil {
		t.Fatal("Run without Send did not fail")
	}
}
