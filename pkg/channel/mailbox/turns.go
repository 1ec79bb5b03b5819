package mailbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"agent/pkg/clock"
)

// Turns runs the turns an inbox's messages make, at most one at a time
// per conversation, so a conversation's messages are answered in order
// while other conversations go on.
type Turns struct {
	clock  clock.Clock
	logger *slog.Logger
	wake   func() // the processor looks at the inbox again (a turn ended)
	wg     sync.WaitGroup

	mu       sync.Mutex
	inflight map[string]bool
}

// NewTurns returns a tracker; wake is called whenever a turn ends.
func NewTurns(c clock.Clock, logger *slog.Logger, wake func()) *Turns {
	return &Turns{clock: clock.Or(c), logger: logger, wake: wake, inflight: map[string]bool{}}
}

// Busy is the conversations with a turn running. Read it before the
// pending rows: a turn that ends while they are read has committed rows
// the read may still show as pending.
func (t *Turns) Busy() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	busy := make(map[string]bool, len(t.inflight))
	for k := range t.inflight {
		busy[k] = true
	}
	return busy
}

// Start runs turn for conversation key in its own goroutine. A turn that
// fails (its rows not recorded: they stay pending) is logged and followed
// by a pause before the conversation is tried again, so a broken
// database is not retried in a tight loop.
func (t *Turns) Start(ctx context.Context, key, sender string, turn func() error) {
	t.mu.Lock()
	t.inflight[key] = true
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() {
			t.mu.Lock()
			delete(t.inflight, key)
			t.mu.Unlock()
			t.wake()
		}()
		if err := turn(); err != nil && ctx.Err() == nil {
			t.logger.Error("turn not recorded; will retry", "sender", sender, "err", err)
			select {
			case <-t.clock.After(5 * time.Second):
			case <-ctx.Done():
			}
		}
	}()
}

// Wait returns when every started turn has returned.
func (t *Turns) Wait() { t.wg.Wait() }
