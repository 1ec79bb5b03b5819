package wecombot

import (
	"context"
	"strings"

	"agent/pkg/channel"
)

var _ channel.Drainer = (*Bot)(nil)

// Drained reports whether nothing of fleet conversation conv (a user id,
// or "group:" and a chat id) waits in the bot's inbox (a message not yet
// taken into a turn, or in a turn still running) or its push outbox (a
// reply not yet delivered: the box the conversation moves to must not
// answer before it). A group chat's pushes go to "group:wecom:CHATID".
func (b *Bot) Drained(ctx context.Context, conv string) (bool, error) {
	sender, chat, to := conv, "", conv
	if id, ok := strings.CutPrefix(conv, "group:"); ok {
		sender, chat, to = "", id, "group:"+scope+":"+id
	}
	n, err := b.inbox.Waiting(ctx, sender, chat)
	if err != nil || n > 0 {
		return false, err
	}
	n, err = b.outbox.Queued(ctx, to)
	return n == 0 && err == nil, err
}
