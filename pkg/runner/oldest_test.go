package runner

import (
	"context"
	"testing"
	"time"
)

func TestOldestRunningJob(t *testing.T) {
	r := New(Config{}, nil)
	if age, key := r.Oldest(time.Now()); age != 0 || key != "" {
		t.Fatalf("idle runner: %v %q", age, key)
	}
	started, release := make(chan struct{}), make(chan struct{})
	if err := r.Submit("p2p:admin:bob", func(context.Context) { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	<-started
	age, key := r.Oldest(time.Now().Add(7 * time.Minute))
	if age < 7*time.Minute || age > 8*time.Minute || key != "p2p:admin:bob" {
		t.Fatalf("got %v %q; want about 7m on p2p:admin:bob", age, key)
	}
	close(release)
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if age, _ := r.Oldest(time.Now()); age != 0 {
		t.Fatalf("after the job returned: %v", age)
	}
}
