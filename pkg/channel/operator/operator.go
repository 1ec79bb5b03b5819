// Package operator is the admin channel: the operator's own way in, over
// the 0600 admin socket (agentctl send, agentctl console's web console).
// Its user scopes are "admin:NAME"; it is owner by construction (only who
// can open the socket gets here). Requests arrive through the admin API,
// which runs them with the assistant's Ask; the channel itself serves no
// route and runs nothing, and it cannot message the operator unprompted:
// agentctl shows replies only to its own request.
package operator

import (
	"context"
	"fmt"

	"agent/pkg/channel"
	"agent/pkg/recipient"
)

// Channel is the admin channel.
type Channel struct{}

var _ channel.Channel = Channel{}

// Build makes the admin channel; it is always enabled (channel.Build).
func Build(context.Context, channel.Host) (channel.Channel, error) { return Channel{}, nil }

// Name is "admin".
func (Channel) Name() string { return recipient.AdminChannel }

// Routes: none; the admin API is on its own socket.
func (Channel) Routes() []channel.Route { return nil }

// Run: nothing runs in the background.
func (Channel) Run(context.Context) error { return nil }

// Send refuses: nobody is listening between agentctl requests.
func (Channel) Send(context.Context, string, string) error {
	return fmt.Errorf("%w: the admin channel shows replies only to the agentctl request that asked", channel.ErrNoPush)
}
