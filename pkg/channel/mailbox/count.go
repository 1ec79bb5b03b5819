package mailbox

import (
	"context"
	"database/sql"
	"fmt"
)

// What waits, counted: a fleet moves a conversation only once nothing of
// it waits in its channels' inbox or outbox, and its heartbeat reports
// how many messages wait on the box.

// Waiting counts the pending rows of one conversation: when chat is "",
// sender's direct messages (rows outside any chat); else the group chat's
// rows, whoever sent them.
func (in *Inbox) Waiting(ctx context.Context, sender, chat string) (int, error) {
	q, arg := `SELECT count(*) FROM inbox WHERE channel = ? AND state = 0 AND sender = ? AND chat_id = ''`, sender
	if chat != "" {
		q, arg = `SELECT count(*) FROM inbox WHERE channel = ? AND state = 0 AND chat_id = ?`, chat
	}
	var n int
	if err := in.db.QueryRowContext(ctx, q, in.channel, arg).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s inbox: waiting: %w", in.channel, err)
	}
	return n, nil
}

// Queued counts the rows to recipient to not delivered yet (pending, or
// being sent).
func (o *Outbox) Queued(ctx context.Context, to string) (int, error) {
	var n int
	if err := o.db.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE channel = ? AND to_user = ? AND state IN (0, 3)`, o.ch, to).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s outbox: queued: %w", o.ch, err)
	}
	return n, nil
}

// PendingCount counts every channel's pending inbox rows.
func PendingCount(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM inbox WHERE state = 0`).Scan(&n); err != nil {
		return 0, fmt.Errorf("inbox: pending count: %w", err)
	}
	return n, nil
}
