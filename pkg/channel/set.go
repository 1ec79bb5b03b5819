package channel

import (
	"agent/pkg/turn"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// Restart backoff of a failing Run: doubling from minBackoff to maxBackoff;
// a Run that lasted stableAfter starts over from minBackoff.
const (
	minBackoff  = time.Second
	maxBackoff  = 5 * time.Minute
	stableAfter = 10 * time.Minute
)

// Set is the enabled channels of one daemon.
type Set struct {
	logger *slog.Logger
	clock  Clock

	list  []Channel
	state map[string]*runState
	mu    sync.Mutex
	wg    sync.WaitGroup
}

// runState is what the supervisor knows of one channel's Run.
type runState struct {
	running  bool
	failures int       // consecutive
	lastErr  error     // of the last failure
	since    time.Time // of the last failure
	restarts int
}

// NewSet returns the set of channels; names must be unique and non-empty.
func NewSet(logger *slog.Logger, clk Clock, channels ...Channel) (*Set, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if clk == nil {
		clk = wallClock{}
	}
	s := &Set{logger: logger, clock: clk, state: map[string]*runState{}}
	for _, c := range channels {
		if err := s.Add(c); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add adds a channel before Run.
func (s *Set) Add(c Channel) error {
	name := c.Name()
	if name == "" {
		return errors.New("channel: a channel needs a name")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.state[name]; dup {
		return fmt.Errorf("channel: two channels named %q", name)
	}
	s.list = append(s.list, c)
	s.state[name] = &runState{}
	return nil
}

// Get returns the channel called name.
func (s *Set) Get(name string) (Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.list, func(c Channel) bool { return c.Name() == name })
	if i < 0 {
		// No channel of that name: one that answers for it (Aliased).
		i = slices.IndexFunc(s.list, func(c Channel) bool {
			a, ok := c.(Aliased)
			return ok && slices.Contains(a.Aliases(), name)
		})
	}
	if i < 0 {
		return nil, false
	}
	return s.list[i], true
}

// All returns the channels in the order they were added.
func (s *Set) All() []Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// route is the channel that delivers to recipient to of channel name: one
// that claims it (Claimer), else the channel of that name (Get).
func (s *Set) route(ctx context.Context, name, to string) (Channel, bool) {
	for _, c := range s.All() {
		if cl, ok := c.(Claimer); ok && c.Name() != name && s.claims(ctx, cl, name, to) {
			return c, true
		}
	}
	return s.Get(name)
}

// claims asks a Claimer, a panic counting as no.
func (s *Set) claims(ctx context.Context, cl Claimer, name, to string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return cl.Claims(ctx, name, to)
}

// Send delivers text to user to of the channel called name. A panic in
// the channel is its error, not the caller's crash.
func (s *Set) Send(ctx context.Context, name, to, text string) (err error) {
	c, ok := s.route(ctx, name, to)
	if !ok {
		return notConnected(name)
	}
	defer s.recoverAs(&err, name+": send")
	return c.Send(ctx, to, text)
}

// SendMedia delivers a file or link card to user to of the channel called
// name, when it can send media (MediaSender).
func (s *Set) SendMedia(ctx context.Context, name, to string, m turn.Media) (err error) {
	c, ok := s.route(ctx, name, to)
	if !ok {
		return notConnected(name)
	}
	ms, ok := c.(MediaSender)
	if !ok {
		return fmt.Errorf("the %s channel cannot send files", name)
	}
	defer s.recoverAs(&err, name+": send media")
	return ms.SendMedia(ctx, to, m)
}

// FastTurns reports whether the channel called name asks for latency-first
// turns (FastTurns).
func (s *Set) FastTurns(name string) bool {
	c, ok := s.Get(name)
	if !ok {
		return false
	}
	f, ok := c.(FastTurns)
	return ok && f.FastTurns()
}

// recoverAs turns a panic into *err (deferred). The error reaches the
// model and so users: it says what failed; the panic and its stack go to
// the log only.
func (s *Set) recoverAs(err *error, what string) {
	if p := recover(); p != nil {
		s.logger.Error("channel panicked", "in", what, "panic", p, "stack", string(debug.Stack()))
		*err = fmt.Errorf("%s failed: an internal error in the channel (logged)", what)
	}
}

// Mount registers every channel's routes on mux. Two channels claiming
// the same pattern is a programming error: ServeMux panics, at start-up.
func (s *Set) Mount(mux *http.ServeMux) {
	for _, c := range s.All() {
		for _, r := range c.Routes() {
			mux.Handle(r.Pattern, r.Handler)
		}
	}
}

// Start runs every channel's Run in its own goroutine under a supervisor
// until ctx ends; Wait waits for them to return.
func (s *Set) Start(ctx context.Context) {
	for _, c := range s.All() {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.supervise(ctx, c)
		}()
	}
}

// Wait blocks until every Run has returned (after ctx of Start ended) or
// ctx ends.
func (s *Set) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("channels did not stop in time: %w", ctx.Err())
	}
}

