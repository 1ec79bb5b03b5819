package runner

import (
	"context"
	"testing"
	"time"

	"agent/pkg/clock"
)

func TestOldestRunningJob(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	r := New(Config{Clock: clk}, nil)
	if age, key := r.Oldest(clk.Now()); age != 0 || key != "" {
		t.Fatalf("idle runner: %v %q", age, key)
	}
	started, release := make(chan struct{}), make(chan struct{})
	if err := r.Submit("p2p:admin:bob", func(context.Context) { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	<-started
	clk.Advance(7 * time.Minute)
	age, key := r.Oldest(clk.Now())
	if age != 7*time.Minute || key != "p2p:admin:bob" {
		t.Fatalf("got %v %q; want 7m on p2p:admin:bob", age, key)
	}
	close(release)
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if age, _ := r.Oldest(clk.Now()); age != 0 {
		t.Fatalf("after the job returned: %v", age)
	}
}
