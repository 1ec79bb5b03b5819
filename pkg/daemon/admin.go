package daemon

import (
	"context"
	"time"

	"agent/pkg/admin"
	"agent/pkg/assistant"
	"agent/pkg/cmdcache"
	"agent/pkg/egress"
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
	_ admin.EgressBackend      = adminBackend{}
	_ admin.CacheBackend       = adminBackend{}
	_ admin.FleetBackend       = adminBackend{}
)

// CacheList lists the command cache (pkg/cmdcache).
func (b adminBackend) CacheList(ctx context.Context) ([]cmdcache.Entry, error) {
	c, err := b.Assistant.CommandCache()
	if err != nil {
		return nil, err
	}
	return c.List(ctx)
}

// CacheClear deletes command cache entries.
func (b adminBackend) CacheClear(ctx context.Context, id int64) (int, error) {
	c, err := b.Assistant.CommandCache()
	if err != nil {
		return 0, err
	}
	return c.Clear(ctx, id)
}

// Egress is the ledger's report (pkg/egress).
func (b adminBackend) Egress(ctx context.Context, since time.Time) (egress.Report, error) {
	return b.Daemon.egress.Report(ctx, since)
}

// Reload is the daemon's: the whole configuration file.
func (b adminBackend) Reload(ctx context.Context) error { return b.Daemon.Reload(ctx) }
