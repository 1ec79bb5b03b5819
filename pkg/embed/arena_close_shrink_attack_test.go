//go:build cgo

package embed

// Attacks on the arena change (commit 0531347). Each test here
// fails against that commit and shows one problem; see the comment above
// each for what it shows.

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"agent/pkg/clock"
)

// waitGoroutine polls the goroutine dump until some goroutine is
// parked in state (the dump's "[state]" header) with fn on its stack.
func waitGoroutine(t *testing.T, fn, state string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "["+state) && strings.Contains(g, fn) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine in %s parked in %s", fn, state)
		}
		time.Sleep(time.Millisecond)
	}
}

// sessionAlive reports whether the embedder's ONNX Runtime session
// has not been released yet (the binding nils ortSession on Destroy).
func sessionAlive(e *Embedder) bool {
	if e.session == nil || e.session.DynamicAdvancedSession == nil {
		return false
	}
	s := reflect.ValueOf(e.session.DynamicAdvancedSession).Elem().FieldByName("s")
	if !s.IsValid() || s.IsNil() {
		return false
	}
	p := s.Elem().FieldByName("ortSession")
	return p.IsValid() && !p.IsNil()
}

// Close was restructured to release closeMu before waiting for the idle
// goroutine and destroying the session (embed.go:300-318). A second Close
// that arrives in that window sees closed == true and returns nil at once,
// while the first is still waiting and the session is still alive; before
// 0531347 Close held closeMu through Destroy, so every Close returned only
// once the model was released ("Close releases the model").
//
// The window is made deterministic: the test holds runMu, so the idle
// goroutine, its timer fired, is parked at runMu.Lock (onnx.go:298) past
// its select on done, and the first Close waits for it in idle.Wait.
func TestSecondCloseReturnsBeforeRelease(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	e := bgeSmallWith(t, Config{Clock: clk})
	if !e.arena {
		t.Skip("no arena: no idle goroutine")
	}
	if _, err := e.Embed(context.Background(), []string{longText}); err != nil {
		t.Fatal(err)
	}
	if !clk.WaitTimers(1, testDeadline(t)) {
		t.Fatal("no idle wait after a large run")
	}
	e.runMu.Lock()
	held := true
	defer func() {
		if held {
			e.runMu.Unlock()
		}
	}()
	clk.Advance(e.cfg.ArenaIdle)
	waitGoroutine(t, "shrinkWhenIdle", "sync.Mutex.Lock")

	first := make(chan error, 1)
	go func() { first <- e.Close() }()
	for { // until the first Close has marked closed and let go of closeMu
		e.closeMu.RLock()
		c := e.closed
		e.closeMu.RUnlock()
		if c {
			break
		}
		time.Sleep(time.Millisecond)
	}

	second := make(chan error, 1)
	go func() { second <- e.Close() }()
	secondDone := false
	select {
	case err := <-second:
		secondDone = true
		select {
		case <-first:
			t.Fatal("first Close returned while its idle goroutine was held")
		default:
		}
		t.Errorf("second Close returned (err %v) while the first is still in idle.Wait; session alive: %v (want Close to return only once the model is released)",
			err, sessionAlive(e))
	case <-time.After(2 * time.Second):
		// The second Close waits for the first: as it should. (This wait
		// bounds only how long a correct implementation takes to pass; the
		// faulty one returns at once whatever the machine's speed.)
	}
	e.runMu.Unlock()
	held = false
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if !secondDone {
		if err := <-second; err != nil {
			t.Fatal(err)
		}
	}
	if sessionAlive(e) {
		t.Error("session alive after both Close calls returned")
	}
	if n := e.live.Load(); n != 0 {
		t.Errorf("%d native values alive after Close", n)
	}
}

// A shrink run that fails is counted as a shrink (e.shrinks.Add(1) before
// err is looked at, onnx.go:318-322) and only logged; nothing retries it,
// so the arena keeps the burst's peak until the next large run ends a new
// idle wait. waitShrinks, which TestArenaIdleMovesOn and
// TestCloseDuringArenaWait rely on, therefore passes when every shrink
// fails; only TestLongBatchLeavesNoPeak's RSS figure (skipped under
// -short) would notice.
//
// The failure is forced by giving a session without a CPU arena the arena
// flag: ONNX Runtime then refuses the shrink run ("Did not find an arena
// based allocator ..."), as it would any other failing run.
func TestFailedShrinkCountsAsShrink(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	e := bgeSmallWith(t, Config{Clock: clk, noArena: true})
	e.arena = true // the session has no arena: the shrink run must fail
	if _, err := e.Embed(context.Background(), []string{longText}); err != nil {
		t.Fatal(err)
	}
	if !clk.WaitTimers(1, testDeadline(t)) {
		t.Fatal("no idle wait after a large run")
	}
	clk.Advance(e.cfg.ArenaIdle)
	e.idle.Wait() // the idle goroutine has tried its shrink and ended
	if n := e.shrinks.Load(); n != 0 {
		t.Errorf("a failed shrink run counted as %d shrink(s); retry pending: %v", n, clk.Pending() > 0)
	}
}
