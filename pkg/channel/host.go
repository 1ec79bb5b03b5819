package channel

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"

	"agent/pkg/channel/gate"
	"agent/pkg/clock"
	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/egress"
	"agent/pkg/fleet"
	"agent/pkg/health"
	"agent/pkg/metrics"
	"agent/pkg/recipient"
	"agent/pkg/workspace"
)

// Host is what the daemon offers every channel it builds. A channel's
// Build function reads its own config section and takes what it needs.
type Host struct {
	Config func() *config.Config // the configuration in force (follows reloads)
	DB     *sql.DB               // the daemon's database (inbox, outbox, pairings)
	Logger *slog.Logger
	Clock  clock.Clock
	// Metrics and Health take the channel's gauges and readiness checks.
	Metrics *metrics.Registry
	Health  *health.Checker
	// Scrub redacts secrets from what a channel stores (errors).
	Scrub func(string) string
	// Gate is the DM policy every inbound message passes.
	Gate gate.Gate
	// Assistant is the conversation pipeline, never nil; its Conversation
	// is nil when the pipeline did not start (Err says why: a channel then
	// keeps what arrives to answer after a restart, or tells the user it
	// cannot answer).
	Assistant Assistant
	// Models are the local models (localmodels.Set): a channel asserts the
	// capability it uses (Recognizer(), VAD()). nil: none.
	Models any
	// Console authenticates the web console's connections (console.Sessions).
	Console ConsoleSessions
	// Egress is the one way out (pkg/egress): a channel dials WeCom and
	// downloads through it; nil: directly (tests).
	Egress *egress.Ledger
	// Fleet is the link to the other boxes of a fleet (pkg/fleet); nil
	// on a single box.
	Fleet *fleet.Fleet
}

// Assistant is the pipeline as channels see it (*assistant.Assistant).
type Assistant interface {
	// Conversation runs turns; nil while the pipeline is unavailable.
	Conversation() *conversation.Service
	// Spaces are the users' folders (uploads, files to send); nil while
	// the pipeline is unavailable.
	Spaces() *workspace.Spaces
	// Recipients decides whom a user may address.
	Recipients() recipient.Policy
	// CancelTurn stops the turn running for in's conversation.
	CancelTurn(in conversation.Inbound)
	// Err is why the pipeline is unavailable (nil when it runs).
	Err() error
}

// ConsoleSessions authenticates the web console (console.Sessions).
type ConsoleSessions interface {
	Session(r *http.Request) string
	Valid(id string) bool
	Verify(id, key string) bool
}

// Build makes a channel from the host's configuration; it returns nil,
// nil when the channel is not enabled. An error disables the channel, not
// the daemon: the host reports it on /healthz under the channel's name.
type Build func(ctx context.Context, h Host) (Channel, error)

// Builder is a channel's name and Build function, for the daemon's list.
type Builder struct {
	Name  string
	Build Build
}
