package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"agent/pkg/fleet"
	"agent/pkg/fleet/natstest"
)

// A box serves a call; another calls it by name, or whichever box serves
// it; errors come back as the serving box said them (permanent or not);
// nobody serving, or a bad name, is an error at once.
func TestCalls(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	echo := func(_ context.Context, data []byte) ([]byte, error) {
		switch string(data) {
		case "refuse":
			return nil, fmt.Errorf("%w: never", fleet.ErrPermanent)
		case "later":
			return nil, errors.New("not now")
		}
		return append([]byte("a:"), data...), nil
	}
	if err := a.f.Serve(ctx, "echo", true, echo); err != nil {
		t.Fatal(err)
	}
	if err := a.f.Serve(ctx, "Bad.Name", false, echo); !errors.Is(err, fleet.ErrBadName) {
		t.Fatalf("a service named with a dot: %v", err)
	}
	eventually(t, "connected", func() bool {
		got, err := b.f.Call(ctx, "a", "echo", []byte("hi"))
		return err == nil && string(got) == "a:hi"
	})
	if got, err := b.f.Call(ctx, "", "echo", []byte("any")); err != nil || string(got) != "a:any" {
		t.Fatalf("shared call: %q, %v", got, err)
	}
	var ce *fleet.CallError
	if _, err := b.f.Call(ctx, "a", "echo", []byte("refuse")); !errors.As(err, &ce) || !ce.Permanent || ce.Box != "a" {
		t.Fatalf("a permanent refusal came back as %v", err)
	}
	if _, err := b.f.Call(ctx, "a", "echo", []byte("later")); !errors.As(err, &ce) || ce.Permanent || ce.Msg != "not now" {
		t.Fatalf("a passing failure came back as %v", err)
	}
	if _, err := b.f.Call(ctx, "b", "echo", []byte("x")); !errors.Is(err, fleet.ErrUnavailable) {
		t.Fatalf("a call to a box that does not serve it: %v", err)
	}
	if _, err := b.f.Call(ctx, "a.b", "echo", nil); !errors.Is(err, fleet.ErrBadName) {
		t.Fatalf("a call to a box named with a dot: %v", err)
	}
	// Served no more after its context ends.
	cancel()
	eventually(t, "unsubscribed", func() bool {
		_, err := b.f.Call(context.Background(), "a", "echo", []byte("x"))
		return errors.Is(err, fleet.ErrUnavailable)
	})
}

// A box flooded with calls refuses those beyond its bound at once (the
// callers retry) instead of queuing goroutines without end.
func TestCallsBounded(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	var mu sync.Mutex
	running := 0
	if err := a.f.Serve(ctx, "up", false, func(context.Context, []byte) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.f.Serve(ctx, "slow", false, func(context.Context, []byte) ([]byte, error) {
		mu.Lock()
		running++
		mu.Unlock()
		<-release
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "connected", func() bool {
		_, err := b.f.Call(ctx, "a", "up", nil)
		return err == nil
	})
	var wg sync.WaitGroup
	var busy, ok sync.Map
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
			defer ccancel()
			_, err := b.f.Call(cctx, "a", "slow", nil)
			var ce *fleet.CallError
			if errors.As(err, &ce) {
				busy.Store(i, true)
			} else if err == nil {
				ok.Store(i, true)
			}
		}()
	}
	eventually(t, "the bound reached", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running == 64
	})
	eventually(t, "the rest refused", func() bool {
		n := 0
		busy.Range(func(any, any) bool { n++; return true })
		return n == 36
	})
	close(release)
	wg.Wait()
	n := 0
	ok.Range(func(any, any) bool { n++; return true })
	if n != 64 {
		t.Fatalf("%d calls answered, want the 64 within the bound", n)
	}
}

// A message published for another channel of the conversation (Via)
// goes to that channel's handler on the conversation's home box, in the
// conversation's order with its own channel's messages; the same key in
// the two channels is two messages. A Via no channel can be named is
// dropped, not held.
func TestPublishVia(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	var mu sync.Mutex
	var bot []string
	b.f.Handle("wecom_bot", func(_ context.Context, conv string, payload []byte) error {
		var m msg
		if err := json.Unmarshal(payload, &m); err != nil || m.Conv != conv {
			return fmt.Errorf("%w: %q", fleet.ErrRejected, payload)
		}
		mu.Lock()
		bot = append(bot, m.Key)
		mu.Unlock()
		b.mu.Lock()
		b.got[conv] = append(b.got[conv], "bot:"+m.Key)
		b.mu.Unlock()
		return nil
	})
	a.start()
	b.start()
	ctx := context.Background()
	waitBoxes(t, a.f, 2)
	if _, err := a.f.SetHome(ctx, "wecom", "bob", "b"); err != nil {
		t.Fatal(err)
	}
	via := func(key string) {
		payload, _ := json.Marshal(msg{Conv: "bob", Key: key})
		if fresh, err := a.f.PublishVia(ctx, "wecom_bot", "wecom", "bob", key, payload); err != nil || !fresh {
			t.Fatalf("publish via the bot %s: %v, %v", key, fresh, err)
		}
	}
	publish(t, a.f, "bob", "k1")
	via("k1") // the same key in another channel: another message
	publish(t, a.f, "bob", "k2")
	via("k3")
	if _, err := a.f.PublishVia(ctx, "no.such", "wecom", "bob", "k4", []byte("{}")); !errors.Is(err, fleet.ErrBadName) {
		t.Fatalf("a via with a dot: %v", err)
	}
	// Written by hand on the stream: a Via the fleet would never write.
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	m := nats.NewMsg("agent.inbox.wecom.bob")
	m.Header.Set("Agent-Via", "x y")
	m.Data, _ = json.Marshal(msg{Conv: "bob", Key: "junk"})
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	publish(t, a.f, "bob", "k5")
	eventually(t, "all of bob's on b", func() bool { return len(b.keys("bob")) == 5 })
	time.Sleep(300 * time.Millisecond)
	if got, want := b.keys("bob"), []string{"k1", "bot:k1", "k2", "bot:k3", "k5"}; !slices.Equal(got, want) {
		t.Fatalf("b took %v, want %v", got, want)
	}
	if len(a.keys("bob")) != 0 {
		t.Fatal("the ingress took a message of a user homed elsewhere")
	}
}

// A message for a channel that does not run on its home box waits (it is
// not lost), and the box says why: Holding reports HoldNoChannel.
func TestNoChannelHolds(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true, DefaultHome: "b"})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	a.start()
	b.start()
	ctx := context.Background()
	payload, _ := json.Marshal(msg{Conv: "carol", Key: "c1"})
	if _, err := a.f.PublishVia(ctx, "wecom_bot", "wecom", "carol", "c1", payload); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b holds the message", func() bool {
		hk, why, _ := b.f.Holding()
		return hk == "wecom.carol" && why == fleet.HoldNoChannel
	})
	if hk, _, _ := a.f.Holding(); hk != "" {
		t.Fatalf("a box the conversation is not homed on holds %s", hk)
	}
}
