package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"agent/pkg/nativetest"
)

// t0 is Monday 2025-03-03 08:59:00 in Shanghai.
var t0 = time.Date(2025, 3, 3, 8, 59, 0, 0, shanghai)

func TestAddValidation(t *testing.T) {
	h := newHarness(t, t0, func(c *Config) { c.MaxPerOwner = 3 })
	ctx := context.Background()
	base := NewJob{Owner: "wecom:alice", Channel: "wecom", To: "alice", Payload: "hi"}
	cases := []struct {
		name string
		mod  func(*NewJob)
		want string
	}{
		{"bad cron", func(n *NewJob) { n.Cron = "61 * * * *" }, "cron expression"},
		{"six fields", func(n *NewJob) { n.Cron = "0 0 9 * * 1" }, "5 fields"},
		{"never fires", func(n *NewJob) { n.Cron = "0 0 30 2 *" }, "never fires"},
		{"tz in spec", func(n *NewJob) { n.Cron = "CRON_TZ=UTC 0 9 * * *" }, "tz field"},
		{"every", func(n *NewJob) { n.Cron = "@every 1s" }, "@every"},
		{"past", func(n *NewJob) { n.At = "2025-03-03T08:00" }, "in the past"},
		{"not iso", func(n *NewJob) { n.At = "tomorrow at 8" }, "ISO 8601"},
		{"unknown zone", func(n *NewJob) { n.Cron = "0 9 * * *"; n.TZ = "Mars/Olympus" }, "unknown time zone"},
		{"both", func(n *NewJob) { n.Cron = "0 9 * * *"; n.At = "2025-03-04T08:00" }, "not both"},
		{"neither", func(n *NewJob) {}, "not both or neither"},
		{"empty text", func(n *NewJob) { n.Cron = "0 9 * * *"; n.Payload = " " }, "text to send is empty"},
		{"bad action", func(n *NewJob) { n.Cron = "0 9 * * *"; n.Action = "exec" }, "message or llm_task"},
	}
	for _, c := range cases {
		n := base
		c.mod(&n)
		_, err := h.s.Add(ctx, n)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Add error = %v; want ErrInvalid mentioning %q", c.name, err, c.want)
		}
	}
	for i := 0; i < 3; i++ {
		h.add(NewJob{Cron: "0 9 * * *", Payload: "x"})
	}
	_, err := h.s.Add(ctx, NewJob{Owner: "wecom:alice", Channel: "wecom", To: "alice", Cron: "0 9 * * *", Payload: "x"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "limit") {
		t.Errorf("4th job: error = %v; want the per-user limit", err)
	}
	if _, err := h.s.Add(ctx, NewJob{Owner: "wecom:bob", Channel: "wecom", To: "bob", Cron: "0 9 * * *", Payload: "x"}); err != nil {
		t.Errorf("another user's job: %v", err)
	}
}

func TestCronFiresInItsZone(t *testing.T) {
	h := newHarness(t, t0, nil)
	j := h.add(NewJob{Cron: "0 9 * * 1", Payload: "weekly summary"})
	berlin := h.add(NewJob{Cron: "0 9 * * 1", TZ: "Europe/Berlin", Payload: "berlin"})
	if want := time.Date(2025, 3, 3, 9, 0, 0, 0, shanghai); !j.Next.Equal(want) {
		t.Fatalf("next = %v; want %v", j.Next, want)
	}
	if want := time.Date(2025, 3, 3, 9, 0, 0, 0, nativetest.Location(t, "Europe/Berlin")); !berlin.Next.Equal(want) {
		t.Fatalf("berlin next = %v; want %v", berlin.Next, want)
	}
	if next := h.step(); !next.Equal(j.Next) {
		t.Fatalf("poll says next %v; want %v", next, j.Next)
	}
	if n := len(h.out.all()); n != 0 {
		t.Fatalf("sent %d before the slot", n)
	}
	h.clock.Set(j.Next)
	h.step()
	got := h.out.all()
	if len(got) != 1 || got[0].Text != "weekly summary" || got[0].To != "alice" || got[0].Channel != "wecom" {
		t.Fatalf("sent %+v; want the summary once to wecom:alice", got)
	}
	h.step() // same instant: nothing more
	if n := len(h.out.all()); n != 1 {
		t.Fatalf("sent %d; want 1", n)
	}
	after := h.job(j.ID)
	if want := time.Date(2025, 3, 10, 9, 0, 0, 0, shanghai); !after.Next.Equal(want) || after.LastStatus != "ok" || after.Runs != 1 {
		t.Fatalf("after run: next %v status %q runs %d; want %v ok 1", after.Next, after.LastStatus, after.Runs, want)
	}
}

