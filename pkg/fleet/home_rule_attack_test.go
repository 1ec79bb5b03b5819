package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"agent/pkg/fleet"
	"agent/pkg/fleet/natstest"
)

// A corrupt (or deleted) home entry routes "by the ingress's rule", but
// each box applies the rule with its OWN default_home: the ingress (a,
// default_home = "b", as the README's fleet would set it) says b, while b
// (default_home unset: only the ingress's setting means anything) says the
// ingress, a. Each acks the message as the other's: nobody answers it.
func TestBadHomeRuleDiffersPerBox(t *testing.T) {
	srv := natstest.Start(t)
	a := newBox(t, srv.URL(), "a", fleet.Config{Ingress: true, DefaultHome: "b"})
	b := newBox(t, srv.URL(), "b", fleet.Config{})
	a.start()
	b.start()
	t.Cleanup(func() { stopBox(a) })
	t.Cleanup(func() { stopBox(b) })
	publish(t, a.f, "q", "q-1") // homed on b
	eventually(t, "b took q-1", func() bool { return len(b.keys("q")) == 1 })
	_, js := rawJS(t, srv.URL())
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, fleet.HomesBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, fleet.HomeKey("wecom", "q"), []byte(`{"box":"b","from":"not a box!"}`)); err != nil {
		t.Fatal(err)
	}
	// What the ingress publishes (its Publish skips the known home).
	subj, _ := fleet.Subject("wecom", "q")
	m := nats.NewMsg(subj)
	m.Data = []byte(`{"conv":"q","key":"q-2"}`)
	m.Header.Set("Agent-Ingress", "a")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) && len(a.keys("q"))+len(b.keys("q")) < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	if len(a.keys("q"))+len(b.keys("q")) != 2 {
		t.Fatalf("q-2 (bad home entry) answered by nobody: a %v, b %v", a.keys("q"), b.keys("q"))
	}
}
