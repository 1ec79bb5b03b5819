package fleet

import (
	"context"
	"testing"

	"agent/pkg/fleet/natstest"
)

// A home entry read from the bucket's leader: its value and revision as
// the KV API writes them, none for a key never written, none for a key
// deleted or purged by hand (the ingress's rule then applies), and an
// error for a value the fleet did not write.
func TestReadHomeFromTheLeader(t *testing.T) {
	srv := natstest.Start(t)
	f := setUp(t, Config{URL: srv.URL(), Box: "a", Ingress: true})
	ctx := context.Background()
	if _, _, ok, err := f.home(ctx, "wecom.nobody"); ok || err != nil {
		t.Fatalf("a key never written: %v, %v", ok, err)
	}
	rev, err := f.homes.Put(ctx, "wecom.bob", []byte(`{"box":"b","since":7,"from":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	h, got, ok, err := f.home(ctx, "wecom.bob")
	if err != nil || !ok || got != rev || h.Box != "b" || h.Since != 7 || h.From != "a" {
		t.Fatalf("read %+v rev %d (want %d), %v, %v", h, got, rev, ok, err)
	}
	if err := f.homes.Delete(ctx, "wecom.bob"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := f.home(ctx, "wecom.bob"); ok || err != nil {
		t.Fatalf("a deleted key: %v, %v", ok, err)
	}
	f.homes.Put(ctx, "wecom.carol", []byte(`{"box":"c"}`))
	if err := f.homes.Purge(ctx, "wecom.carol"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := f.home(ctx, "wecom.carol"); ok || err != nil {
		t.Fatalf("a purged key: %v, %v", ok, err)
	}
	f.homes.Put(ctx, "wecom.dave", []byte(`{"box":"../x"}`))
	if _, _, ok, err := f.home(ctx, "wecom.dave"); ok || err == nil {
		t.Fatalf("a value the fleet did not write: %v, %v", ok, err)
	}
}

// A box that starts while a coordinator checks what it has settled (its
// consumer created and its first heartbeat written between the
// coordinator's two reads) is not taken for retired: its unread messages
// are not given up (seen in CI as a message of a lagging box answered by
// nobody after a move).
func TestSettledUpToABoxStartingMeanwhile(t *testing.T) {
	srv := natstest.Start(t)
	f := setUp(t, Config{URL: srv.URL(), Box: "b", Ingress: true})
	ctx := context.Background()
	if ok, err := f.settledUpTo(ctx, "a", 5); ok || err != nil {
		t.Fatalf("a box never started: settled %v, %v", ok, err)
	}
	a := setUp(t, Config{URL: srv.URL(), Box: "a"})
	f.betweenReads = func() { // a starts: its consumer, then its heartbeat
		if _, err := a.js.CreateOrUpdateConsumer(ctx, StreamName, a.consumerConfig()); err != nil {
			t.Error(err)
		}
		a.beat(ctx)
	}
	if ok, err := f.settledUpTo(ctx, "a", 5); ok || err != nil {
		t.Fatalf("a box that started during the check: settled %v, %v (its messages given up)", ok, err)
	}
	// Retired by hand (its consumer removed, its heartbeat left): given up.
	f.betweenReads = nil
	if err := a.js.DeleteConsumer(ctx, StreamName, a.consumerName()); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.settledUpTo(ctx, "a", 5); !ok || err != nil {
		t.Fatalf("a retired box: settled %v, %v", ok, err)
	}
}

// setUp is a box connected, its stream and buckets set up, closed at the
// test's end.
func setUp(t *testing.T, cfg Config) *Fleet {
	t.Helper()
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	if err := f.ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f
}
