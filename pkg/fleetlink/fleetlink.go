// Package fleetlink is this box's part of a fleet (pkg/fleet): it joins
// the fleet over NATS JetStream (through the egress ledger), reports the
// link on /healthz and /metrics, answers the fleet for this box (whether
// a conversation may move, what it takes along, the heartbeat) and serves
// agentctl fleet. The channels' messages are theirs: the link asks the
// channels whether a conversation is drained (channel.Drainer) and the
// pipeline what it holds of it (assistant.Portable).
package fleetlink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"agent/pkg/admin"
	"agent/pkg/buildinfo"
	"agent/pkg/channel"
	"agent/pkg/channel/mailbox"
	"agent/pkg/clock"
	"agent/pkg/config"
	"agent/pkg/egress"
	"agent/pkg/fleet"
	"agent/pkg/health"
	"agent/pkg/metrics"
)

// Config is what Connect needs.
type Config struct {
	Fleet   config.Fleet   // [fleet]
	Channel string         // the channel whose conversations the fleet carries (Link.Channel)
	Egress  *egress.Ledger // the fleet's connections go through it; nil: dialled directly
	Logger  *slog.Logger
	Clock   clock.Clock
	Health  *health.Checker   // takes the "fleet" readiness check
	Metrics *metrics.Registry // takes agent_fleet_*
}

// Connect joins this box's fleet when fleet.enabled, and registers the
// link's readiness check and gauges. It returns nil on a single box, and
// when the fleet cannot be joined (logged, and the "fleet" check fails
// saying why).
func Connect(c Config) *fleet.Fleet {
	if !c.Fleet.Enabled {
		return nil
	}
	fc := c.Fleet
	clk := clock.Or(c.Clock)
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var f *fleet.Fleet
	err := errNoChannel
	if c.Channel != "" {
		f, err = fleet.New(fleet.Config{
			URL: fc.NATSURL, Box: fc.Box, Ingress: fc.Ingress, DefaultHome: fc.DefaultHome, Replicas: fc.Replicas,
			Version: buildinfo.Version(), Options: natsOptions(fc, c.Egress),
			Logger: logger.With("component", "fleet"), Clock: clk,
		})
	}
	if err != nil {
		logger.Error("fleet unavailable", "component", "fleet", "err", err)
		c.Health.Register("fleet", func(context.Context) error { return err })
		return nil
	}
	c.Health.Register("fleet", func(context.Context) error {
		if !f.Connected() {
			if fc.Ingress {
				return errors.New("NATS JetStream is not reachable: WeCom's callbacks are refused (WeCom retries them) until it is")
			}
			return errors.New("NATS JetStream is not reachable: this box's conversations wait in the fleet's stream")
		}
		if !f.Consuming() {
			return errors.New("this box does not read its messages from the fleet's stream (its durable consumer is not set up: journalctl -u agent -g fleet)")
		}
		hk, why, since := f.Holding()
		if hk != "" && why == fleet.HoldNoChannel && clk.Now().Sub(since) > time.Minute {
			return fmt.Errorf("this box's queue has waited %s on a message of %s for a channel that does not run here (journalctl -u agent -g fleet)", clk.Now().Sub(since).Round(time.Second), hk)
		}
		if hk != "" && clk.Now().Sub(since) > time.Minute {
			return fmt.Errorf("this box's queue has waited %s on %s, which is being moved or rehomed (an abandoned move is undone a minute after its coordinator stops; agentctl fleet status)", clk.Now().Sub(since).Round(time.Second), hk)
		}
		return nil
	})
	labels := metrics.Labels{"box": fc.Box}
	c.Metrics.GaugeFunc("agent_fleet_connected", "1 while the fleet's NATS JetStream is reachable.", labels, func() float64 {
		if f.Connected() {
			return 1
		}
		return 0
	})
	c.Metrics.GaugeFunc("agent_fleet_consumer_lag", "Messages of the fleet's stream this box has not settled yet (its durable consumer's pending and unacknowledged).", labels,
		func() float64 { return float64(f.Lag()) })
	return f
}

