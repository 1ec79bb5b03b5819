// Package builtin is the one list of the channels this agent ships, in the
// order they are built. cmd/agent hands it to the daemon, which knows no
// channel by name. A new channel is its own package under pkg/channel with
// a Build function (channelhost.Build, or channel.Build for one that needs
// only the seam's Host), its config section, and one line here.
package builtin

import (
	"agent/pkg/channel/operator"
	"agent/pkg/channel/voice"
	"agent/pkg/channel/wecom"
	"agent/pkg/channel/wecombot"
	"agent/pkg/channelhost"
)

// Channels are the built-in channels and the out-of-process ones of
// [channels.NAME].
func Channels() []channelhost.Builder {
	return []channelhost.Builder{
		{Name: "admin", Build: channelhost.Plain(operator.Build)},
		{Name: wecom.Channel, Build: wecom.Build, Egress: wecom.Egress},
		{Name: wecombot.Name, Build: wecombot.Build, Egress: wecombot.Egress},
		{Name: voice.Channel, Build: voice.Build},
	}
}
