package daemon

import (
	"agent/pkg/adminsrv"
)

// adminBackend is what the admin socket serves (pkg/adminsrv): the host's
// status and reload, the pipeline's parts, the egress ledger, the fleet
// link, and the host's own DM pairings (channels.go) and console sign-in
// (console.go).
func (d *Daemon) adminBackend() *adminsrv.Backend {
	return &adminsrv.Backend{
		Host: adminsrv.Host{Config: d.config, Health: d.checker, Now: d.now, Started: d.started, Listen: d.httpAddr,
			Components: d.componentStates, Reload: d.Reload},
		Assistant:      d.asst,
		Ledger:         d.egress,
		Logger:         d.logger,
		FleetBackend:   d.fleetLink(),
		PairingBackend: d,
		ConsoleBackend: d,
	}
}
