package selfcheck

import (
	"context"
	"time"

	"agent/pkg/clock"
)

// NextDaily is the first hour:minute in loc strictly after now. On a day
// when that wall time does not exist (a DST gap), time.Date's normalised
// time is used.
func NextDaily(now time.Time, hour, minute int, loc *time.Location) time.Time {
	n := now.In(loc)
	t := time.Date(n.Year(), n.Month(), n.Day(), hour, minute, 0, 0, loc)
	if !t.After(now) {
		t = time.Date(n.Year(), n.Month(), n.Day()+1, hour, minute, 0, 0, loc)
	}
	return t
}

// maxSleep bounds one wait, so a wall-clock jump is noticed within it.
const maxSleep = time.Hour

// Daily calls fn once a day at hour:minute in loc until ctx ends. It
// waits on clk's timers (at most an hour at a time, re-reading the
// clock, so a clock jump neither skips nor repeats a day).
func Daily(ctx context.Context, clk clock.Clock, loc *time.Location, hour, minute int, fn func(ctx context.Context)) {
	next := NextDaily(clk.Now(), hour, minute, loc)
	for {
		wait := next.Sub(clk.Now())
		if wait <= 0 {
			fn(ctx)
			if ctx.Err() != nil {
				return
			}
			next = NextDaily(clk.Now(), hour, minute, loc)
			continue
		}
		t := clk.NewTimer(min(wait, maxSleep))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		// A backwards jump of more than a day: plan from the new time.
		if now := clk.Now(); next.Sub(now) > 24*time.Hour {
			next = NextDaily(now, hour, minute, loc)
		}
	}
}