// errNoChannel: the host did not say which channel's conversations the
// fleet carries.
var errNoChannel = errors.New("no channel carries the fleet's conversations (the host names none)")

// natsOptions are the fleet's login, TLS and dialer (through the egress
// ledger, like every outbound connection).
func natsOptions(cfg config.Fleet, ledger *egress.Ledger) []nats.Option {
	auth := fleet.Auth{CredentialsFile: cfg.CredentialsFile, Token: cfg.Token, TLSCAFile: cfg.TLSCAFile, TLSCertFile: cfg.TLSCertFile, TLSKeyFile: cfg.TLSKeyFile}
	if ledger == nil {
		return auth.Options()
	}
	return append([]nats.Option{nats.SetCustomDialer(egressDialer{ledger.Dialer(egress.Fleet)})}, auth.Options()...)
}

// egressDialer is nats.CustomDialer over the egress ledger.
type egressDialer struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (e egressDialer) Dial(network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), nats.DefaultTimeout)
	defer cancel()
	return e.dial(ctx, network, addr)
}

// Conversations is the pipeline's side of a move (assistant.Portable).
type Conversations interface {
	Export(ctx context.Context, channel, conv string) ([]byte, error)
	Import(ctx context.Context, channel, conv string, snap []byte) error
	ExportFiles(ctx context.Context, channel, conv string, w io.Writer) error
	ImportFiles(ctx context.Context, channel, conv string, r io.Reader) error
	Holds(ctx context.Context, channel, conv string) (bool, error)
	Release(ctx context.Context, channel, conv string) error
	Purge(ctx context.Context, channel, conv string) error
	// Held are the conversations of channel whose jobs a move holds.
	Held(ctx context.Context, channel string) ([]string, error)
	// Busy reports whether a turn of the conversation is held for the
	// model service or a run of its jobs is in flight (a move waits).
	Busy(ctx context.Context, channel, conv string) (bool, error)
}

// Link is what this box answers the fleet and agentctl fleet with.
type Link struct {
	Fleet *fleet.Fleet // Connect's; nil on a single box
	// Channel is the channel whose conversations the fleet carries (the
	// WeCom app's): agentctl fleet names its users.
	Channel       string
	Conversations Conversations
	// Drainers are the channels that answer for a channel name (itself
	// and those aliased to it) and say when a conversation is drained.
	Drainers func(channel string) []channel.Drainer
	Health   *health.Checker // the heartbeat's health
	DB       *sql.DB         // the heartbeat's queue depth (every channel's inbox)
	Logger   *slog.Logger
}

func (l Link) logger() *slog.Logger {
	if l.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l.Logger
}

