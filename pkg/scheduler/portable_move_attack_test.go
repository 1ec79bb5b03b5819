package scheduler

import (
	"context"
	"testing"
	"time"
)

// A move (pkg/fleet Move) runs: export on the old box, import on the new
// box, commit the home, purge on the old box. Nothing stops the old box's
// jobs at the export, and the new box's scheduler runs the imported jobs
// at once (Import kicks it) although the move is not committed yet. The
// window between the export and the purge holds the files' upload and
// download through the object store (minutes for a big folder on an ARM
// box). A slot due inside it fires on both boxes: once on the old box
// (its row is still active), once on the new box (its copy is the row
// from before that run, due at that slot, and within Grace). The README
// allows this for "the seconds between the snapshot and the old box's
// purge"; it is the files' transfer, not seconds, and a move that is
// then undone (the user never moved) double-fires too.
func TestJobSlotInsideTheMoveFiresTwice(t *testing.T) {
	for name, importFirst := range map[string]bool{
		"slot after export, before import": false,
		"slot after import, move undone":   true,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			old := newHarness(t, t0, nil)
			shot := old.add(NewJob{At: "2025-03-03T09:00", Payload: "call mum"})
			cron := old.add(NewJob{Cron: "0 9 * * *", Payload: "daily standup"})
			if !shot.Next.Equal(cron.Next) {
				t.Fatalf("the test wants both at one slot: %v, %v", shot.Next, cron.Next)
			}
			target := newHarness(t, t0, nil)

			// export (the old box's runs are drained: none in flight),
			// its jobs held from there on (the fleet's protocol since)
			if _, err := old.s.Hold(ctx, "wecom:alice"); err != nil {
				t.Fatal(err)
			}
			jobs, err := old.s.Export(ctx, "wecom:alice")
			if err != nil || len(jobs) != 2 {
				t.Fatalf("export: %d, %v", len(jobs), err)
			}
			slot := shot.Next.Add(2 * time.Second)
			if importFirst {
				if _, err := target.s.Import(ctx, "wecom:alice", jobs); err != nil {
					t.Fatal(err)
				}
			}
			// the slot comes while the files travel
			for _, h := range []*harness{old, target} {
				h.clock.Set(slot)
				h.step()
			}
			if !importFirst {
				// the import lands a few seconds later
				if _, err := target.s.Import(ctx, "wecom:alice", jobs); err != nil {
					t.Fatal(err)
				}
				target.clock.Set(slot.Add(30 * time.Second))
				target.step()
			}
			if importFirst {
				// the files' import fails (the target's quota): the move
				// is undone, the target's copy purged, the old box keeps
				// the user
				if _, err := target.s.Purge(ctx, "wecom:alice"); err != nil {
					t.Fatal(err)
				}
				if _, err := old.s.Release(ctx, "wecom:alice"); err != nil { // the undo releases the old box's jobs
					t.Fatal(err)
				}
			} else {
				// commit: the new box's jobs released, then the old
				// box's purge
				if _, err := target.s.Release(ctx, "wecom:alice"); err != nil {
					t.Fatal(err)
				}
				if _, err := old.s.Purge(ctx, "wecom:alice"); err != nil {
					t.Fatal(err)
				}
			}
			old.clock.Set(slot.Add(time.Minute))
			old.step()
			target.clock.Set(slot.Add(time.Minute))
			target.step()

			count := map[string]int{}
			for _, m := range append(old.out.all(), target.out.all()...) {
				count[m.Text]++
			}
			if count["call mum"] != 1 || count["daily standup"] != 1 {
				t.Fatalf("across both boxes: %v (old sent %+v, new sent %+v); want each once", count, old.out.all(), target.out.all())
			}
		})
	}
}
