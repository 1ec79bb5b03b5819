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
	"agent/pkg/store"
	"agent/pkg/wecom/aibot"
)

// What a message stores is bounded, whatever its size: a user's huge
// frames cannot make every pass over the pending rows read megabytes.
// A repeated msgid stores nothing; a group frame without its chat id is
// not taken for a direct message.
func TestHandleStoresBoundedRows(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), store.FileName), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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
