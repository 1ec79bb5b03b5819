package runner

import (
	"context"
	"sync"
)

// fairSem is a counting semaphore that grants slots to waiters in the order
// they started waiting. A releaser hands its slot straight to the oldest
// waiter, so a caller that releases and re-acquires goes to the back of the
// line instead of winning the race for the slot it just gave up.
type fairSem struct {
	mu      sync.Mutex
	max     int
	held    int
	waiters []chan struct{}
	onWait  func() // test hook: called after a caller has joined the line
}

func newFairSem(max int) *fairSem { return &fairSem{max: max} }

// acquire takes a slot, waiting in FIFO order. It returns ctx.Err() if ctx
// ends first; the caller then holds no slot.
func (s *fairSem) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.held < s.max && len(s.waiters) == 0 {
		s.held++
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	s.waiters = append(s.waiters, ch)
	hook := s.onWait
	s.mu.Unlock()
	if hook != nil {
		hook()
	}

	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for i, w := range s.waiters {
			if w == ch {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				s.mu.Unlock()
				return ctx.Err()
			}
		}
		s.mu.Unlock()
		// Granted while we were giving up: pass the slot on.
		s.release()
		return ctx.Err()
	}
}

// release gives a slot back, handing it to the oldest waiter if there is one.
func (s *fairSem) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiters) > 0 {
		w := s.waiters[0]
		s.waiters[0] = nil
		s.waiters = s.waiters[1:]
		close(w)
		return
	}
	s.held--
}
