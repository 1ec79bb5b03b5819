package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"agent/pkg/fleet"
	"agent/pkg/fleet/natstest"
)

// startLocal is box.start with another Local (Drained, Import... under the
// test's control); the handler is the box's.
func startLocal(b *box, local fleet.Local) {
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan struct{})
	b.f.Handle("wecom", func(hctx context.Context, conv string, payload []byte) error {
		var m msg
		if err := json.Unmarshal(payload, &m); err != nil || m.Key == "" || m.Conv != conv {
			return fmt.Errorf("%w: %q", fleet.ErrRejected, payload)
		}
		b.mu.Lock()
		if !b.seen[m.Key] {
			b.seen[m.Key] = true
			b.got[m.Conv] = append(b.got[m.Conv], m.Key)
			b.mem[m.Conv] = append(b.mem[m.Conv], m.Key)
		}
		b.mu.Unlock()
		return nil
	})
	go func() {
		defer close(b.done)
		b.f.Run(ctx, local)
	}()
}

// gatedLocal is a box whose Drained and Import the test controls.
type gatedLocal struct {
	*box
	drained     atomic.Bool
	importDelay time.Duration
	imported    atomic.Int32
}

func (g *gatedLocal) Drained(context.Context, string, string) (bool, error) {
	return g.drained.Load(), nil
}

func (g *gatedLocal) Import(ctx context.Context, ch, conv string, snap []byte) error {
	if g.importDelay > 0 {
		time.Sleep(g.importDelay) // a big snapshot, a slow SD card
	}
	err := g.box.Import(ctx, ch, conv, snap)
	if err == nil {
		g.imported.Add(1)
	}
	return err
}

// stopBox stops a box started with start or startLocal.
func stopBox(b *box) {
	if b.cancel != nil {
		b.cancel()
		<-b.done
	}
}

