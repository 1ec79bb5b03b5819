package clock

import (
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
