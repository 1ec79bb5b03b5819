package wecom

import (
	"context"
	"testing"

	"agent/pkg/channel/mailbox"
	"agent/pkg/store/storetest"
)

// A conversation of the app channel is drained once none of its messages
// is pending and none of its replies waits to be delivered; a group
// chat's rows are the chat's, a user's are their direct messages; the AI
// Bot's rows are not the app channel's.
func TestDrainedWaitsForInboxAndOutbox(t *testing.T) {
	ctx := context.Background()
	db := storetest.DB(t)
	c := &App{inbox: NewInbox(db, nil), outbox: NewOutbox(db, OutboxConfig{})}
	drained := func(conv string, want bool) {
		t.Helper()
		if got, err := c.Drained(ctx, conv); err != nil || got != want {
			t.Errorf("Drained(%q) = %v, %v; want %v", conv, got, err, want)
		}
	}
	put := func(in *mailbox.Inbox, key, sender, chat string) {
		t.Helper()
		if _, err := in.Put(ctx, mailbox.Received{DedupKey: key, Sender: sender, ChatID: chat, Kind: "text", Content: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	bot := mailbox.NewInbox(db, "wecom_bot", nil)
	put(bot, "1", "alice", "")
	put(bot, "2", "bob", "chat7")
	drained("alice", true)
	drained("group:chat7", true)

	put(c.inbox.mb, "1", "alice", "")
	put(c.inbox.mb, "2", "bob", "chat7")
	drained("alice", false)
	drained("bob", true) // bob's message is the group's
	drained("group:chat7", false)
	db.Exec(`UPDATE inbox SET state = ? WHERE channel = ?`, mailbox.InDone, Channel)
	drained("alice", true)
	drained("group:chat7", true)

	if err := c.outbox.q.Enqueue(ctx, "alice", mailbox.Item{Kind: "text", Content: "reply"}); err != nil {
		t.Fatal(err)
	}
	if err := c.outbox.q.Enqueue(ctx, "chat7", mailbox.Item{Kind: "text", Content: "reply"}); err != nil {
		t.Fatal(err)
	}
	drained("alice", false)
	drained("group:chat7", false)
	db.Exec(`UPDATE outbox SET state = ? WHERE channel = ?`, mailbox.OutSending, Channel)
	drained("alice", false) // in doubt: may be sent again
	db.Exec(`UPDATE outbox SET state = ? WHERE channel = ?`, mailbox.OutSent, Channel)
	drained("alice", true)
	drained("group:chat7", true)
}
