package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"agent/pkg/fleet"
	"agent/pkg/fleet/natstest"
)

// msg is a test message: its conversation, key and order.
type msg struct {
	Conv string `json:"conv"`
	Key  string `json:"key"`
}

// box is a fleet box whose local inbox is a map (deduplicated by key, as
// the real inbox is by its unique key) and whose "memory" of a
// conversation is the keys it took in, exported and imported as JSON.
type box struct {
	t      *testing.T
	name   string
	f      *fleet.Fleet
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	seen  map[string]bool
	got   map[string][]string // conversation -> keys, in the order taken in
	mem   map[string][]string
	crash func(m msg) bool // true: stop the box after committing m, before its ack
}

func newBox(t *testing.T, url, name string, cfg fleet.Config) *box {
	t.Helper()
	cfg.URL, cfg.Box = url, name
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 200 * time.Millisecond
	}
	cfg.AckWait = 2 * time.Second
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("box", name)
	}
	f, err := fleet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	b := &box{t: t, name: name, f: f, seen: map[string]bool{}, got: map[string][]string{}, mem: map[string][]string{}}
	return b
}

func (b *box) start() {
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
		crash := b.crash != nil && b.crash(m)
		b.mu.Unlock()
		if crash {
			cancel() // committed, not acknowledged: a kill -9 here
		}
		return nil
	})
	done := b.done
	go func() {
		defer close(done)
		b.f.Run(ctx, b)
	}()
	// Stopped before the connection closes (cleanups run last first),
	// as the daemon does: a Run left going would beat on into later tests.
	b.t.Cleanup(func() {
		cancel()
		<-done
	})
}

func (b *box) keys(conv string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got[conv])
}

func (b *box) Drained(context.Context, string, string) (bool, error) { return true, nil }
func (b *box) Export(_ context.Context, _, conv string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return json.Marshal(b.mem[conv])
}
func (b *box) Import(_ context.Context, _, conv string, snap []byte) error {
	var keys []string
	if err := json.Unmarshal(snap, &keys); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mem[conv] = append(keys, b.mem[conv]...)
	return nil
}
func (b *box) Purge(_ context.Context, _, conv string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.mem, conv)
	return nil
}
func (b *box) Beat(context.Context) fleet.Beat { return fleet.Beat{Healthy: true} }

func publish(t *testing.T, f *fleet.Fleet, conv, key string) bool {
	t.Helper()
	payload, _ := json.Marshal(msg{Conv: conv, Key: key})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fresh, err := f.Publish(ctx, "wecom", conv, key, payload)
	if err != nil {
		t.Fatalf("publish %s: %v", key, err)
	}
	return fresh
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// Conversations are answered by their home box only, in order, each
// message once; a WeCom retry (same key) is a duplicate.
func TestHomesRouteMessages(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	a.start()
	b.start()
	ctx := context.Background()
	waitBoxes(t, a.f, 2) // homes go to boxes the fleet has seen
	if _, err := a.f.SetHome(ctx, "wecom", "bob", "b"); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"alice": seq("alice", 20), "bob": seq("bob", 20), "li.wei@corp": seq("li", 5)}
	for i := range 20 {
		for _, c := range []string{"alice", "bob", "li.wei@corp"} {
			if i < len(want[c]) && !publish(t, a.f, c, want[c][i]) {
				t.Fatalf("%s: first publish reported a duplicate", want[c][i])
			}
		}
	}
	if publish(t, a.f, "alice", want["alice"][3]) {
		t.Fatal("a retry of the same message was not a duplicate")
	}
	eventually(t, "all answered", func() bool {
		return len(a.keys("alice")) == 20 && len(b.keys("bob")) == 20 && len(a.keys("li.wei@corp")) == 5
	})
	time.Sleep(300 * time.Millisecond) // nothing more arrives
	if got := a.keys("alice"); !slices.Equal(got, want["alice"]) {
		t.Fatalf("a got alice's %v", got)
	}
	if got := b.keys("bob"); !slices.Equal(got, want["bob"]) {
		t.Fatalf("b got bob's %v", got)
	}
	if len(a.keys("bob")) != 0 || len(b.keys("alice")) != 0 || len(b.keys("li.wei@corp")) != 0 {
		t.Fatal("a conversation was answered by a box it is not homed on")
	}
	v, err := b.f.Status(ctx)
	if err != nil || len(v.Boxes) != 2 || len(v.Homes) != 3 {
		t.Fatalf("status %+v, %v", v, err)
	}
}

