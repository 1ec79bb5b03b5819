package wecombot

import (
	"context"
	"testing"

	"agent/pkg/channel/mailbox"
	"agent/pkg/store/storetest"
)

// A conversation of the bot is drained once none of its messages is
// pending and none of its pushes waits; a group chat's pushes go to
// "group:wecom:CHATID"; the app channel's rows are not the bot's.
func TestDrainedWaitsForInboxAndPushes(t *testing.T) {
	ctx := context.Background()
	db := storetest.DB(t)
	b := &Bot{inbox: mailbox.NewInbox(db, Name, nil), outbox: mailbox.NewOutbox(db, mailbox.OutboxConfig{Channel: Name})}
	drained := func(conv string, want bool) {
		t.Helper()
		if got, err := b.Drained(ctx, conv); err != nil || got != want {
			t.Errorf("Drained(%q) = %v, %v; want %v", conv, got, err, want)
		}
	}
	app := mailbox.NewInbox(db, "wecom", nil)
	for _, in := range []*mailbox.Inbox{app, b.inbox} {
		if in == b.inbox {
			drained("alice", true)
			drained("group:chat7", true)
		}
		for _, m := range []mailbox.Received{{DedupKey: "1", Sender: "alice"}, {DedupKey: "2", Sender: "bob", ChatID: "chat7"}} {
			if _, err := in.Put(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	drained("alice", false)
	drained("bob", true)
	drained("group:chat7", false)
	db.Exec(`UPDATE inbox SET state = ? WHERE channel = ?`, mailbox.InDone, Name)
	drained("alice", true)
	drained("group:chat7", true)

	for _, to := range []string{"alice", "group:wecom:chat7"} {
		if err := b.outbox.Enqueue(ctx, to, mailbox.Item{Kind: "markdown", Content: "late reply"}); err != nil {
			t.Fatal(err)
		}
	}
	drained("alice", false)
	drained("group:chat7", false)
	db.Exec(`UPDATE outbox SET state = ? WHERE channel = ?`, mailbox.OutFailed, Name)
	drained("alice", true)
	drained("group:chat7", true)
}
