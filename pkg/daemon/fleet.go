package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"agent/pkg/admin"
	"agent/pkg/assistant"
	"agent/pkg/buildinfo"
	"agent/pkg/channel/wecombot"
	"agent/pkg/config"
	"agent/pkg/egress"
	"agent/pkg/fleet"
	"agent/pkg/metrics"
)

// A box of a fleet (fleet.enabled): its link to the others over NATS
// JetStream (pkg/fleet). The link is made before the channels (WeCom takes
// it from the host) and runs with them.

// natsOptions are the fleet's login, TLS and dialer (through the egress
// ledger, like every outbound connection).
func (d *Daemon) natsOptions(cfg config.Fleet) []nats.Option {
	return append([]nats.Option{nats.SetCustomDialer(egressDialer{d.egress.Dialer(egress.Fleet)})}, fleetAuth(cfg).Options()...)
}

// fleetAuth is [fleet]'s login and TLS files.
func fleetAuth(cfg config.Fleet) fleet.Auth {
	return fleet.Auth{CredentialsFile: cfg.CredentialsFile, Token: cfg.Token, TLSCAFile: cfg.TLSCAFile, TLSCertFile: cfg.TLSCertFile, TLSKeyFile: cfg.TLSKeyFile}
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

// startFleet connects this box to its fleet when fleet.enabled.
func (d *Daemon) startFleet(cfg *config.Config) {
	if !cfg.Fleet.Enabled {
		return
	}
	fc := cfg.Fleet
	f, err := fleet.New(fleet.Config{
		URL: fc.NATSURL, Box: fc.Box, Ingress: fc.Ingress, DefaultHome: fc.DefaultHome, Replicas: fc.Replicas,
		Version: buildinfo.Version(), Options: d.natsOptions(fc),
		Logger: d.logger.With("component", "fleet"), Clock: d.clock,
	})
	if err != nil {
		d.logger.Error("fleet unavailable", "component", "fleet", "err", err)
		d.checker.Register("fleet", func(context.Context) error { return err })
		return
	}
	d.fleet = f
	d.checker.Register("fleet", func(context.Context) error {
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
		if hk != "" && why == fleet.HoldNoChannel && d.now().Sub(since) > time.Minute {
			return fmt.Errorf("this box's queue has waited %s on a message of %s for a channel that does not run here (journalctl -u agent -g fleet)", d.now().Sub(since).Round(time.Second), hk)
		}
		if hk != "" && d.now().Sub(since) > time.Minute {
			return fmt.Errorf("this box's queue has waited %s on %s, which is being moved or rehomed (an abandoned move is undone a minute after its coordinator stops; agentctl fleet status)", d.now().Sub(since).Round(time.Second), hk)
		}
		return nil
	})
	labels := metrics.Labels{"box": fc.Box}
	d.metrics.GaugeFunc("agent_fleet_connected", "1 while the fleet's NATS JetStream is reachable.", labels, func() float64 {
		if f.Connected() {
			return 1
		}
		return 0
	})
	d.metrics.GaugeFunc("agent_fleet_consumer_lag", "Messages of the fleet's stream this box has not settled yet (its durable consumer's pending and unacknowledged).", labels,
		func() float64 { return float64(f.Lag()) })
	d.setComponent("fleet", "box "+fc.Box)
}

// runFleet runs the link until ctx ends; the returned func stops it and
// waits.
func (d *Daemon) runFleet(ctx context.Context) func() {
	if d.fleet == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.fleet.Run(ctx, fleetLocal{d}); err != nil {
			d.logger.Error("fleet stopped", "component", "fleet", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
		d.fleet.Close()
	}
}

// fleetLocal is this box's part of the fleet (fleet.Local).
type fleetLocal struct{ d *Daemon }

// Drained: no message of the conversation waits in the inbox (or is in a
// running turn), and none of its replies waits in the outbox (the new box
// must not answer before them), on the WeCom app's channel or the AI
// Bot's (a WeCom user's conversation is both), no turn of it is held
// for the model service, and no run of the user's scheduled jobs is in
// flight.
func (l fleetLocal) Drained(ctx context.Context, channel, conv string) (bool, error) {
	bot := channel
	if channel == wecomChannel {
		bot = wecombot.Name
	}
	q := `SELECT count(*) FROM inbox WHERE channel IN (?, ?) AND state = 0 AND sender = ? AND chat_id = ''`
	id, botTo := conv, conv
	if chat, ok := strings.CutPrefix(conv, assistant.GroupPrefix); ok {
		q, id, botTo = `SELECT count(*) FROM inbox WHERE channel IN (?, ?) AND state = 0 AND chat_id = ?`, chat, "group:"+channel+":"+chat
	}
	var n, out int
	if err := l.d.store.DB().QueryRowContext(ctx, q, channel, bot, id).Scan(&n); err != nil {
		return false, err
	}
	if err := l.d.store.DB().QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE ((channel = ? AND to_user = ?) OR (channel = ? AND to_user = ?)) AND state IN (0, 3)`,
		channel, id, bot, botTo).Scan(&out); err != nil {
		return false, err
	}
	if n > 0 || out > 0 {
		return false, nil
	}
	busy, err := l.d.asst.ConversationBusy(ctx, channel, conv)
	return !busy, err
}

func (l fleetLocal) Export(ctx context.Context, channel, conv string) ([]byte, error) {
	return l.d.asst.ExportConversation(ctx, channel, conv)
}

func (l fleetLocal) Import(ctx context.Context, channel, conv string, snap []byte) error {
	return l.d.asst.ImportConversation(ctx, channel, conv, snap)
}

func (l fleetLocal) ExportFiles(ctx context.Context, channel, conv string, w io.Writer) error {
	return l.d.asst.ExportConversationFiles(ctx, channel, conv, w)
}

func (l fleetLocal) ImportFiles(ctx context.Context, channel, conv string, r io.Reader) error {
	return l.d.asst.ImportConversationFiles(ctx, channel, conv, r)
}

func (l fleetLocal) Holds(ctx context.Context, channel, conv string) (bool, error) {
	return l.d.asst.HoldsConversation(ctx, channel, conv)
}

func (l fleetLocal) Release(ctx context.Context, channel, conv string) error {
	return l.d.asst.ReleaseConversation(ctx, channel, conv)
}

func (l fleetLocal) Held(ctx context.Context) ([]fleet.Conversation, error) {
	convs, err := l.d.asst.HeldConversations(ctx, wecomChannel)
	out := make([]fleet.Conversation, len(convs))
	for i, c := range convs {
		out[i] = fleet.Conversation{Channel: wecomChannel, Conv: c}
	}
	return out, err
}

func (l fleetLocal) Purge(ctx context.Context, channel, conv string) error {
	return l.d.asst.PurgeConversation(ctx, channel, conv)
}

func (l fleetLocal) Beat(ctx context.Context) fleet.Beat {
	b := fleet.Beat{RSSBytes: metrics.ResidentBytes(os.Getpagesize())}
	b.Healthy = l.d.checker.Run(ctx).Healthy
	l.d.store.DB().QueryRowContext(ctx, `SELECT count(*) FROM inbox WHERE state = 0`).Scan(&b.QueueDepth)
	return b
}

// errNoFleet answers the fleet commands on a box not in a fleet.
var errNoFleet = errors.New("this box is not in a fleet (fleet.enabled = false)")

// fleetUser is the WeCom conversation agentctl names: a user id
// ("zhangsan", "wecom:zhangsan") or a group chat ("group:CHATID").
func fleetUser(user string) (string, error) {
	user = strings.TrimPrefix(strings.TrimSpace(user), "wecom:")
	if user == "" {
		return "", errors.New("a user is required (the WeCom user id, or group:CHATID)")
	}
	return user, nil
}

// FleetStatus implements admin.FleetBackend.
func (d *Daemon) FleetStatus(ctx context.Context) (admin.FleetView, error) {
	if d.fleet == nil {
		return admin.FleetView{}, errNoFleet
	}
	v, err := d.fleet.Status(ctx)
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
func (d *Daemon) FleetHome(ctx context.Context, req admin.FleetRequest) (admin.FleetHome, error) {
	if d.fleet == nil {
		return admin.FleetHome{}, errNoFleet
	}
	user, err := fleetUser(req.User)
	if err != nil {
		return admin.FleetHome{}, err
	}
	h, err := d.fleet.SetHome(ctx, wecomChannel, user, req.Box)
	if err != nil {
		return admin.FleetHome{}, err
	}
	d.logger.Info("fleet: user homed by the operator", "user", user, "box", h.Box)
	return admin.FleetHome{Channel: wecomChannel, User: user, Box: h.Box, Since: h.Since, From: h.From}, nil
}

// FleetMove implements admin.FleetBackend.
func (d *Daemon) FleetMove(ctx context.Context, req admin.FleetRequest) (admin.FleetMoved, error) {
	if d.fleet == nil {
		return admin.FleetMoved{}, errNoFleet
	}
	user, err := fleetUser(req.User)
	if err != nil {
		return admin.FleetMoved{}, err
	}
	r, err := d.fleet.Move(ctx, wecomChannel, user, req.Box)
	if err != nil {
		return admin.FleetMoved{}, err
	}
	return admin.FleetMoved{From: r.From, To: r.To, Since: r.Since, Bytes: r.Bytes, FileBytes: r.Files, Seconds: r.Took.Seconds(), PurgeErr: r.PurgeErr}, nil
}

// wecomChannel is the channel the fleet carries (the WeCom app's).
const wecomChannel = "wecom"