// Close closes the connections of every channel that holds some (Closer).
func (s *Set) Close(ctx context.Context) error {
	var errs []error
	for _, c := range s.All() {
		if cl, ok := c.(Closer); ok {
			err := func() (err error) {
				defer s.recoverAs(&err, c.Name()+": close")
				return cl.Close(ctx)
			}()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", c.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Disconnect closes principal's live connections on every channel that has
// some; it returns how many were closed.
func (s *Set) Disconnect(principal string) int {
	n := 0
	for _, c := range s.All() {
		if d, ok := c.(Disconnecter); ok {
			func() {
				defer func() {
					if p := recover(); p != nil {
						s.logger.Error("channel panicked disconnecting a user", "channel", c.Name(), "panic", p, "stack", string(debug.Stack()))
					}
				}()
				n += d.Disconnect(principal)
			}()
		}
	}
	return n
}

// supervise runs c until ctx ends, restarting it with backoff when it
// fails or panics.
func (s *Set) supervise(ctx context.Context, c Channel) {
	name := c.Name()
	log := s.logger.With("channel", name)
	backoff := minBackoff
	for ctx.Err() == nil {
		s.set(name, func(r *runState) { r.running = true })
		start := s.clock.Now()
		err := runSafely(ctx, c)
		if ctx.Err() != nil {
			s.set(name, func(r *runState) { r.running = false })
			return
		}
		if err == nil {
			// Nothing (more) to do in the background.
			s.set(name, func(r *runState) { r.running = false; r.failures = 0; r.lastErr = nil })
			return
		}
		if s.clock.Now().Sub(start) >= stableAfter {
			backoff = minBackoff
		}
		s.set(name, func(r *runState) {
			r.running, r.lastErr, r.since = false, err, s.clock.Now()
			r.failures++
			r.restarts++
		})
		log.Error("channel stopped; restarting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// runSafely is c.Run with a panic turned into an error (logged with its
// stack by supervise; /healthz shows its first line).
func runSafely(ctx context.Context, c Channel) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("run: panic: %v\n%s", p, debug.Stack())
		}
	}()
	return c.Run(ctx)
}

func (s *Set) set(name string, f func(*runState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.state[name]; r != nil {
		f(r)
	}
}

// Status is one channel's supervisor state.
type Status struct {
	Name     string
	Running  bool
	Failures int    // consecutive failures of Run
	Restarts int    // since start
	LastErr  string // of the last failure ("" when it recovered)
}

// Statuses reports every channel's state, in order.
func (s *Set) Statuses() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.list))
	for _, c := range s.list {
		r := s.state[c.Name()]
		st := Status{Name: c.Name(), Running: r.running, Failures: r.failures, Restarts: r.restarts}
		if r.lastErr != nil && r.failures > 0 {
			st.LastErr = firstLine(r.lastErr.Error())
		}
		out = append(out, st)
	}
	return out
}

// Check is a health check for channel name: degraded while its Run has
// failed and waits to be restarted (other channels and the daemon keep
// working).
func (s *Set) Check(name string) func(context.Context) error {
	return func(context.Context) error {
		for _, st := range s.Statuses() {
			if st.Name == name && st.Failures > 0 && !st.Running {
				return fmt.Errorf("%w: channel %s failed %d time(s) in a row and is restarted with backoff: %s",
					ErrDegraded, name, st.Failures, st.LastErr)
			}
		}
		return nil
	}
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// wallClock is the real time.
type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
