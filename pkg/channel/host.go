package channel

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"agent/pkg/turn"
)

// Host is what the daemon offers every channel: a few interfaces, no
// concrete type of the box. Built-in channels get the box's services on
// top of it from pkg/channelhost; an out-of-process plugin needs nothing
// more.
type Host struct {
	Logger *slog.Logger
	Clock  Clock
	// Turns is the conversation pipeline, never nil; Err says when it is
	// unavailable (a channel then keeps what arrives to answer after a
	// restart, or tells the user it cannot answer).
	Turns Turns
	// Files are the users' folders: a channel keeps what a user sent
	// there; nil while the pipeline is unavailable.
	Files Files
	// Metrics and Health take the channel's gauges and readiness checks.
	Metrics Metrics
	Health  Health
	// Scrub redacts secrets from what a channel stores or logs (errors).
	Scrub func(string) string
}

// Clock is the host's time (pkg/clock's satisfies it): backoff and
// timeouts in tests follow a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Turns runs conversation turns.
type Turns interface {
	// Handle queues a turn for m on its conversation (turn.KeyOf: one at
	// a time, in order) and returns; done closes when the turn and every
	// reply of it ended. A full queue is an error the user was told of.
	Handle(ctx context.Context, m turn.Message, out turn.Sink) (done <-chan struct{}, err error)
	// Cancel stops the turn running for m's conversation, if one is.
	Cancel(m turn.Message)
	// Key is the pipeline's name for m's conversation ("voice:boss"); an
	// error when m's ids cannot name one (a channel refuses such a user).
	Key(m turn.Message) (string, error)
	// Err is why the pipeline is unavailable; nil while it runs.
	Err() error
}

// Files are the users' folders (pkg/workspace), each within its quota.
type Files interface {
	// SaveUpload keeps data a user sent as name in scope's uploads and
	// returns the path their tools know it by.
	SaveUpload(scope, name string, data []byte) (string, error)
}

// Metrics takes a channel's figures (exposed on /metrics).
type Metrics interface {
	// GaugeFunc is a gauge read from f at every scrape.
	GaugeFunc(name, help string, labels map[string]string, f func() float64)
	// Histogram returns the function that records one observation.
	Histogram(name, help string, buckets []float64, labels map[string]string) func(float64)
}

// Health takes a channel's readiness checks (shown on /healthz): a check
// returning an error wrapping ErrDegraded degrades readiness, any other
// error fails it.
type Health interface {
	Register(name string, check func(context.Context) error)
}

// ErrDegraded marks a check's error as degraded, not failing: the box
// works, less well.
var ErrDegraded = errors.New("degraded")

// Build makes a channel from the host; it returns nil, nil when the
// channel is not enabled. An error disables the channel, not the daemon:
// the host reports it on /healthz under the channel's name.
type Build func(ctx context.Context, h Host) (Channel, error)
