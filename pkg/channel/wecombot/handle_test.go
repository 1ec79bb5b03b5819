package wecombot

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/channel/mailbox"
	"agent/pkg/clock"
	"agent/pkg/store/storetest"
	"agent/pkg/wecom/aibot"
)

// What a message stores is bounded, whatever its size: a user's huge
// frames cannot make every pass over the pending rows read megabytes.
// A repeated msgid stores nothing; a group frame without its chat id is
// not taken for a direct message.
func TestHandleStoresBoundedRows(t *testing.T) {
	st := storetest.Open(t)
	b := &Bot{inbox: mailbox.NewInbox(st.DB(), Name, nil), logger: slog.New(slog.DiscardHandler), clock: clock.Real()}
	frame := func(msgid, chattype, chat, text string) aibot.Frame {
		body, _ := json.Marshal(map[string]any{"msgid": msgid, "chattype": chattype, "chatid": chat,
			"from": map[string]string{"userid": "mallory"}, "msgtype": "text", "text": map[string]string{"content": text}})
		return aibot.Frame{Cmd: aibot.CmdMsgCallback, Headers: aibot.Headers{ReqID: "r-" + msgid}, Body: body}
	}
	ctx := context.Background()
	b.handle(ctx, frame("big", "single", "", strings.Repeat("x", 3<<20)))
	b.handle(ctx, frame("big", "single", "", "again"))
	b.handle(ctx, frame("nochat", "group", "", "hello group"))
	rows, err := b.inbox.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows, want the big one only", len(rows))
	}
	if len(rows[0].Content) > maxContent || len(rows[0].Raw) > 200 || !strings.Contains(rows[0].Raw, `"req_id":"r-big"`) {
		t.Fatalf("stored %d bytes of content, raw %q", len(rows[0].Content), rows[0].Raw)
	}
}

// The bot claims the "wecom" recipients only it can reach: group chats it
// has had messages from, or named as groups; users stay the app
// channel's.
func TestClaimsGroupsOnly(t *testing.T) {
	st := storetest.Open(t)
	b := &Bot{inbox: mailbox.NewInbox(st.DB(), Name, nil), logger: slog.New(slog.DiscardHandler), clock: clock.Real()}
	b.host.DB = st.DB()
	b.media = newFetcher(filepath.Join(t.TempDir(), "spool"), "ws://127.0.0.1:1", nil, nil, b.logger)
	body, _ := json.Marshal(map[string]any{"msgid": "g1", "chattype": "group", "chatid": "chat-7",
		"from": map[string]string{"userid": "lisi"}, "msgtype": "text", "text": map[string]string{"content": "@bot hi"}})
	ctx := context.Background()
	b.handle(ctx, aibot.Frame{Cmd: aibot.CmdMsgCallback, Headers: aibot.Headers{ReqID: "r1"}, Body: body})
	for to, want := range map[string]bool{"chat-7": true, "wecom:chat-7": true, "group:wecom:chat-x": true, "lisi": false, "wecom:lisi": false, "": false} {
		if got := b.Claims(ctx, "wecom", to); got != want {
			t.Errorf("Claims(wecom, %q) = %v, want %v", to, got, want)
		}
	}
	if b.Claims(ctx, "voice", "chat-7") {
		t.Error("claimed another channel's recipient")
	}
}
