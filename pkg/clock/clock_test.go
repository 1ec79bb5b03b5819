package clock

import (
	"context"
	"testing"
	"time"
)

func TestFakeTimersFireWhenPassed(t *testing.T) {
	c := NewFake(time.Time{})
	start := c.Now()
	a := c.NewTimer(time.Second)
	b := c.NewTimer(3 * time.Second)
	stopped := c.NewTimer(2 * time.Second)
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer = false")
	}
	if got := c.Pending(); got != 2 {
		t.Fatalf("Pending = %d, want 2", got)
	}
	c.Advance(1500 * time.Millisecond)
	select {
	case at := <-a.C():
		if !at.Equal(start.Add(1500 * time.Millisecond)) {
			t.Errorf("fired at %v", at)
		}
	default:
		t.Fatal("timer due did not fire")
	}
	select {
	case <-b.C():
		t.Fatal("timer not yet due fired")
	default:
	}
	if a.Stop() {
		t.Error("Stop of a fired timer = true")
	}
	c.Advance(2 * time.Second)
	select {
	case <-b.C():
	default:
		t.Fatal("second timer did not fire")
	}
	select {
	case <-stopped.C():
		t.Fatal("stopped timer fired")
	default:
	}
	if got := c.Pending(); got != 0 {
		t.Errorf("Pending = %d after all fired", got)
	}
}

func TestFakeZeroDurationFiresAtOnce(t *testing.T) {
	c := NewFake(time.Unix(100, 0))
	select {
	case <-c.After(0):
	default:
		t.Fatal("After(0) did not fire at once")
	}
}

func TestWaitTimers(t *testing.T) {
	c := NewFake(time.Time{})
	go func() { c.NewTimer(time.Minute) }()
	done := make(chan struct{})
	time.AfterFunc(10*time.Second, func() { close(done) })
	if !c.WaitTimers(1, done) {
		t.Fatal("WaitTimers gave up")
	}
	never := make(chan struct{})
	close(never)
	if c.WaitTimers(5, never) {
		t.Fatal("WaitTimers(5) with 1 pending = true")
	}
}

func TestFuncClockReadsNow(t *testing.T) {
	at := time.Unix(42, 0)
	c := Func(func() time.Time { return at })
	if !c.Now().Equal(at) {
		t.Fatal("Func clock does not read its function")
	}
	if _, ok := Or(nil).(realClock); !ok {
		t.Fatal("Or(nil) is not the real clock")
	}
}

func TestNext(t *testing.T) {
	c := NewFake(time.Time{})
	if _, ok := c.Next(); ok {
		t.Fatal("Next with no timers = ok")
	}
	start := c.Now()
	c.NewTimer(3 * time.Second)
	early := c.NewTimer(time.Second)
	if next, ok := c.Next(); !ok || !next.Equal(start.Add(time.Second)) {
		t.Fatalf("Next = %v, %v; want start+1s", next, ok)
	}
	early.Stop()
	if next, _ := c.Next(); !next.Equal(start.Add(3 * time.Second)) {
		t.Fatalf("Next after Stop = %v; want start+3s", next)
	}
}

func TestSleep(t *testing.T) {
	c := NewFake(time.Time{})
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), c, time.Minute) }()
	if !c.WaitTimers(1, deadline(t)) {
		t.Fatal("Sleep made no timer")
	}
	c.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, c, time.Minute); err != context.Canceled {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d timers left", c.Pending())
	}
}

func TestWithTimeoutOnFake(t *testing.T) {
	c := NewFake(time.Time{})
	ctx, cancel := WithTimeout(context.Background(), c, time.Second)
	defer cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Error("a fake timeout exposes a deadline")
	}
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	c.Advance(999 * time.Millisecond)
	select {
	case <-ctx.Done():
		t.Fatal("ended before its deadline")
	default:
	}
	c.Advance(time.Millisecond)
	<-ctx.Done()
	<-child.Done()
	if ctx.Err() != context.DeadlineExceeded || child.Err() != context.DeadlineExceeded {
		t.Fatalf("Err = %v, child %v; want DeadlineExceeded", ctx.Err(), child.Err())
	}

	ctx2, cancel2 := WithTimeout(context.Background(), c, time.Second)
	cancel2()
	<-ctx2.Done()
	if ctx2.Err() != context.Canceled {
		t.Fatalf("cancelled: Err = %v", ctx2.Err())
	}
	parent, cancelParent := context.WithCancel(context.Background())
	ctx3, cancel3 := WithTimeout(parent, c, time.Second)
	defer cancel3()
	cancelParent()
	<-ctx3.Done()
	if ctx3.Err() != context.Canceled {
		t.Fatalf("parent cancelled: Err = %v", ctx3.Err())
	}
	if !c.WaitTimers(0, deadline(t)) || c.Pending() != 0 {
		t.Fatalf("%d timers left", c.Pending())
	}
}

func TestWithTimeoutOnReal(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), Func(time.Now), time.Hour)
	defer cancel()
	if _, ok := ctx.Deadline(); !ok {
		t.Fatal("a real timeout has no deadline")
	}
}

// deadline is closed after a bound no passing test reaches.
func deadline(t *testing.T) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx.Done()
}
