package health

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestRunClassifies(t *testing.T) {
	c := New(50*time.Millisecond, nil)
	c.Register("db", func(context.Context) error { return nil })
	c.Register("embed", func(context.Context) error { return fmt.Errorf("model missing: %w", ErrDegraded) })
	rep := c.Run(context.Background())
	if !rep.Healthy {
		t.Fatalf("degraded check made report unhealthy: %+v", rep)
	}
	if rep.Checks[0].Name != "db" || rep.Checks[1].Status != Degraded {
		t.Fatalf("unexpected results: %+v", rep.Checks)
	}
	c.Register("http", func(context.Context) error { return errors.New("listener closed") })
	rep = c.Run(context.Background())
	if rep.Healthy {
		t.Fatal("failing check left report healthy")
	}
}

func TestHungAndPanickingChecksAreContained(t *testing.T) {
	c := New(20*time.Millisecond, nil)
	block := make(chan struct{})
	defer close(block)
	c.Register("hung", func(ctx context.Context) error { <-block; return nil })
	c.Register("panics", func(context.Context) error { panic("boom") })
	rep := c.Run(context.Background())
	if rep.Healthy {
		t.Fatal("hung/panicking checks reported healthy")
	}
	for _, r := range rep.Checks {
		if r.Status != Failing {
			t.Errorf("%s: status %s; want failing", r.Name, r.Status)
		}
	}
}

func TestLivenessSeparatesRestartableFailures(t *testing.T) {
	c := New(50*time.Millisecond, nil)
	c.RegisterLiveness("db", func(context.Context) error { return nil })
	c.Register("disk", func(context.Context) error { return errors.New("full") })
	rep := c.Run(context.Background())
	if rep.Healthy || !rep.Alive {
		t.Fatalf("disk failure: healthy=%v alive=%v; want false/true", rep.Healthy, rep.Alive)
	}
	c.RegisterLiveness("db", func(context.Context) error { return errors.New("locked up") })
	if rep := c.Run(context.Background()); rep.Alive {
		t.Fatal("liveness failure left Alive true")
	}
}