// A box killed mid-burst (after committing a message, before
// acknowledging it) and started again answers every message once; so does
// a box that was down while its messages arrived.
func TestBoxKilledMidBurst(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true, DefaultHome: "b"})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	a.start()
	b.crash = func(m msg) bool { return m.Key == "u-040" }
	b.start()
	want := seq("u", 100)
	for _, k := range want {
		publish(t, a.f, "u", k)
	}
	<-b.done // killed at u-040
	n := len(b.keys("u"))
	if n < 41 || n == 100 {
		t.Fatalf("b took %d before its kill", n)
	}
	for _, k := range seq("v", 30) { // while b is down
		publish(t, a.f, "u", k)
	}
	b.crash = nil
	b.start()
	want = append(want, seq("v", 30)...)
	eventually(t, "b catches up", func() bool { return len(b.keys("u")) == len(want) })
	time.Sleep(300 * time.Millisecond)
	if got := b.keys("u"); !slices.Equal(got, want) {
		t.Fatalf("after the restart b has %d messages, order or count wrong: %v", len(got), got)
	}
}

// A NATS node of a three-node cluster dies during a burst: nothing
// acknowledged is lost.
func TestClusterNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster")
	}
	c := natstest.StartCluster(t)
	a := newBox(t, c.URLs(), "a", fleet.Config{Ingress: true, Replicas: 3, DefaultHome: "b"})
	b := newBox(t, c.URLs(), "b", fleet.Config{Replicas: 3})
	a.start()
	b.start()
	eventually(t, "fleet set up", func() bool { return a.f.Connected() && b.f.Connected() })
	var acked []string
	for i, k := range seq("w", 60) {
		if i == 20 {
			c.Nodes[0].Stop()
		}
		payload, _ := json.Marshal(msg{Conv: "w", Key: k})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := a.f.Publish(ctx, "wecom", "w", k, payload)
		cancel()
		if err == nil {
			acked = append(acked, k)
		} else if !errors.Is(err, fleet.ErrUnavailable) {
			t.Fatalf("publish %s: %v", k, err)
		}
	}
	if len(acked) < 50 {
		t.Fatalf("only %d of 60 publishes acknowledged with two of three nodes up", len(acked))
	}
	eventually(t, "b answers every acknowledged message", func() bool {
		got := b.keys("w")
		for _, k := range acked {
			if !slices.Contains(got, k) {
				return false
			}
		}
		return true
	})
	got := b.keys("w")
	if !slices.IsSorted(got) {
		t.Fatalf("order lost: %v", got)
	}
}