// Run runs the link until ctx ends; the returned func stops it and waits.
func (l Link) Run(ctx context.Context) func() {
	if l.Fleet == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := l.Fleet.Run(ctx, local{l.Conversations, l}); err != nil {
			l.logger().Error("fleet stopped", "component", "fleet", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
		l.Fleet.Close()
	}
}

// local is this box's part of the fleet (fleet.Local, LocalMoves,
// LocalFiles).
type local struct {
	Conversations
	l Link
}

var (
	_ fleet.Local      = local{}
	_ fleet.LocalMoves = local{}
	_ fleet.LocalFiles = local{}
)

// Drained: no message of the conversation waits in a channel's inbox (or
// is in a running turn), and none of its replies waits in an outbox (the
// new box must not answer before them), on every channel answering for
// the fleet's channel (a WeCom user's conversation is the app's and the
// AI Bot's); no turn of it is held for the model service, and no run of
// the user's scheduled jobs is in flight.
func (l local) Drained(ctx context.Context, ch, conv string) (bool, error) {
	var drainers []channel.Drainer
	if l.l.Drainers != nil {
		drainers = l.l.Drainers(ch)
	}
	for _, d := range drainers {
		ok, err := d.Drained(ctx, conv)
		if err != nil || !ok {
			return false, err
		}
	}
	busy, err := l.Busy(ctx, ch, conv)
	return !busy, err
}

// Held are the fleet channel's conversations whose jobs a move holds.
func (l local) Held(ctx context.Context) ([]fleet.Conversation, error) {
	convs, err := l.Conversations.Held(ctx, l.l.Channel)
	out := make([]fleet.Conversation, len(convs))
	for i, c := range convs {
		out[i] = fleet.Conversation{Channel: l.l.Channel, Conv: c}
	}
	return out, err
}

// Beat is the box's health, memory and waiting messages.
func (l local) Beat(ctx context.Context) fleet.Beat {
	b := fleet.Beat{RSSBytes: metrics.ResidentBytes(os.Getpagesize())}
	b.Healthy = l.l.Health.Run(ctx).Healthy
	b.QueueDepth, _ = mailbox.PendingCount(ctx, l.l.DB)
	return b
}

// errNoFleet answers the fleet commands on a box not in a fleet.
var errNoFleet = errors.New("this box is not in a fleet (fleet.enabled = false)")

// user is the conversation agentctl names: a user id ("zhangsan", with
// or without the channel's prefix "wecom:") or a group chat
// ("group:CHATID").
func (l Link) user(user string) (string, error) {
	user = strings.TrimPrefix(strings.TrimSpace(user), l.Channel+":")
	if user == "" {
		return "", errors.New("a user is required (the WeCom user id, or group:CHATID)")
	}
	return user, nil
}

// FleetStatus implements admin.FleetBackend.
func (l Link) FleetStatus(ctx context.Context) (admin.FleetView, error) {
	if l.Fleet == nil {
		return admin.FleetView{}, errNoFleet
	}
	v, err := l.Fleet.Status(ctx)
	out := admin.FleetView{Box: v.Box, Connected: v.Connected, More: v.More}
	for _, b := range v.Boxes {
		out.Boxes = append(out.Boxes, admin.FleetBox{Box: b.Box, Version: b.Version, Healthy: b.Healthy, Ingress: b.Ingress,
			RSSBytes: b.RSSBytes, QueueDepth: b.QueueDepth, Lag: b.Lag, At: b.At})
	}
	for _, h := range v.Homes {
		out.Homes = append(out.Homes, admin.FleetHome{Channel: h.Channel, User: h.Conv, Box: h.Box, Since: h.Since, From: h.From, Moving: h.Moving})
	}
	return out, err
}

// FleetHome implements admin.FleetBackend.
func (l Link) FleetHome(ctx context.Context, req admin.FleetRequest) (admin.FleetHome, error) {
	if l.Fleet == nil {
		return admin.FleetHome{}, errNoFleet
	}
	user, err := l.user(req.User)
	if err != nil {
		return admin.FleetHome{}, err
	}
	h, err := l.Fleet.SetHome(ctx, l.Channel, user, req.Box)
	if err != nil {
		return admin.FleetHome{}, err
	}
	l.logger().Info("fleet: user homed by the operator", "user", user, "box", h.Box)
	return admin.FleetHome{Channel: l.Channel, User: user, Box: h.Box, Since: h.Since, From: h.From}, nil
}

// FleetMove implements admin.FleetBackend.
func (l Link) FleetMove(ctx context.Context, req admin.FleetRequest) (admin.FleetMoved, error) {
	if l.Fleet == nil {
		return admin.FleetMoved{}, errNoFleet
	}
	user, err := l.user(req.User)
	if err != nil {
		return admin.FleetMoved{}, err
	}
	r, err := l.Fleet.Move(ctx, l.Channel, user, req.Box)
	if err != nil {
		return admin.FleetMoved{}, err
	}
	return admin.FleetMoved{From: r.From, To: r.To, Since: r.Since, Bytes: r.Bytes, FileBytes: r.Files, Seconds: r.Took.Seconds(), PurgeErr: r.PurgeErr}, nil
}