func TestOneShotRunsOnce(t *testing.T) {
	h := newHarness(t, t0, nil)
	j := h.add(NewJob{At: "2025-03-03T09:30", Payload: "call mum"})
	h.clock.Set(j.Next.Add(time.Second))
	h.step()
	h.clock.Advance(time.Hour)
	h.step()
	if got := h.out.all(); len(got) != 1 || got[0].Text != "call mum" {
		t.Fatalf("sent %+v; want one reminder", got)
	}
	if got := h.job(j.ID); got.State != StateDone || !got.Next.IsZero() {
		t.Fatalf("state %q next %v; want done, none", got.State, got.Next)
	}
}

func TestOneShotWithinGraceRunsAfterRestart(t *testing.T) {
	h := newHarness(t, t0, nil)
	j := h.add(NewJob{At: "2025-03-03T09:00", Payload: "standup"})
	h.s.Close(context.Background())
	h.clock.Set(j.Next.Add(5 * time.Minute)) // down across the slot, back within 10 min
	h.restart()
	h.step()
	h.step()
	if got := h.out.all(); len(got) != 1 || got[0].Text != "standup" {
		t.Fatalf("sent %+v; want the reminder once", got)
	}
}

func TestOneShotBeyondGraceIsMissedAndOwnerTold(t *testing.T) {
	h := newHarness(t, t0, func(c *Config) { c.Grace = 10 * time.Minute })
	j := h.add(NewJob{At: "2025-03-03T09:00", Payload: "standup", Owner: "wecom:boss", Channel: "wecom", To: "alice"})
	h.s.Close(context.Background())
	h.clock.Set(j.Next.Add(2 * time.Hour))
	h.restart()
	h.step()
	got := h.out.all()
	if len(got) != 1 || got[0].To != "boss" || !strings.Contains(got[0].Text, "was not running") {
		t.Fatalf("sent %+v; want one missed notice to the owner boss", got)
	}
	if s := h.job(j.ID).State; s != StateMissed {
		t.Fatalf("state %q; want missed", s)
	}
	h.clock.Advance(time.Hour)
	h.step()
	if n := len(h.out.all()); n != 1 {
		t.Fatalf("sent %d; want only the notice", n)
	}
}

func TestRecurringNoBurstAfterDowntime(t *testing.T) {
	h := newHarness(t, t0, nil)
	j := h.add(NewJob{Cron: "*/5 * * * *", Payload: "tick"})
	h.s.Close(context.Background())
	h.clock.Set(time.Date(2025, 3, 3, 12, 2, 0, 0, shanghai)) // 3 h down: 36 slots passed
	h.restart()
	h.step()
	if n := len(h.out.all()); n != 0 {
		t.Fatalf("sent %d after downtime; want none (next future slot only)", n)
	}
	got := h.job(j.ID)
	if want := time.Date(2025, 3, 3, 12, 5, 0, 0, shanghai); !got.Next.Equal(want) || got.LastStatus != "missed" {
		t.Fatalf("next %v status %q; want %v missed", got.Next, got.LastStatus, want)
	}
	h.clock.Set(got.Next)
	h.step()
	if n := len(h.out.all()); n != 1 {
		t.Fatalf("sent %d at the next slot; want 1", n)
	}
}