func rawJS(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func waitBoxes(t *testing.T, f *fleet.Fleet, n int) {
	t.Helper()
	eventually(t, "heartbeats", func() bool {
		v, err := f.Status(context.Background())
		return err == nil && len(v.Boxes) >= n
	})
}

func homeOf(t *testing.T, f *fleet.Fleet, conv string) (fleet.Home, bool) {
	t.Helper()
	v, err := f.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range v.Homes {
		if h.Conv == conv {
			return h.Home, true
		}
	}
	return fleet.Home{}, false
}

// While one conversation is being moved between boxes a and b (its old
// box waits for a turn to finish: up to drainTimeout, 3 minutes), a third
// box c, which has nothing to do with the move, must go on answering its
// own users. Every box's consumer waits on the moving conversation's new
// message instead (head-of-line blocking across the whole fleet).
func TestMoveStallsUnrelatedBoxes(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	c := newBox(t, srv.URL(), "c", fleet.Config{})
	ga := &gatedLocal{box: a} // a's turn of "mover" is still running
	startLocal(a, ga)
	t.Cleanup(func() { stopBox(a) })
	b.start()
	c.start()
	t.Cleanup(func() { stopBox(b) })
	t.Cleanup(func() { stopBox(c) })
	waitBoxes(t, a.f, 3)
	ctx := context.Background()
	publish(t, a.f, "mover", "mover-0")
	if _, err := a.f.SetHome(ctx, "wecom", "other", "c"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a took mover-0", func() bool { return len(a.keys("mover")) == 1 })

	moved := make(chan error, 1)
	go func() {
		_, err := a.f.Move(ctx, "wecom", "mover", "b")
		moved <- err
	}()
	t.Cleanup(func() { ga.drained.Store(true); <-moved })
	eventually(t, "the move started", func() bool {
		h, ok := homeOf(t, a.f, "mover")
		return ok && h.Moving
	})
	publish(t, a.f, "mover", "mover-1") // waits for the move, as designed
	publish(t, a.f, "other", "other-1") // another user, another box
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if len(c.keys("other")) == 1 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("box c did not take its own user's message within 5 s while an unrelated conversation was moving between a and b (got %v)", c.keys("other"))
}

// A move whose mover died after switching the home to Moving (the admin
// box restarted mid-move, or "putting the old home back failed") leaves
// the entry Moving. Nothing repairs it by itself: the boxes involved (the
// old and the new home) hold the conversation's next message, and with it
// every later message of all their other users, until an operator notices
// and runs `agentctl fleet home` (refused before staleAfter, 6 minutes).
// Here the entry is already 7 minutes old, i.e. past staleAfter.
func TestStaleMovingEntryStallsInvolvedBoxes(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	a.start()
	b.start()
	t.Cleanup(func() { stopBox(a) })
	t.Cleanup(func() { stopBox(b) })
	waitBoxes(t, a.f, 2)
	publish(t, a.f, "stuck", "stuck-0")
	eventually(t, "a took stuck-0", func() bool { return len(a.keys("stuck")) == 1 })
	_, js := rawJS(t, srv.URL())
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, fleet.HomesBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := js.Stream(ctx, fleet.StreamName)
	info, _ := st.Info(ctx)
	// What Move writes first; its mover then died, 7 minutes ago.
	raw, _ := json.Marshal(fleet.Home{Box: "b", Since: info.State.LastSeq + 1, From: "a", Moving: true, At: time.Now().Add(-7 * time.Minute).UTC()})
	if _, err := kv.Put(ctx, fleet.HomeKey("wecom", "stuck"), raw); err != nil {
		t.Fatal(err)
	}
	publish(t, a.f, "stuck", "stuck-1")
	publish(t, a.f, "fine", "fine-1") // another user homed on a
	time.Sleep(3 * time.Second)
	stalled := len(a.keys("fine")) == 0
	_, setErr := a.f.SetHome(ctx, "wecom", "stuck", "a") // the operator's repair
	if setErr != nil {
		t.Errorf("`agentctl fleet home` on a stale Moving entry: %v", setErr)
	}
	if stalled {
		t.Errorf("a stale Moving entry (past staleAfter) holds box a's other users until an operator repairs it by hand")
	}
}

// One unreadable value in agent_homes (a hand edit gone wrong, a peer of
// another version) stops every box of the fleet for good: handle retries
// the home read forever, and with MaxAckPending 1 nothing behind it is
// delivered.
func TestCorruptHomeStallsTheFleet(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	a.start()
	t.Cleanup(func() { stopBox(a) })
	publish(t, a.f, "good", "good-0")
	eventually(t, "a took good-0", func() bool { return len(a.keys("good")) == 1 })
	_, js := rawJS(t, srv.URL())
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, fleet.HomesBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, fleet.HomeKey("wecom", "bad"), []byte(`{"box":"no such box!"}`)); err != nil {
		t.Fatal(err)
	}
	subj, _ := fleet.Subject("wecom", "bad")
	if _, err := js.Publish(ctx, subj, []byte(`{"conv":"bad","key":"bad-1"}`)); err != nil {
		t.Fatal(err)
	}
	publish(t, a.f, "good", "good-1")
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if len(a.keys("good")) == 2 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("one corrupt home entry stopped the box: good-1 never delivered (%v)", a.keys("good"))
}

// Box a is down with messages of its user waiting in the stream. The
// operator homes the user on b (SetHome: messages before Since stay a's),
// then on c. The second switch must not make a's waiting messages b's
// (b skipped them): refused until a has read them, or kept as a's. Every
// message is answered exactly once in the end.
func TestSecondSetHomeLosesMessagesOfALaggingBox(t *testing.T) {
	srv := natstest.Start(t)
	b := newBox(t, srv.URL(), "b", fleet.Config{Ingress: true, DefaultHome: "a"})
	c := newBox(t, srv.URL(), "c", fleet.Config{})
	a := newBox(t, srv.URL(), "a", fleet.Config{}) // down for now
	b.start()
	c.start()
	t.Cleanup(func() { stopBox(b) })
	t.Cleanup(func() { stopBox(c) })
	waitBoxes(t, b.f, 2)
	ctx := context.Background()
	publish(t, b.f, "u", "u-1") // homed on a (down)
	publish(t, b.f, "u", "u-2")
	if _, err := b.f.SetHome(ctx, "wecom", "u", "b"); err != nil {
		t.Fatal(err)
	}
	publish(t, b.f, "u", "u-3")
	eventually(t, "b took u-3", func() bool { return len(b.keys("u")) == 1 })
	_, err := b.f.SetHome(ctx, "wecom", "u", "c")
	a.start() // a is back
	t.Cleanup(func() { stopBox(a) })
	if err != nil { // refused while a has not read its messages: try again
		eventually(t, "rehomed on c once a caught up", func() bool {
			_, err := b.f.SetHome(ctx, "wecom", "u", "c")
			return err == nil
		})
	}
	publish(t, b.f, "u", "u-4")
	eventually(t, "c took u-4", func() bool { return len(c.keys("u")) == 1 })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(a.keys("u"))+len(b.keys("u"))+len(c.keys("u")) < 4 {
		time.Sleep(20 * time.Millisecond)
	}
	all := append(append(a.keys("u"), b.keys("u")...), c.keys("u")...)
	slices.Sort(all)
	if !slices.Equal(all, []string{"u-1", "u-2", "u-3", "u-4"}) {
		t.Fatalf("messages of u answered: a %v, b %v, c %v: some were answered by nobody", a.keys("u"), b.keys("u"), c.keys("u"))
	}
}

// The same with Move: b is asked to settle, not a, whose messages before
// the first switch would be reassigned to b by the second entry.
func TestMoveAfterSetHomeLosesMessagesOfALaggingBox(t *testing.T) {
	srv := natstest.Start(t)
	b := newBox(t, srv.URL(), "b", fleet.Config{Ingress: true, DefaultHome: "a"})
	c := newBox(t, srv.URL(), "c", fleet.Config{})
	a := newBox(t, srv.URL(), "a", fleet.Config{})
	b.start()
	c.start()
	t.Cleanup(func() { stopBox(b) })
	t.Cleanup(func() { stopBox(c) })
	waitBoxes(t, b.f, 2)
	ctx := context.Background()
	publish(t, b.f, "u", "u-1") // homed on a (down)
	if _, err := b.f.SetHome(ctx, "wecom", "u", "b"); err != nil {
		t.Fatal(err)
	}
	publish(t, b.f, "u", "u-2")
	eventually(t, "b took u-2", func() bool { return len(b.keys("u")) == 1 })
	_, err := b.f.Move(ctx, "wecom", "u", "c")
	a.start()
	t.Cleanup(func() { stopBox(a) })
	if err != nil {
		eventually(t, "moved to c once a caught up", func() bool {
			_, err := b.f.Move(ctx, "wecom", "u", "c")
			return err == nil
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(a.keys("u"))+len(b.keys("u"))+len(c.keys("u")) < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	all := append(append(a.keys("u"), b.keys("u")...), c.keys("u")...)
	slices.Sort(all)
	if !slices.Equal(all, []string{"u-1", "u-2"}) {
		t.Fatalf("messages of u answered: a %v, b %v, c %v", a.keys("u"), b.keys("u"), c.keys("u"))
	}
}

// Box a died for good (its durable consumer stays, behind) with a message
// of u unread. The operator homes u on b: allowed. Later u must go to c
// (b is overloaded, or being replaced): refused for ever, "box a has not
// yet taken this conversation's messages", and agentctl has no way to
// accept the loss of a's unread message (no force, and deleting a's
// consumer by hand does not help either: a missing consumer counts as
// "not settled"). Every user rehomed off a dead box is pinned where it
// landed.
func TestDeadBoxPinsUsersRehomedOffIt(t *testing.T) {
	srv := natstest.Start(t)
	b := newBox(t, srv.URL(), "b", fleet.Config{Ingress: true, DefaultHome: "a"})
	c := newBox(t, srv.URL(), "c", fleet.Config{})
	a := newBox(t, srv.URL(), "a", fleet.Config{})
	a.start()
	b.start()
	c.start()
	t.Cleanup(func() { stopBox(b) })
	t.Cleanup(func() { stopBox(c) })
	waitBoxes(t, b.f, 3)
	ctx := context.Background()
	publish(t, b.f, "u", "u-0")
	eventually(t, "a took u-0", func() bool { return len(a.keys("u")) == 1 })
	stopBox(a) // gone for good
	publish(t, b.f, "u", "u-1")
	if _, err := b.f.SetHome(ctx, "wecom", "u", "b"); err != nil {
		t.Fatal(err)
	}
	publish(t, b.f, "u", "u-2")
	eventually(t, "b took u-2", func() bool { return len(b.keys("u")) == 1 })
	_, js := rawJS(t, srv.URL())
	js.DeleteConsumer(ctx, fleet.StreamName, "box_a") // the operator retires a
	_, setErr := b.f.SetHome(ctx, "wecom", "u", "c")
	_, moveErr := b.f.Move(ctx, "wecom", "u", "c")
	if setErr != nil && moveErr != nil {
		t.Fatalf("u can never leave b while dead box a is behind: home: %v; move: %v", setErr, moveErr)
	}
}

// SetHome (and Move) read the stream's last sequence, then switch the
// entry. A message stored in between is judged by each box against
// whichever entry it happens to read: the old box may take it (old entry)
// and the new box too (new entry: seq >= Since), or neither. Flip a
// conversation between two boxes while its messages arrive, each flip only
// once both boxes have read past the previous switch (so the "one From
// only" loss above plays no part): every message must be taken exactly
// once overall.
func TestSetHomeRaceDuplicatesOrLoses(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	a.start()
	b.start()
	t.Cleanup(func() { stopBox(a) })
	t.Cleanup(func() { stopBox(b) })
	_, js := rawJS(t, srv.URL())
	ctx := context.Background()
	publish(t, a.f, "r", "r-00000")
	eventually(t, "a took r-00000", func() bool { return len(a.keys("r")) == 1 })
	floor := func(box string) uint64 {
		c, err := js.Consumer(ctx, fleet.StreamName, "box_"+box)
		if err != nil {
			return 0
		}
		info, err := c.Info(ctx)
		if err != nil {
			return 0
		}
		return info.AckFloor.Stream
	}
	var stop atomic.Bool
	var sent []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; !stop.Load(); i++ {
			k := fmt.Sprintf("r-%05d", i)
			payload, _ := json.Marshal(msg{Conv: "r", Key: k})
			if _, err := a.f.Publish(ctx, "wecom", "r", k, payload); err == nil {
				sent = append(sent, k)
			}
			time.Sleep(publishPause)
		}
	}()
	to := "b"
	for range 60 {
		h, err := a.f.SetHome(ctx, "wecom", "r", to)
		if err != nil {
			t.Fatal(err)
		}
		to = map[string]string{"a": "b", "b": "a"}[to]
		eventually(t, "both boxes past the switch", func() bool { return floor("a") >= h.Since && floor("b") >= h.Since })
	}
	stop.Store(true)
	<-done
	sent = append([]string{"r-00000"}, sent...)
	eventually(t, "settled", func() bool {
		st, _ := js.Stream(ctx, fleet.StreamName)
		info, _ := st.Info(ctx)
		return floor("a") >= info.State.LastSeq && floor("b") >= info.State.LastSeq
	})
	count := map[string]int{}
	for _, k := range append(a.keys("r"), b.keys("r")...) {
		count[k]++
	}
	var dup, lost []string
	for _, k := range sent {
		switch count[k] {
		case 0:
			lost = append(lost, k)
		case 1:
		default:
			dup = append(dup, k)
		}
	}
	if len(dup) > 0 || len(lost) > 0 {
		t.Fatalf("%d messages, 60 switches: %d answered twice %v, %d by nobody %v", len(sent), len(dup), dup[:min(len(dup), 10)], len(lost), lost[:min(len(lost), 10)])
	}
}

// The mover gives up while the new box is importing (agentctl interrupted,
// the admin request's context ends): Move undoes the home, but the new box
// finishes the import, and nobody purges it. The user's memory and
// sessions now live on two boxes; a later move back to b merges the stale
// copy in (facts forgotten meanwhile come back, sessions are doubled).
func TestUndoAfterImportLeavesACopy(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	a.start()
	t.Cleanup(func() { stopBox(a) })
	gb := &gatedLocal{box: b, importDelay: 1500 * time.Millisecond}
	gb.drained.Store(true)
	startLocal(b, gb)
	t.Cleanup(func() { stopBox(b) })
	waitBoxes(t, a.f, 2)
	publish(t, a.f, "x", "x-1")
	eventually(t, "a took x-1", func() bool { return len(a.keys("x")) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	_, err := a.f.Move(ctx, "wecom", "x", "b")
	if err == nil {
		t.Skip("the move finished within the deadline")
	}
	time.Sleep(2 * time.Second) // b's import goes on
	h, _ := homeOf(t, a.f, "x")
	b.mu.Lock()
	leaked := len(b.mem["x"])
	b.mu.Unlock()
	if h.Box == "a" && leaked > 0 {
		t.Fatalf("move undone (%v; home %+v) but b imported and keeps %d entries of x's memory", err, h, leaked)
	}
}

// A configuration error in nats_url (one with a password) must not bring
// the password into the error the daemon logs and shows on /healthz.
func TestNewErrorHidesPassword(t *testing.T) {
	for _, u := range []string{
		"nats://agent:s3cret@bad host:4222",
		"nats://agent:s3cret@10.0.0.5:4222/%zz",
		"nats://agent:s3cret@[::1:4222",
	} {
		f, err := fleet.New(fleet.Config{URL: u, Box: "a", Options: []nats.Option{nats.Timeout(200 * time.Millisecond)}})
		if err == nil {
			f.Close()
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("fleet.New(%q): the error shows the password: %v", u, err)
		}
	}
}

// A box whose WeCom channel did not come up (wecom.enabled = false on it,
// or its Build failed: the daemon runs on without the channel) still runs
// the fleet's consumer and Terms every message homed on it: the users'
// messages are destroyed, not kept until the channel is back.
func TestBoxWithoutChannelDestroysItsUsersMessages(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true, DefaultHome: "b"})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	a.start()
	t.Cleanup(func() { stopBox(a) })
	// b runs the fleet without its channel's handler.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.f.Run(ctx, b) }()
	publish(t, a.f, "v", "v-1")
	time.Sleep(1500 * time.Millisecond)
	cancel()
	<-done
	// The channel is fixed; b starts again with it.
	b.start()
	t.Cleanup(func() { stopBox(b) })
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) && len(b.keys("v")) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if len(b.keys("v")) == 0 {
		t.Fatal("v-1, homed on b, was dropped for good while b's channel was down")
	}
}

// SetHome checks nothing about the box: a typo homes a user on a box that
// never existed, and the user's messages wait in the stream unanswered
// until MaxAge deletes them (Move refuses the same name).
func TestSetHomeOnABoxNeverSeen(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	a.start()
	t.Cleanup(func() { stopBox(a) })
	waitBoxes(t, a.f, 1)
	publish(t, a.f, "w", "w-1")
	if _, err := a.f.SetHome(context.Background(), "wecom", "w", "tpyo"); err == nil {
		t.Fatal("SetHome homed w on box tpyo, which the fleet has never seen")
	}
}

// Box b's replicas differ from the fleet's (the stream was made by another
// box with replicas = 1, or replicas was raised before `nats stream edit`,
// as the README says to do it): its durable consumer cannot be created, b
// retries forever, and nothing says so: Connected (the /healthz fleet
// check and agent_fleet_connected) stays true while b's users are never
// answered.
func TestConsumerFailureIsInvisible(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true, DefaultHome: "b"})
	b := newBox(t, srv.URL(), "b", fleet.Config{Replicas: 3})
	a.start()
	t.Cleanup(func() { stopBox(a) })
	publish(t, a.f, "z", "z-1") // the stream exists (R1)
	b.start()
	t.Cleanup(func() { stopBox(b) })
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(b.keys("z")) == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if len(b.keys("z")) == 0 && b.f.Connected() {
		t.Fatal("b cannot consume (its consumer is refused) yet reports itself connected and healthy")
	}
}

