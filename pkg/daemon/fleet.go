package daemon

import (
	"context"
	"slices"

	"agent/pkg/channel"
	"agent/pkg/config"
	"agent/pkg/fleetlink"
)

// A box of a fleet (fleet.enabled) is linked to the others by
// pkg/fleetlink. The link is made before the channels (they take it from
// the host) and runs with them.

// startFleet joins this box's fleet when fleet.enabled.
func (d *Daemon) startFleet(cfg *config.Config) {
	d.fleet = fleetlink.Connect(fleetlink.Config{Fleet: cfg.Fleet, Channel: d.opts.FleetChannel, Egress: d.egress,
		Logger: d.logger, Clock: d.clock, Health: d.checker, Metrics: d.metrics})
	if d.fleet != nil {
		d.setComponent("fleet", "box "+cfg.Fleet.Box)
	}
}

// fleetLink is what this box answers the fleet and agentctl fleet with.
func (d *Daemon) fleetLink() fleetlink.Link {
	return fleetlink.Link{Fleet: d.fleet, Channel: d.opts.FleetChannel, Conversations: d.asst.Portable(),
		Drainers: d.drainers, Health: d.checker, DB: d.store.DB(), Logger: d.logger}
}

// runFleet runs the link until ctx ends; the returned func stops it and
// waits.
func (d *Daemon) runFleet(ctx context.Context) func() { return d.fleetLink().Run(ctx) }

// drainers are the channels answering for name (itself, or aliased to it)
// that say whether a conversation is drained.
func (d *Daemon) drainers(name string) []channel.Drainer {
	var out []channel.Drainer
	for _, c := range d.channels.All() {
		al, _ := c.(channel.Aliased)
		if dr, ok := c.(channel.Drainer); ok && (c.Name() == name || al != nil && slices.Contains(al.Aliases(), name)) {
			out = append(out, dr)
		}
	}
	return out
}
