// Package channel is the seam between the assistant and the ways people
// reach it. A channel (WeCom, the voice WebSocket, the operator's admin
// socket, ...) implements Channel: its name, the HTTP routes it serves on
// server.listen, the background work it runs and how text is sent to one of
// its users. What only some channels can do is an optional interface the
// host discovers by type assertion: sending media, disconnecting a user,
// offering tools to the model, closing connections the HTTP server does not
// own.
//
// The daemon keeps a Set of the enabled channels: it mounts their routes,
// runs each one under a supervisor (a Run that fails or panics is logged,
// reported on /healthz and restarted with backoff, and never takes the
// daemon or another channel down) and delivers outbound text — the message
// tool, scheduled jobs, pairing notices, self-check reports — by a lookup
// on the channel name.
package channel

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"agent/pkg/turn"
)

// Channel is one way into the assistant.
type Channel interface {
	// Name is the channel's part of a user scope ("wecom" in
	// "wecom:zhangsan"); unique in a Set.
	Name() string
	// Routes are the HTTP handlers the channel serves on server.listen
	// (nil: none). Patterns are net/http.ServeMux patterns.
	Routes() []Route
	// Run does the channel's background work (a dial-out connection, an
	// inbox processor, an outbox) until ctx ends. A channel with none
	// returns nil at once; a returned error or a panic before ctx ends is
	// a failure: the Set restarts Run with backoff.
	Run(ctx context.Context) error
	// Send delivers text to one user or chat of the channel ("zhangsan",
	// without the channel prefix). A channel that cannot reach its users
	// unprompted returns an error saying so. Callers have checked that
	// the sender may address to (pkg/recipient).
	Send(ctx context.Context, to, text string) error
}

// Route is one HTTP handler on server.listen.
type Route struct {
	Pattern string // "GET /voice", "/wecom/callback"
	Handler http.Handler
}

// MediaSender is a channel that can send files, not only text.
type MediaSender interface {
	SendMedia(ctx context.Context, to string, m turn.Media) error
}

// Disconnecter is a channel with live connections per user (a revoked
// device is disconnected at once). It returns how many were closed.
type Disconnecter interface {
	Disconnect(principal string) int
}

// Closer is a channel holding connections the HTTP server's Shutdown does
// not close (hijacked WebSockets); the host calls Close while stopping,
// before the conversation pipeline stops.
type Closer interface {
	Close(ctx context.Context) error
}

// FastTurns is a channel whose users wait for each answer in real time
// (voice and hardware devices): their turns, scheduled ones included, are
// latency-first (conversation.Inbound.Fast).
type FastTurns interface {
	FastTurns() bool
}

// Aliased is a channel that also answers for other channel names when no
// channel of that name is enabled (the WeCom AI Bot reaches "wecom" users
// when the app channel is off).
type Aliased interface {
	Aliases() []string
}

// Claimer is a channel that takes some recipients of another channel's
// name even when that channel is enabled: the ones only it can reach (the
// WeCom AI Bot's group chats, which the app channel cannot message).
type Claimer interface {
	Claims(ctx context.Context, name, to string) bool
}

// Drainer is a channel that says whether nothing of a conversation waits
// in its inbox or outbox (a fleet moves a conversation only then). conv is
// the fleet's conversation id: a user id, or "group:CHATID" for a group
// chat.
type Drainer interface {
	Drained(ctx context.Context, conv string) (bool, error)
}

// Console is a channel the web console talks through (the voice channel:
// the console's microphone and replies); ConsoleOperator is the principal
// its console connections speak as, whose connections close when the
// operator ends every console session.
type Console interface {
	ConsoleOperator() string
}

// ErrNoChannel is returned (wrapped) for a channel name no enabled channel
// has.
var ErrNoChannel = errors.New("channel is not connected on this agent")

// notConnected is ErrNoChannel naming the channel.
type notConnected string

func (n notConnected) Error() string {
	return fmt.Sprintf("channel %q is not connected on this agent", string(n))
}
func (n notConnected) Is(target error) bool { return target == ErrNoChannel }

// ErrNoPush is returned (wrapped) by a channel that cannot send to a user
// who has not asked for something (the admin socket, voice devices).
var ErrNoPush = errors.New("channel cannot send unprompted messages")
