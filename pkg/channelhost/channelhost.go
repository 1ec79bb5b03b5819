// Package channelhost is what the daemon hands the channels it builds: the
// seam's Host (pkg/channel: interfaces only) and, beside it, the box's
// concrete services a built-in channel may use — its configuration, the
// database its durable inbox and outbox live in (pkg/channel/mailbox), the
// DM gate, the egress ledger, the fleet link, the local models, the web
// console's sessions, the users' folders and whom they may address.
//
// The list of channels is not here nor in the daemon: cmd/agent hands the
// daemon its Builders, one line a channel; the daemon builds them with an
// Env, mounts their routes, supervises their Run and registers the tools
// they offer. An out-of-process channel (pkg/channel/plugin) uses the
// Host's interfaces only.
package channelhost

import (
	"context"
	"database/sql"
	"errors"
	"net/http"

	"agent/pkg/asr"
	"agent/pkg/channel"
	"agent/pkg/channel/gate"
	"agent/pkg/clock"
	"agent/pkg/config"
	"agent/pkg/egress"
	"agent/pkg/fleet"
	"agent/pkg/health"
	"agent/pkg/metrics"
	"agent/pkg/recipient"
	"agent/pkg/tools"
	"agent/pkg/vad"
	"agent/pkg/workspace"
)

// Env is a built-in channel's view of the box: the seam's Host plus the
// services only built-in channels use.
type Env struct {
	channel.Host
	// Config is the configuration in force (it follows reloads); a
	// channel reads its own section.
	Config func() *config.Config
	// DB is the daemon's database: the channel's inbox and outbox
	// (pkg/channel/mailbox) and the pairings the gate reads.
	DB *sql.DB
	// Gate is the DM policy every inbound message passes.
	Gate gate.Gate
	// Spaces are the users' folders (nil while the pipeline is
	// unavailable): the send_* tools open files there.
	Spaces *workspace.Spaces
	// Recipients decides whom a user may address.
	Recipients recipient.Policy
	// Egress is the one way out: a channel dials its platform through it;
	// nil: directly (tests).
	Egress *egress.Ledger
	// Fleet is the link to the other boxes of a fleet; nil on a single
	// box.
	Fleet *fleet.Fleet
	// Models are the local models; nil: none loaded.
	Models Models
	// Console authenticates the web console's connections; nil: no
	// console.
	Console ConsoleSessions
}

// Models are the local models a channel may use (localmodels.Set); each
// is nil until loaded.
type Models interface {
	Recognizer() *asr.Recognizer
	VAD() *vad.Model
}

// ConsoleSessions authenticates the web console (console.Sessions).
type ConsoleSessions interface {
	Session(r *http.Request) string
	Valid(id string) bool
	Verify(id, key string) bool
}

// Build makes a channel from env; nil, nil when it is not enabled. An
// error disables the channel, not the daemon: the host reports it on
// /healthz under the channel's name.
type Build func(ctx context.Context, env Env) (channel.Channel, error)

// Builder is one entry of the list of channels cmd/agent hands the daemon:
// Build makes one channel, Many any number (one per [channels.NAME]
// section of out-of-process channels); set one of them.
type Builder struct {
	Name  string
	Build Build
	Many  Many
	// Egress, when set, is the hosts the channel dials under cfg: the
	// egress ledger's rules while privacy.egress_allow is empty.
	Egress func(cfg *config.Config) []egress.Rule
}

// Many is a builder of any number of channels (one per [channels.NAME]
// section of out-of-process channels).
type Many func(ctx context.Context, env Env) ([]channel.Channel, error)

// ToolProvider is a channel that offers the model tools of its own
// (WeCom's send_image, send_file ...), registered when it is built and
// limited to the channel's own users.
type ToolProvider interface {
	Tools() []tools.Tool
}

// Metrics adapts the daemon's registry to the seam's channel.Metrics.
type Metrics struct{ R *metrics.Registry }

// GaugeFunc implements channel.Metrics.
func (m Metrics) GaugeFunc(name, help string, labels map[string]string, f func() float64) {
	m.R.GaugeFunc(name, help, metrics.Labels(labels), f)
}

// Histogram implements channel.Metrics.
func (m Metrics) Histogram(name, help string, buckets []float64, labels map[string]string) func(float64) {
	return m.R.Histogram(name, help, metrics.Labels(labels), buckets).Observe
}

// Health adapts the daemon's checker to the seam's channel.Health: a
// check's error wrapping channel.ErrDegraded degrades readiness.
type Health struct{ C *health.Checker }

// Register implements channel.Health.
func (h Health) Register(name string, check func(context.Context) error) {
	h.C.Register(name, h.Wrap(check))
}

// Wrap is check as the health checker's.
func (Health) Wrap(check func(context.Context) error) health.Check {
	return func(ctx context.Context) error { return Degraded(check(ctx)) }
}

// Degraded maps the seam's degraded errors onto the health checker's; the
// text stays the channel's.
func Degraded(err error) error {
	if err != nil && errors.Is(err, channel.ErrDegraded) && !errors.Is(err, health.ErrDegraded) {
		return degraded{err}
	}
	return err
}

type degraded struct{ err error }

func (d degraded) Error() string   { return d.err.Error() }
func (d degraded) Unwrap() []error { return []error{health.ErrDegraded, d.err} }

// TimerClock is the host's clock with timers (pkg/clock), which the
// built-in channels' internals take: the seam's Clock is the same value.
func (e Env) TimerClock() clock.Clock {
	if c, ok := e.Clock.(clock.Clock); ok {
		return c
	}
	return clock.Real()
}

// Plain is the Build of a channel that needs the seam's Host only.
func Plain(b channel.Build) Build {
	return func(ctx context.Context, env Env) (channel.Channel, error) { return b(ctx, env.Host) }
}
