package daemon

import (
	"agent/pkg/adminsrv"
)

// adminBackend is what the admin socket serves (pkg/adminsrv): the host's
// status and reload, the pipeline's parts, the egress ledger, the fleet
// link, the DM pairings and the console's sign-in.
func (d *Daemon) adminBackend() *adminsrv.Backend {
	return &adminsrv.Backend{
		Host: adminsrv.Host{Config: d.config, Health: d.checker, Now: d.now, Started: d.started, Listen: d.httpAddr,
			Components: d.componentStates, Reload: d.Reload},
		Assistant:      d.asst,
		Ledger:         d.egress,
		Logger:         d.logger,
		FleetBackend:   d.fleetLink(),
		PairingBackend: adminsrv.Pairings{Store: d.pairings(), Send: d.sendOut, Disconnect: d.channels.Disconnect, Logger: d.logger},
		ConsoleBackend: adminsrv.Console{Sessions: d.sessions, Listen: d.httpAddr, Channels: d.channels, Logger: d.logger},
	}
}
