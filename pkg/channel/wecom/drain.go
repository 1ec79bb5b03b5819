package wecom

import (
	"context"
	"strings"

	"agent/pkg/channel"
)

var _ channel.Drainer = (*App)(nil)

// Drained reports whether nothing of fleet conversation conv waits in the
// app channel's inbox (a message not yet taken into a turn, or in a turn
// still running) or outbox (a reply not yet delivered: the box it moves
// to must not answer before it). conv is a user id or GroupPrefix and a
// chat id.
func (c *App) Drained(ctx context.Context, conv string) (bool, error) {
	sender, chat, to := conv, "", conv
	if id, ok := strings.CutPrefix(conv, GroupPrefix); ok {
		sender, chat, to = "", id, id
	}
	n, err := c.inbox.mb.Waiting(ctx, sender, chat)
	if err != nil || n > 0 {
		return false, err
	}
	n, err = c.outbox.q.Queued(ctx, to)
	return n == 0 && err == nil, err
}