// Move has the same window as SetHome between reading the stream's last
// sequence and writing the Moving entry: a message stored in it is taken
// by the old box under the old entry and again by the new box after the
// commit (seq >= Since), or skipped by both.
func TestMoveRaceDuplicatesOrLoses(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	a.start()
	b.start()
	t.Cleanup(func() { stopBox(a) })
	t.Cleanup(func() { stopBox(b) })
	waitBoxes(t, a.f, 2)
	_, js := rawJS(t, srv.URL())
	ctx := context.Background()
	publish(t, a.f, "r", "r-00000")
	eventually(t, "a took r-00000", func() bool { return len(a.keys("r")) == 1 })
	floor := func(box string) uint64 {
		c, err := js.Consumer(ctx, fleet.StreamName, "box_"+box)
		if err != nil {
			return 0
		}
		info, err := c.Info(ctx)
		if err != nil {
			return 0
		}
		return info.AckFloor.Stream
	}
	var stop atomic.Bool
	var sent []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; !stop.Load(); i++ {
			k := fmt.Sprintf("r-%05d", i)
			payload, _ := json.Marshal(msg{Conv: "r", Key: k})
			if _, err := a.f.Publish(ctx, "wecom", "r", k, payload); err == nil {
				sent = append(sent, k)
			}
			time.Sleep(publishPause)
		}
	}()
	to := "b"
	for range 60 {
		res, err := a.f.Move(ctx, "wecom", "r", to)
		if err != nil {
			t.Fatal(err)
		}
		to = map[string]string{"a": "b", "b": "a"}[to]
		eventually(t, "both boxes past the switch", func() bool { return floor("a") >= res.Since && floor("b") >= res.Since })
	}
	stop.Store(true)
	<-done
	sent = append([]string{"r-00000"}, sent...)
	eventually(t, "settled", func() bool {
		st, _ := js.Stream(ctx, fleet.StreamName)
		info, _ := st.Info(ctx)
		return floor("a") >= info.State.LastSeq && floor("b") >= info.State.LastSeq
	})
	count := map[string]int{}
	for _, k := range append(a.keys("r"), b.keys("r")...) {
		count[k]++
	}
	var dup, lost []string
	for _, k := range sent {
		switch count[k] {
		case 0:
			lost = append(lost, k)
		case 1:
		default:
			dup = append(dup, k)
		}
	}
	if len(dup) > 0 || len(lost) > 0 {
		t.Fatalf("%d messages, 60 moves: %d answered twice %v, %d by nobody %v", len(sent), len(dup), dup[:min(len(dup), 10)], len(lost), lost[:min(len(lost), 10)])
	}
}

// NATS unreachable at start: Run's setup holds the setup lock through
// JetStream calls with the 5 s default timeout (Run's context has no
// deadline), and the ingress's Publish waits for that lock without looking
// at its own context: a callback given 1 s (the handler gives 3 s, WeCom 5)
// hangs for seconds past it.
func TestPublishWaitsPastItsDeadlineForSetup(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.URL()
	srv.Stop() // NATS down from the start
	a := newBox(t, url, "a", fleet.Config{Ingress: true})
	a.start()
	t.Cleanup(func() { stopBox(a) })
	time.Sleep(100 * time.Millisecond) // Run is in its setup
	var worst time.Duration
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		_, err := a.f.Publish(ctx, "wecom", "p", "p-1", []byte(`{"conv":"p","key":"p-1"}`))
		cancel()
		if err == nil {
			t.Fatal("published with NATS down")
		}
		worst = max(worst, time.Since(start))
	}
	if worst > 2*time.Second {
		t.Fatalf("Publish with a 1 s deadline took %s", worst)
	}
}