// A conversation moves while its messages keep arriving: its memory goes
// with it, the old box keeps none, and the two boxes together took every
// message once, in order (the old box up to the switch, the new one after).
func TestMoveWhileMessagesArrive(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	a.start()
	b.start()
	eventually(t, "heartbeats", func() bool {
		v, err := a.f.Status(context.Background())
		return err == nil && len(v.Boxes) == 2
	})
	want := seq("m", 200)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, k := range want {
			publish(t, a.f, "mover", k)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	eventually(t, "some answered on a", func() bool { return len(a.keys("mover")) > 30 })
	res, err := a.f.Move(context.Background(), "wecom", "mover", "b")
	if err != nil {
		t.Fatal(err)
	}
	<-done
	eventually(t, "all answered", func() bool { return len(a.keys("mover"))+len(b.keys("mover")) >= len(want) })
	time.Sleep(300 * time.Millisecond)
	onA, onB := a.keys("mover"), b.keys("mover")
	if len(onB) == 0 || len(onA) == 0 {
		t.Fatalf("a took %d, b %d: the move did not split the stream", len(onA), len(onB))
	}
	if got := append(slices.Clone(onA), onB...); !slices.Equal(got, want) {
		t.Fatalf("order or count broken across the move (since %d): a %v, b %v", res.Since, onA, onB)
	}
	b.mu.Lock()
	mem := slices.Clone(b.mem["mover"])
	b.mu.Unlock()
	if !slices.Equal(mem, want) {
		t.Fatalf("b's memory of mover is not a's followed by its own: %v", mem)
	}
	a.mu.Lock()
	left := len(a.mem["mover"])
	a.mu.Unlock()
	if left != 0 {
		t.Fatalf("a kept %d of the moved memory", left)
	}
	// A second move back works too, and moving to a box that is not up
	// is refused without touching the home.
	if _, err := a.f.Move(context.Background(), "wecom", "mover", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.f.Move(context.Background(), "wecom", "mover", "nobox"); err == nil {
		t.Fatal("a move to a box never seen succeeded")
	}
}

// NATS down: the ingress cannot persist and says so (the WeCom handler
// then refuses, and WeCom retries); nothing hangs past the caller's
// deadline.
func TestPublishRefusedWhileNATSDown(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	a.start()
	publish(t, a.f, "x", "x-1")
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	_, err := a.f.Publish(ctx, "wecom", "x", "x-2", []byte(`{"conv":"x","key":"x-2"}`))
	if !errors.Is(err, fleet.ErrUnavailable) {
		t.Fatalf("publish with NATS down: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("publish took %s past its deadline", d)
	}
	srv.Restart()
	eventually(t, "publish again", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := a.f.Publish(ctx, "wecom", "x", "x-3", []byte(`{"conv":"x","key":"x-3"}`))
		return err == nil
	})
}

// Junk on the fleet's subjects (a peer with the account's credentials
// gone wrong) is dropped; the box goes on with the next message.
func TestJunkDoesNotStopTheBox(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	a.start()
	publish(t, a.f, "y", "y-1")
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := nc.JetStream()
	for _, s := range []struct{ subj, data string }{
		{"agent.inbox.wecom.=ZZ", `{}`},
		{"agent.inbox.wecom.y", `not json`},
		{"agent.inbox.nochannel.y", `{"conv":"y","key":"y-x"}`},
	} {
		if _, err := js.Publish(s.subj, []byte(s.data)); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, a.f, "y", "y-2")
	eventually(t, "y-2 after the junk", func() bool { return len(a.keys("y")) == 2 })
}

func TestNames(t *testing.T) {
	for _, conv := range []string{"zhangsan", "li.wei@corp", "a b", "=3D", "中文", "x>y*z"} {
		subj, err := fleet.Subject("wecom", conv)
		if err != nil {
			t.Fatal(err)
		}
		ch, got, err := fleet.ParseSubject(subj)
		if err != nil || ch != "wecom" || got != conv {
			t.Fatalf("%q -> %q -> %q %q %v", conv, subj, ch, got, err)
		}
		if ch, got, err := fleet.ParseHomeKey(fleet.HomeKey("wecom", conv)); err != nil || ch != "wecom" || got != conv {
			t.Fatalf("home key of %q: %q %q %v", conv, ch, got, err)
		}
	}
	for _, bad := range []string{"agent.inbox.wecom", "agent.inbox.wecom.a.b", "agent.inbox.wecom.=3", "agent.inbox.wecom.=3d", "other.wecom.a", "agent.inbox..a"} {
		if _, _, err := fleet.ParseSubject(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
	for _, b := range []string{"", "a.b", "a b", "*", ">", "toolongtoolongtoolongtoolongtoolong1"} {
		if fleet.ValidBox(b) {
			t.Fatalf("box %q accepted", b)
		}
	}
}

func FuzzParseSubject(f *testing.F) {
	f.Add("agent.inbox.wecom.li=2Ewei")
	f.Add("agent.inbox.wecom.=E4=B8=AD")
	f.Fuzz(func(t *testing.T, s string) {
		ch, conv, err := fleet.ParseSubject(s)
		if err != nil {
			return
		}
		back, err := fleet.Subject(ch, conv)
		if err != nil || back != s {
			t.Fatalf("%q parsed to %q %q, which makes %q (%v)", s, ch, conv, back, err)
		}
	})
}

// Every box that beats is in every view, even while all of them rewrite
// their heartbeats during the listing (a listing by KV watcher lost one
// within a few views, on the embedded server and on 2.9 alike).
func TestStatusListsEveryBeatingBox(t *testing.T) {
	srv := natstest.Start(t)
	var boxes []*box
	for i := range 4 {
		b := newBox(t, srv.URL(), fmt.Sprintf("box%d", i), fleet.Config{Ingress: i == 0, Heartbeat: 2 * time.Millisecond})
		b.start()
		boxes = append(boxes, b)
	}
	waitBoxes(t, boxes[0].f, 4)
	for i := range 100 {
		v, err := boxes[i%4].f.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Boxes) != 4 {
			t.Fatalf("view %d of %s: %d boxes: %+v", i, v.Box, len(v.Boxes), v.Boxes)
		}
	}
}
