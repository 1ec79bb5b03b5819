package llm

import (
	"sync"
	"time"
)

// breaker is a consecutive-failure circuit breaker. Closed: calls pass and
// failures are counted; threshold consecutive failures open it. Open: calls
// fail fast until cooldown has passed. Half-open: one probe passes; its
// success closes the breaker, its failure opens it again.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu       sync.Mutex
	failures int
	openedAt time.Time
	open     bool
	probing  bool
}

// allow reports whether a call may go out now. When it may not, wait is how
// long until the breaker lets a probe through (0 while a probe is running).
// probe is true when this call is the half-open probe; the caller must then
// report it with done.
func (b *breaker) allow() (ok, probe bool, wait time.Duration) {
	if b.threshold <= 0 {
		return true, false, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return true, false, 0
	}
	if elapsed := b.now().Sub(b.openedAt); elapsed < b.cooldown {
		return false, false, b.cooldown - elapsed
	}
	if b.probing {
		return false, false, 0
	}
	b.probing = true
	return true, true, 0
}

// done records a call's outcome. failure says the endpoint looked unhealthy;
// neutral outcomes (the caller cancelled, a 400) pass failure=false and
// success=false and only release the probe slot.
// It reports whether this outcome opened the breaker.
func (b *breaker) done(probe, success, failure bool) (opened bool) {
	if b.threshold <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	switch {
	case success:
		b.failures = 0
		b.open = false
	case failure:
		b.failures++
		if probe || b.failures >= b.threshold {
			opened = !b.open || probe
			b.open = true
			b.openedAt = b.now()
		}
	}
	return opened
}

// state returns "closed", "open" or "half-open", for /status and metrics.
func (b *breaker) state() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.open:
		return "closed"
	case b.now().Sub(b.openedAt) >= b.cooldown:
		return "half-open"
	}
	return "open"
}
