package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"agent/pkg/admin"
	"agent/pkg/channel"
	"agent/pkg/channel/gate"
	"agent/pkg/channel/operator"
	"agent/pkg/channel/voice"
	"agent/pkg/channel/wecom"
	"agent/pkg/channel/wecombot"
	"agent/pkg/config"
	"agent/pkg/pairing"
)

// DefaultChannels are the ways into the assistant, in the order they are
// built. A new channel is its own package with a Build function
// (channel.Build), its section in pkg/config, and one line here.
func DefaultChannels() []channel.Builder {
	return []channel.Builder{
		{Name: "admin", Build: operator.Build},
		{Name: "wecom", Build: wecom.Build},
		{Name: "wecom_bot", Build: wecombot.Build},
		{Name: "voice", Build: voice.Build},
	}
}

// startChannels builds the enabled channels, registers the tools they
// offer and runs them under the set's supervisor until ctx ends. A channel
// that cannot be built is reported on /healthz under its name; the others
// and the daemon run on.
func (d *Daemon) startChannels(ctx context.Context, cfg *config.Config) {
	host := channel.Host{
		Config:  d.config,
		DB:      d.store.DB(),
		Logger:  d.logger,
		Clock:   d.clock,
		Metrics: d.metrics,
		Health:  d.checker,
		Gate:    gate.Gate{Pairings: d.pairings(), Policy: d.dmPolicy},
		Models:  d.opts.Models,
		Console: d.sessions,
		Egress:  d.egress,
		Fleet:   d.fleet,
	}
	if d.opts.Scrubber != nil {
		host.Scrub = d.opts.Scrubber.Scrub // stored errors are redacted like the logs
	}
	host.Assistant = d.asst
	set, _ := channel.NewSet(d.logger, d.clock)
	d.channels = set
	for _, b := range d.opts.Channels {
		c, err := build(ctx, b, host)
		if err == nil && c != nil {
			err = set.Add(c)
		}
		if err != nil {
			d.logger.Error(b.Name+" channel unavailable", "component", b.Name, "err", err)
			d.checker.Register(b.Name, func(context.Context) error { return err })
			continue
		}
		if c == nil {
			continue // not enabled
		}
		d.checker.Register("channel_"+c.Name(), set.Check(c.Name()))
		if p, ok := c.(channel.ToolProvider); ok && d.asst.Err() == nil {
			d.registerChannelTools(c.Name(), p)
		}
	}
	set.Start(ctx)
}

// build runs b.Build; a panic in it disables the channel, not the daemon.
func build(ctx context.Context, b channel.Builder, h channel.Host) (c channel.Channel, err error) {
	defer func() {
		if p := recover(); p != nil {
			c, err = nil, fmt.Errorf("panic while building the channel: %v", p)
		}
	}()
	return b.Build(ctx, h)
}

// registerChannelTools adds a channel's own tools, each limited to that
// channel's users: a tool's profiles must be exactly the channel's own
// (its name), never none (every channel's users) nor another channel's
// (the operator's admin included).
func (d *Daemon) registerChannelTools(name string, p channel.ToolProvider) {
	for _, t := range p.Tools() {
		var err error
		switch {
		case len(t.Profiles) == 0:
			err = fmt.Errorf("%s offers it to every channel's users (no profiles)", name)
		case slices.ContainsFunc(t.Profiles, func(p string) bool { return p != name }):
			err = fmt.Errorf("%s may offer tools to its own users only (profile %q), not to %q", name, name, t.Profiles)
		default:
			err = d.asst.Register(t)
		}
		if err != nil {
			d.logger.Error("a tool of the "+name+" channel is not registered", "component", name, "tool", t.Name, "err", err)
		}
	}
}

// sendOut delivers text to a user of a channel (the assistant's outbound
// path: the message tool, scheduled jobs, notices to owners).
func (d *Daemon) sendOut(ctx context.Context, name, to, text string) error {
	if d.channels == nil {
		return fmt.Errorf("%w: %q", channel.ErrNoChannel, name)
	}
	return d.channels.Send(ctx, name, to, text)
}

// dmPolicy is the DM policy in force (it follows reloads).
func (d *Daemon) dmPolicy() pairing.Policy {
	cfg := d.config()
	return pairing.Policy{Mode: cfg.Security.DMPolicy, AllowFrom: cfg.Security.AllowFrom, Owners: cfg.Agent.Owners}
}

func (d *Daemon) pairings() *pairing.Store { return pairing.New(d.store.DB(), d.now) }

func adminPairing(e pairing.Entry) admin.Pairing {
	p := admin.Pairing{User: e.User, Code: e.Code, Since: e.Since, ApprovedBy: e.By, State: "pending"}
	if e.Approved {
		p.State = "approved"
	}
	return p
}

func pairingErr(err error) error {
	if errors.Is(err, pairing.ErrNotFound) {
		return fmt.Errorf("%w: %v", admin.ErrNotFound, err)
	}
	return err
}

// PairingList implements admin.PairingBackend.
func (d *Daemon) PairingList(ctx context.Context) ([]admin.Pairing, error) {
	list, err := d.pairings().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Pairing, len(list))
	for i, e := range list {
		out[i] = adminPairing(e)
	}
	return out, nil
}

// PairingApprove implements admin.PairingBackend; the user is told on
// their channel when it can reach them.
func (d *Daemon) PairingApprove(ctx context.Context, code string) (admin.Pairing, error) {
	e, err := d.pairings().Approve(ctx, code, "agentctl")
	if err != nil {
		return admin.Pairing{}, pairingErr(err)
	}
	d.logger.Info("pairing approved by the operator", "user", e.User)
	if name, user, ok := strings.Cut(e.User, ":"); ok {
		err := d.sendOut(ctx, name, user, pairing.ApprovedText)
		if err != nil && !errors.Is(err, channel.ErrNoPush) && !errors.Is(err, channel.ErrNoChannel) {
			d.logger.Warn("could not tell the approved user", "user", e.User, "err", err)
		}
	}
	return adminPairing(e), nil
}

// PairingRevoke implements admin.PairingBackend: the user's live
// connections close at once.
func (d *Daemon) PairingRevoke(ctx context.Context, user string) (admin.Pairing, error) {
	e, err := d.pairings().Revoke(ctx, user)
	if err != nil {
		return admin.Pairing{}, pairingErr(err)
	}
	d.logger.Info("pairing revoked by the operator", "user", e.User)
	if n := d.channels.Disconnect(e.User); n > 0 {
		d.logger.Info("connections of a revoked user closed", "user", e.User, "connections", n)
	}
	return adminPairing(e), nil
}