func TestCrashAfterClaimDoesNotRepeat(t *testing.T) {
	h := newHarness(t, t0, nil)
	at := h.add(NewJob{At: "2025-03-03T09:00", Payload: "once"})
	cr := h.add(NewJob{Cron: "0 9 * * *", Payload: "daily"})
	h.clock.Set(at.Next)
	// Claim as the loop would, then "crash" before the actions run.
	fires, _, _, err := h.s.claim(context.Background(), h.clock.Now())
	if err != nil || len(fires) != 2 {
		t.Fatalf("claim: %d fires, %v; want 2", len(fires), err)
	}
	h.s.Close(context.Background())
	h.restart()
	h.step()
	// The clock goes back to the same instant: the cron slot is claimed.
	h.s.mu.Lock()
	h.s.lastNow = 0
	h.s.mu.Unlock()
	if err := h.s.replan(context.Background(), at.Next.Add(-time.Second), false); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(at.Next)
	h.step()
	if got := h.out.all(); len(got) != 0 {
		t.Fatalf("sent %+v after the crash; want nothing (slots were claimed)", got)
	}
	if s := h.job(at.ID); s.State != StateDone || s.LastStatus != "interrupted" {
		t.Fatalf("one-shot state %q/%q; want done/interrupted", s.State, s.LastStatus)
	}
	if n := h.job(cr.ID).Next; !n.Equal(time.Date(2025, 3, 4, 9, 0, 0, 0, shanghai)) {
		t.Fatalf("cron next %v; want tomorrow 09:00", n)
	}
}

func TestClockJumps(t *testing.T) {
	h := newHarness(t, t0, nil)
	j := h.add(NewJob{Cron: "0 9 * * *", Payload: "daily"})
	h.clock.Set(j.Next)
	h.step()
	// Backwards an hour: the 09:00 slot comes round again but already ran.
	h.clock.Set(j.Next.Add(-time.Hour))
	if next := h.step(); !next.Equal(j.Next) {
		t.Fatalf("after jump back, next %v; want the 09:00 slot again %v", next, j.Next)
	}
	h.clock.Set(j.Next)
	h.step()
	if n := len(h.out.all()); n != 1 {
		t.Fatalf("sent %d; want 1 (slot not repeated after the clock went back)", n)
	}
	// Forwards three days: one late slot beyond grace is skipped, no burst.
	h.clock.Set(j.Next.Add(72*time.Hour + 30*time.Minute))
	h.step()
	if n := len(h.out.all()); n != 1 {
		t.Fatalf("sent %d after the jump forward; want still 1", n)
	}
	if got := h.job(j.ID); !got.Next.Equal(time.Date(2025, 3, 7, 9, 0, 0, 0, shanghai)) {
		t.Fatalf("next %v; want 2025-03-07 09:00", got.Next)
	}
}

func TestFailingOneShotBacksOffThenGivesUp(t *testing.T) {
	h := newHarness(t, t0, func(c *Config) { c.MaxAttempts = 3 })
	h.out.setFail(errBoom)
	j := h.add(NewJob{At: "2025-03-03T09:00", Payload: "fragile"})
	h.clock.Set(j.Next)
	h.step()
	got := h.job(j.ID)
	if got.Failures != 1 || !strings.Contains(got.LastError, "boom") || !got.Next.Equal(j.Next.Add(time.Minute)) {
		t.Fatalf("after 1st failure: failures %d err %q next %v; want 1, boom, +1m", got.Failures, got.LastError, got.Next)
	}
	h.clock.Advance(30 * time.Second) // not yet
	h.step()
	if got := h.job(j.ID); got.Failures != 1 {
		t.Fatalf("retried before the back-off: failures %d", got.Failures)
	}
	h.clock.Set(j.Next.Add(time.Minute))
	h.step()
	if got := h.job(j.ID); got.Failures != 2 || !got.Next.Equal(j.Next.Add(3*time.Minute)) {
		t.Fatalf("after 2nd failure: failures %d next %v; want 2, +3m (2m back-off)", got.Failures, got.Next)
	}
	h.clock.Set(j.Next.Add(3 * time.Minute))
	h.step()
	got = h.job(j.ID)
	if got.State != StateFailed || got.Failures != 3 {
		t.Fatalf("after 3rd failure: state %q failures %d; want failed 3", got.State, got.Failures)
	}
	msgs := h.out.all()
	if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "given up") {
		t.Fatalf("sent %+v; want the give-up notice to the owner", msgs)
	}
}

