package store_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"agent/pkg/channel/mailbox"
	"agent/pkg/clock"
	"agent/pkg/store"
)

// A WeCom queue written before the mailbox step resumes after the upgrade
// as it would have after a restart: the row in doubt goes first with its
// first attempt's stamp and duplicate-check window, each recipient's rows
// in order, and a row backing off waits for its persisted next_at.
func TestWeComQueueResumesAfterUpgrade(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), store.FileName)
	clk := clock.NewFake(time.Time{})
	now := clk.Now().UnixMilli()
	old, err := store.Open(ctx, path, nil, store.Options{Migrations: store.MigrationsBefore("mailbox")})
	if err != nil {
		t.Fatal(err)
	}
	first := now - time.Minute.Milliseconds()
	for _, r := range []struct {
		to, content     string
		state, attempts int
		next            int64
		first           any
		window          int
	}{
		{"alice", "in doubt", 3, 0, 0, first, 14400},
		{"alice", "then this", 0, 0, 0, nil, 0},
		{"bob", "backing off", 0, 2, now + 30_000, first, 14400},
		{"bob", "after it", 0, 0, 0, nil, 0},
		{"carol", "done long ago", 1, 1, 0, first, 14400},
	} {
		if _, err := old.DB().Exec(`INSERT INTO wecom_outbox(to_user, content, created_at, state, attempts, next_at, first_try_at, dup_window)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.to, r.content, now, r.state, r.attempts, r.next, r.first, r.window); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()

	st, err := store.Open(ctx, path, nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	var sent []mailbox.Message
	var rec mailbox.Recovery
	o := mailbox.NewOutbox(st.DB(), mailbox.OutboxConfig{Channel: "wecom", Clock: clk, DupWindow: 4 * time.Hour,
		Send: func(_ context.Context, m mailbox.Message) error {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, m)
			return nil
		},
		Recovered: func(r mailbox.Recovery) { mu.Lock(); rec = r; mu.Unlock() },
	})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); o.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, m := range sent {
			out = append(out, m.To+":"+m.Content)
		}
		return out
	}
	// wait polls until n rows are sent, moving the clock by step each time
	// (a timer armed just after a move needs another).
	wait := func(n int, step time.Duration) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second) // a hung test, not a timing assertion
		for len(got()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("sent %q, waiting for %d", got(), n)
			}
			clk.Advance(step)
			time.Sleep(2 * time.Millisecond) // poll
		}
	}
	wait(2, 0)
	if g := got(); !slices.Equal(g, []string{"alice:in doubt", "alice:then this"}) {
		t.Fatalf("before bob's backoff ends: %q", g)
	}
	mu.Lock()
	if rec != (mailbox.Recovery{InDoubt: 1, Covered: 1}) {
		t.Errorf("recovery %+v", rec)
	}
	if m := sent[0]; m.FirstTry.UnixMilli() != first || m.Window != 4*time.Hour || m.Attempts != 0 {
		t.Errorf("in-doubt resend %+v: want the first attempt's stamp and window", m)
	}
	mu.Unlock()
	clk.Advance(30 * time.Second)
	wait(4, time.Millisecond)
	if g := got(); !slices.Equal(g[2:], []string{"bob:backing off", "bob:after it"}) {
		t.Fatalf("after the backoff: %q", g)
	}
	mu.Lock()
	if m := sent[2]; m.Attempts != 2 || m.FirstTry.UnixMilli() != first {
		t.Errorf("backed-off row %+v: want attempts 2 and its stamp", m)
	}
	mu.Unlock()
	// The last send is recorded just after its Send returns: poll.
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, s, f, err := o.Stats(ctx)
		if err == nil && p == 0 && s == 5 && f == 0 {
			break
		}
		if err != nil || f != 0 || time.Now().After(deadline) {
			t.Fatalf("stats %d %d %d %v", p, s, f, err)
		}
		time.Sleep(2 * time.Millisecond) // poll
	}
}
