package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"agent/pkg/channel"
	"agent/pkg/channel/gate"
	"agent/pkg/channelhost"
	"agent/pkg/pairing"
)

// startChannels builds the channels of Options.Channels (the list
// cmd/agent hands over), registers the tools they offer and runs them
// under the set's supervisor until ctx ends. A channel that cannot be
// built is reported on /healthz under its name; the others and the daemon
// run on.
func (d *Daemon) startChannels(ctx context.Context) {
	env := d.channelEnv()
	set, _ := channel.NewSet(d.logger, d.clock)
	d.channels = set
	for _, b := range d.opts.Channels {
		list, err := build(ctx, b, env)
		for _, c := range list {
			if aerr := set.Add(c); aerr != nil {
				err = errors.Join(err, aerr)
				continue
			}
			d.checker.Register("channel_"+c.Name(), channelhost.Health{C: d.checker}.Wrap(set.Check(c.Name())))
			if p, ok := c.(channelhost.ToolProvider); ok && d.asst.Err() == nil {
				d.registerChannelTools(c.Name(), p)
			}
		}
		if err != nil {
			d.logger.Error(b.Name+" channel unavailable", "component", b.Name, "err", err)
			d.checker.Register(b.Name, func(context.Context) error { return err })
		}
	}
	set.Start(ctx)
}

// channelEnv is what every channel is built with.
func (d *Daemon) channelEnv() channelhost.Env {
	env := channelhost.Env{
		Host: channel.Host{
			Logger:  d.logger,
			Clock:   d.clock,
			Turns:   d.asst.Turns(),
			Metrics: channelhost.Metrics{R: d.metrics},
			Health:  channelhost.Health{C: d.checker},
		},
		Config:     d.config,
		DB:         d.store.DB(),
		Gate:       gate.Gate{Pairings: d.pairings(), Policy: d.dmPolicy},
		Recipients: d.asst.Recipients(),
		Egress:     d.egress,
		Fleet:      d.fleet,
		Console:    d.sessions,
	}
	if d.opts.Scrubber != nil {
		env.Scrub = d.opts.Scrubber.Scrub // stored errors are redacted like the logs
	}
	if sp := d.asst.Spaces(); sp != nil {
		env.Files, env.Spaces = sp, sp
	}
	if m, ok := d.opts.Models.(channelhost.Models); ok {
		env.Models = m
	}
	return env
}

// build runs b's Build (or Many); a panic in it disables the channel, not
// the daemon.
func build(ctx context.Context, b channelhost.Builder, env channelhost.Env) (list []channel.Channel, err error) {
	defer func() {
		if p := recover(); p != nil {
			list, err = nil, fmt.Errorf("panic while building the channel: %v", p)
		}
	}()
	if b.Many != nil {
		return b.Many(ctx, env)
	}
	c, err := b.Build(ctx, env)
	if c == nil || err != nil {
		return nil, err // not enabled, or unavailable
	}
	return []channel.Channel{c}, nil
}

// registerChannelTools adds a channel's own tools, each limited to that
// channel's users: a tool's profiles must be exactly the channel's own
// (its name), never none (every channel's users) nor another channel's
// (the operator's admin included).
func (d *Daemon) registerChannelTools(name string, p channelhost.ToolProvider) {
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
