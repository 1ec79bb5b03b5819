package daemon

import (
	"context"

	"agent/pkg/admin"
	"agent/pkg/assistant"
)

// adminBackend is what the admin socket serves: the host's part (status,
// reload, pairings, the console) and the assistant's (send, sessions,
// memory, jobs, tools).
type adminBackend struct {
	*Daemon
	*assistant.Assistant
}

var (
	_ admin.Backend            = adminBackend{}
	_ admin.PairingBackend     = adminBackend{}
	_ admin.ConsoleBackend     = adminBackend{}
	_ admin.MemoryBackend      = adminBackend{}
	_ admin.JobsBackend        = adminBackend{}
	_ admin.ToolsBackend       = adminBackend{}
	_ admin.CustomToolsBackend = adminBackend{}
	_ admin.SkillsBackend      = adminBackend{}
)

// Reload is the daemon's: the whole configuration file.
func (b adminBackend) Reload(ctx context.Context) error { return b.Daemon.Reload(ctx) }