func TestFailingCronBacksOff(t *testing.T) {
	h := newHarness(t, t0, nil)
	h.out.setFail(errBoom)
	j := h.add(NewJob{Cron: "* * * * *", Payload: "every minute"})
	attempts := 0
	for now := j.Next; now.Before(j.Next.Add(30 * time.Minute)); now = now.Add(time.Minute) {
		h.clock.Set(now)
		h.step()
		if got := h.job(j.ID); got.Failures != attempts {
			attempts = got.Failures
		}
	}
	// Back-off 1, 2, 4, 8, 16 min: attempts at +0, +2, +5, +10, +19 (each
	// next slot after now+back-off) -> 5 in 30 minutes, not 30.
	if attempts < 4 || attempts > 6 {
		t.Fatalf("%d attempts in 30 minutes; want about 5 (backing off)", attempts)
	}
	h.out.setFail(nil)
	got := h.job(j.ID)
	h.clock.Set(got.Next)
	h.step()
	if got := h.job(j.ID); got.Failures != 0 || got.LastStatus != "ok" || got.LastError != "" {
		t.Fatalf("after success: failures %d status %q err %q; want reset", got.Failures, got.LastStatus, got.LastError)
	}
}

func TestLLMTask(t *testing.T) {
	var asked []string
	h := newHarness(t, t0, func(c *Config) {
		c.Prompt = func(_ context.Context, task Task) (string, error) {
			owner, prompt := task.Owner, task.Prompt
			asked = append(asked, owner+"|"+prompt)
			return "Here is your summary.", nil
		}
	})
	j := h.add(NewJob{Cron: "0 9 * * 1", Action: ActionLLMTask, Payload: "summarise my week"})
	h.clock.Set(j.Next)
	h.step()
	if len(asked) != 1 || asked[0] != "wecom:alice|summarise my week" {
		t.Fatalf("prompted %v; want once as wecom:alice", asked)
	}
	if got := h.out.all(); len(got) != 1 || got[0].Text != "Here is your summary." {
		t.Fatalf("sent %+v; want the answer", got)
	}
}

func TestRemoveWhileWaiting(t *testing.T) {
	h := newHarness(t, t0, nil)
	j := h.add(NewJob{Cron: "0 9 * * *", Payload: "x"})
	if _, err := h.s.Remove(context.Background(), j.ID, "wecom:bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob removing alice's job: %v; want ErrNotFound", err)
	}
	if _, err := h.s.Remove(context.Background(), j.ID, "wecom:alice"); err != nil {
		t.Fatal(err)
	}
	h.clock.Set(j.Next)
	h.step()
	if n := len(h.out.all()); n != 0 {
		t.Fatalf("removed job sent %d", n)
	}
}

// TestLoop drives the real loop with the fake clock: it sleeps until the
// slot, wakes for a new job, and stops on Close.
func TestLoop(t *testing.T) {
	needZones(t)
	st, _ := openDB(t)
	clk := newFakeClock(t0)
	out := newOutbox(clk)
	s, err := New(Config{DB: st.DB(), Clock: clk, Location: shanghai, Send: out.send})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	blockUntil(t, clk, 1) // asleep, nothing scheduled
	j, err := s.Add(context.Background(), NewJob{Owner: "wecom:alice", Channel: "wecom", To: "alice", At: "2025-03-03T09:00", Payload: "loop"})
	if err != nil {
		t.Fatal(err)
	}
	blockUntil(t, clk, 1) // woke, planned, asleep again
	clk.Set(j.Next)
	m := out.wait(t)
	if m.Text != "loop" || !m.At.Equal(j.Next) {
		t.Fatalf("sent %+v; want %q at %v", m, "loop", j.Next)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
