package mailbox

import (
	"context"
	"testing"
	"time"

	"agent/pkg/clock"
)

// A conversation waits while its pending inbox rows or undelivered
// outbox rows are there: a direct one's are its sender's outside any
// chat, a group chat's are the chat's whoever sent them; other channels'
// rows and finished rows do not count.
func TestWaitingQueuedPendingCount(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	clk := clock.NewFake(time.Time{})
	in, other := NewInbox(db, "wecom", clk), NewInbox(db, "voice", clk)
	for _, m := range []Received{
		{DedupKey: "1", Sender: "alice", Content: "dm"},
		{DedupKey: "2", Sender: "alice", ChatID: "chat7", Content: "in the group"},
		{DedupKey: "3", Sender: "bob", ChatID: "chat7", Content: "in the group"},
		{DedupKey: "4", Sender: "carol", Content: "seen", State: InIgnored},
	} {
		if _, err := in.Put(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Put(ctx, Received{DedupKey: "1", Sender: "dave", Content: "voice's"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sender, chat string
		want         int
	}{{"alice", "", 1}, {"bob", "", 0}, {"carol", "", 0}, {"dave", "", 0}, {"", "chat7", 2}, {"alice", "chat7", 2}, {"", "chat8", 0}} {
		if n, err := in.Waiting(ctx, c.sender, c.chat); err != nil || n != c.want {
			t.Errorf("Waiting(%q, %q) = %d, %v; want %d", c.sender, c.chat, n, err, c.want)
		}
	}
	if n, err := PendingCount(ctx, db); err != nil || n != 4 {
		t.Errorf("PendingCount = %d, %v; want 4 (every channel's pending rows)", n, err)
	}

	o := NewOutbox(db, OutboxConfig{Channel: "wecom", Clock: clk})
	if err := o.Enqueue(ctx, "alice", texts("a1", "a2")...); err != nil {
		t.Fatal(err)
	}
	if err := NewOutbox(db, OutboxConfig{Channel: "voice", Clock: clk}).Enqueue(ctx, "bob", texts("b1")...); err != nil {
		t.Fatal(err)
	}
	db.Exec(`UPDATE outbox SET state = ? WHERE content = 'a1'`, OutSending)
	if n, err := o.Queued(ctx, "alice"); err != nil || n != 2 {
		t.Errorf("Queued(alice) = %d, %v; want 2 (one being sent, one pending)", n, err)
	}
	if n, err := o.Queued(ctx, "bob"); err != nil || n != 0 {
		t.Errorf("Queued(bob) = %d, %v; want 0 (another channel's)", n, err)
	}
	db.Exec(`UPDATE outbox SET state = ? WHERE content = 'a1'`, OutSent)
	db.Exec(`UPDATE outbox SET state = ? WHERE content = 'a2'`, OutFailed)
	if n, err := o.Queued(ctx, "alice"); err != nil || n != 0 {
		t.Errorf("Queued(alice) after sent and failed = %d, %v; want 0", n, err)
	}
}
