// Package adminsrv is the admin server's backend: what agentctl talks to.
// It implements pkg/admin's backend interfaces over the box's parts — the
// host (status, reload), the conversation pipeline (send, sessions,
// memory, jobs, tools, custom tools, skills, the command cache) and the
// egress ledger — and composes the parts that implement their own (the
// fleet link, DM pairings, the web console sign-in). pkg/admin stays the
// API and its client, so agentctl does not carry the assistant.
package adminsrv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"agent/pkg/admin"
	"agent/pkg/assistant"
	"agent/pkg/buildinfo"
	"agent/pkg/config"
	"agent/pkg/egress"
	"agent/pkg/health"
	"agent/pkg/metrics"
)

// Backend is what the admin socket serves. Every field is required
// (admin.Serve offers each part's endpoints; a missing part would answer
// them with a panic, not with 501).
type Backend struct {
	Host      Host
	Assistant *assistant.Assistant
	Ledger    *egress.Ledger // every outbound connection
	Logger    *slog.Logger   // the operator's changes are logged here

	// The parts that answer for themselves: agentctl fleet (fleetlink),
	// pair and console.
	admin.FleetBackend
	admin.PairingBackend
	admin.ConsoleBackend
}

var (
	_ admin.Backend            = (*Backend)(nil)
	_ admin.PairingBackend     = (*Backend)(nil)
	_ admin.ConsoleBackend     = (*Backend)(nil)
	_ admin.MemoryBackend      = (*Backend)(nil)
	_ admin.JobsBackend        = (*Backend)(nil)
	_ admin.ToolsBackend       = (*Backend)(nil)
	_ admin.CustomToolsBackend = (*Backend)(nil)
	_ admin.SkillsBackend      = (*Backend)(nil)
	_ admin.EgressBackend      = (*Backend)(nil)
	_ admin.CacheBackend       = (*Backend)(nil)
	_ admin.FleetBackend       = (*Backend)(nil)
)

// Host is the daemon as agentctl status and reload see it.
type Host struct {
	Config     func() *config.Config // the configuration in force
	Health     *health.Checker
	Now        func() time.Time // the daemon's clock
	Started    time.Time
	Listen     string                   // server.listen's bound address
	Components func() map[string]string // name -> "ready" | "loading" | "unavailable: reason"
	// Reload re-reads the whole configuration file (SIGHUP's).
	Reload func(ctx context.Context) error
}

func (b *Backend) logger() *slog.Logger {
	if b.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Logger
}

// ready is the pipeline's refusal while it did not start (as its parts'
// accessors say it).
func (b *Backend) ready() error {
	if err := b.Assistant.Err(); err != nil {
		return fmt.Errorf("the conversation pipeline is unavailable: %v", err)
	}
	return nil
}

// Status implements admin.Backend.
func (b *Backend) Status(ctx context.Context) admin.Status {
	h := b.Host
	cfg := h.Config()
	rep := h.Health.Run(ctx)
	st := admin.Status{
		Version:    buildinfo.Version(),
		PID:        os.Getpid(),
		StartedAt:  h.Started,
		Uptime:     h.Now().Sub(h.Started).Round(time.Second).String(),
		ConfigPath: cfg.Path,
		StateDir:   cfg.Agent.StateDir,
		Listen:     h.Listen,
		RSSBytes:   metrics.ResidentBytes(os.Getpagesize()),
		Healthy:    rep.Healthy,
		Components: map[string]string{},
	}
	for _, c := range rep.Checks {
		st.Checks = append(st.Checks, admin.Check{Name: c.Name, Status: string(c.Status), Detail: c.Detail})
	}
	st.Components = h.Components()
	if a := b.Assistant; a != nil {
		if bl, err := a.Backlog(); err == nil {
			if s, err := bl.Stats(ctx); err == nil {
				st.Held = &admin.Held{Turns: s.Held, Conversations: s.Conversations, Oldest: s.Oldest}
			}
		}
		if m, err := a.Memory(); err == nil {
			if s, err := m.Stats(ctx, ""); err == nil {
				st.Memory = &admin.MemoryStatus{Facts: s.Facts, Unembedded: s.Unembedded, Semantic: s.Semantic}
			}
		}
	}
	return st
}

// Reload implements admin.Backend: the whole configuration file.
func (b *Backend) Reload(ctx context.Context) error { return b.Host.Reload(ctx) }

// Egress is the ledger's report (pkg/egress).
func (b *Backend) Egress(ctx context.Context, since time.Time) (egress.Report, error) {
	return b.Ledger.Report(ctx, since)
}
