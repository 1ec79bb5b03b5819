package scheduler

import (
	"context"
	"testing"
	"time"
)

// A user's jobs move to another box: the cron job and the one-shot fire
// there at their times, once, and no longer on the old box; an import
// tried again adds nothing; other owners' jobs stay where they are.
func TestJobsMoveWithTheirOwner(t *testing.T) {
	old := newHarness(t, t0, nil)
	cron := old.add(NewJob{Cron: "0 9 * * 1", Payload: "weekly summary"})
	shot := old.add(NewJob{At: "2025-03-03T09:30", Payload: "call mum"})
	paused := old.add(NewJob{Cron: "0 8 * * *", Payload: "paused one"})
	if _, err := old.st.DB().Exec(`UPDATE sched_jobs SET state = 'paused', due_at = NULL WHERE id = ?`, paused.ID); err != nil {
		t.Fatal(err)
	}
	bob := old.add(NewJob{Owner: "wecom:bob", To: "bob", At: "2025-03-03T09:30", Payload: "bob's"})
	ctx := context.Background()
	if n, err := old.s.Hold(ctx, "wecom:alice"); err != nil || n != 2 {
		t.Fatalf("hold: %d, %v (want the two active jobs)", n, err)
	}
	jobs, err := old.s.Export(ctx, "wecom:alice")
	if err != nil || len(jobs) != 3 {
		t.Fatalf("export: %d jobs, %v", len(jobs), err)
	}
	if n, err := old.s.Running(ctx, "wecom:alice"); err != nil || n != 0 {
		t.Fatalf("running %d, %v", n, err)
	}

	target := newHarness(t, t0, nil)
	for range 2 {
		if _, err := target.s.Import(ctx, "wecom:alice", jobs); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := target.s.Release(ctx, "wecom:alice"); err != nil || n != 2 { // the move committed
		t.Fatalf("release: %d, %v", n, err)
	}
	moved, err := target.s.List(ctx, "wecom:alice")
	if err != nil || len(moved) != 3 {
		t.Fatalf("after two imports: %d jobs, %v", len(moved), err)
	}
	byPayload := map[string]Job{}
	for _, j := range moved {
		byPayload[j.Payload] = j
	}
	if j := byPayload["weekly summary"]; !j.Next.Equal(cron.Next) || j.Spec != cron.Spec || j.State != StateActive {
		t.Fatalf("the cron job moved as %+v, was %+v", j, cron)
	}
	if j := byPayload["paused one"]; j.State != "paused" || !j.Next.IsZero() {
		t.Fatalf("the paused job moved as %+v", j)
	}
	if n, err := old.s.Purge(ctx, "wecom:alice"); err != nil || n != 3 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if left, _ := old.s.List(ctx, ""); len(left) != 1 || left[0].ID != bob.ID {
		t.Fatalf("the old box kept %+v; want only bob's job", left)
	}

	if !cron.Next.Before(shot.Next) {
		t.Fatalf("the test wants the cron slot (%v) before the one-shot (%v)", cron.Next, shot.Next)
	}
	for _, at := range []time.Time{cron.Next, shot.Next} {
		for _, h := range []*harness{old, target} {
			h.clock.Set(at.Add(time.Second))
			h.step()
		}
	}
	if got := target.out.all(); len(got) != 2 || got[0].Text != "weekly summary" || got[1].Text != "call mum" || got[1].To != "alice" {
		t.Fatalf("the new box sent %+v; want the weekly summary, then the one-shot, once each", got)
	}
	if got := old.out.all(); len(got) != 1 || got[0].Text != "bob's" {
		t.Fatalf("the old box sent %+v; want only bob's reminder", got)
	}
}
