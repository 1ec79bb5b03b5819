package fleet_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"agent/pkg/fleet"
	"agent/pkg/fleet/natstest"
)

// movesLocal is a box that also says what it holds of a conversation and
// holds (and releases) its "jobs" as a move's export does.
type movesLocal struct {
	*box
	mu       sync.Mutex
	held     map[string]bool // conversation -> jobs held
	released []string
	failImp  bool
}

func newMovesLocal(b *box) *movesLocal { return &movesLocal{box: b, held: map[string]bool{}} }

func (m *movesLocal) Export(ctx context.Context, ch, conv string) ([]byte, error) {
	m.mu.Lock()
	m.held[conv] = true
	m.mu.Unlock()
	return m.box.Export(ctx, ch, conv)
}

func (m *movesLocal) Import(ctx context.Context, ch, conv string, snap []byte) error {
	if err := m.box.Import(ctx, ch, conv, snap); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held[conv] = true
	if m.failImp {
		return errors.New("import refused (a quota)")
	}
	return nil
}

func (m *movesLocal) Holds(_ context.Context, _, conv string) (bool, error) {
	m.box.mu.Lock()
	defer m.box.mu.Unlock()
	return len(m.box.mem[conv]) > 0, nil
}

func (m *movesLocal) Release(_ context.Context, _, conv string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[conv] {
		delete(m.held, conv)
		m.released = append(m.released, conv)
	}
	return nil
}

func (m *movesLocal) Held(context.Context) ([]fleet.Conversation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []fleet.Conversation
	for c := range m.held {
		out = append(out, fleet.Conversation{Channel: "wecom", Conv: c})
	}
	return out, nil
}

func (m *movesLocal) isHeld(conv string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[conv]
}

// A committed move releases the jobs on the new box (the old box's are
// purged with the rest); an undone one releases them on the old box, and
// purges the new box's copy only when the new box held nothing of the
// user before (what it had stays); jobs left held on the box a user is
// homed on, with no move running (its coordinator died after the
// export, and the entry was put back), are released by its heartbeat.
func TestMovesHoldAndRelease(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true, Heartbeat: 100 * time.Millisecond})
	b := newBox(t, srv.URL(), "b", fleet.Config{Heartbeat: 100 * time.Millisecond})
	la, lb := newMovesLocal(a), newMovesLocal(b)
	startLocal(a, la)
	startLocal(b, lb)
	t.Cleanup(func() { stopBox(a); stopBox(b) })
	waitBoxes(t, a.f, 2)
	ctx := context.Background()
	for _, c := range []string{"u", "v"} {
		publish(t, a.f, c, c+"-1")
	}
	eventually(t, "a took both", func() bool { return len(a.keys("u")) == 1 && len(a.keys("v")) == 1 })

	// Committed: released on b, nothing left held on a.
	if _, err := a.f.Move(ctx, "wecom", "u", "b"); err != nil {
		t.Fatal(err)
	}
	if lb.isHeld("u") || !slices.Contains(lb.released, "u") {
		t.Fatalf("b after the move: held %v, released %v", lb.isHeld("u"), lb.released)
	}

	// Undone on a box that held nothing of v: its copy goes, and a
	// releases v's jobs.
	lb.failImp = true
	if _, err := a.f.Move(ctx, "wecom", "v", "b"); err == nil {
		t.Fatal("the move succeeded with the import refused")
	}
	b.mu.Lock()
	copyOnB := len(b.mem["v"])
	b.mu.Unlock()
	if copyOnB != 0 || la.isHeld("v") {
		t.Fatalf("after the undone move: b keeps %d of v, a holds v's jobs: %v", copyOnB, la.isHeld("v"))
	}

	// Undone on a box that held v before (an earlier stay): what it had
	// stays.
	b.mu.Lock()
	b.mem["v"] = []string{"from-an-earlier-stay"}
	b.mu.Unlock()
	if _, err := a.f.Move(ctx, "wecom", "v", "b"); err == nil {
		t.Fatal("the move succeeded with the import refused")
	}
	b.mu.Lock()
	kept := slices.Contains(b.mem["v"], "from-an-earlier-stay")
	b.mu.Unlock()
	if !kept {
		t.Fatal("an undone move deleted what the target held before it")
	}

	// Left held (the coordinator died after the export; the entry was
	// put back): the heartbeat releases them.
	lb.failImp = false
	la.mu.Lock()
	la.held["v"] = true // as its export left it
	la.mu.Unlock()
	if _, err := a.f.SetHome(ctx, "wecom", "v", "a"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's heartbeat releases v's jobs (v is homed on a, no move running)", func() bool { return !la.isHeld("v") })
}
