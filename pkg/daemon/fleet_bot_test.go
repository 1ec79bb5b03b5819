package daemon

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"agent/pkg/admin"
	"agent/pkg/fleet/natstest"
	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
	"agent/pkg/wecom/wecomtest"
	"agent/pkg/workspace"
)

// waitPushed waits for a push (aibot_send_msg) to chat whose markdown
// contains text.
func waitPushed(t *testing.T, bot *aibottest.Server, chat, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !slices.ContainsFunc(pushesTo(bot, chat), func(c string) bool { return strings.Contains(c, text) }) {
		if time.Now().After(deadline) {
			t.Fatalf("no push to %s with %q", chat, text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fleetBotConfig is the [wecom_bot] of a fleet's ingress on bot.
func fleetBotConfig(bot *aibottest.Server) string {
	return fmt.Sprintf("[wecom_bot]\nenabled = true\nbot_id = %q\nsecret = %q\nurl = %q\n", aibottest.BotID, aibottest.Secret, bot.URL())
}

// The AI Bot in a fleet: the ingress holds the one connection, and each
// bot message is answered on its sender's home box (one user, one memory
// with the app channel), its reply stream and pushes going back through
// the ingress. A user moved takes the bot's conversation along; a message
// that arrives while NATS is down waits on the ingress and is answered
// when NATS is back; a fleet member cannot make the ingress answer a
// message it never received.
func TestFleetBotRoutedHome(t *testing.T) {
	if testing.Short() {
		t.Skip("two daemons, a NATS server and the AI Bot's endpoint")
	}
	nats := natstest.Start(t)
	api := wecomtest.NewServer("wxcorp", "secret", 1000002)
	t.Cleanup(api.Close)
	llm := fleetLLM(t)
	bot := aibottest.New(t)
	a := startFleetBoxWith(t, "a", nats.URL(), true, api, llm.BaseURL(), fleetBotConfig(bot), nil, nil)
	// b has no bot of its own: only the endpoint's address, so that its
	// downloads may reach the test's loopback endpoint.
	b := startFleetBoxWith(t, "b", nats.URL(), false, api, llm.BaseURL(), fmt.Sprintf("[wecom_bot]\nurl = %q\n", bot.URL()), nil, nil)
	ctx := context.Background()
	ca, cb := admin.NewClient(a.sock), admin.NewClient(b.sock)
	waitFleetBoxes(t, ca, 2)
	if _, err := cb.FleetHome(ctx, admin.FleetRequest{User: "bob", Box: "b"}); err != nil {
		t.Fatal(err)
	}
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("the ingress did not subscribe")
	}
	if n := bot.Dials(); n != 1 {
		t.Fatalf("%d connections to the bot's endpoint: only the ingress may hold one", n)
	}

	// Each user answered in a stream by their home box.
	fs := waitFinished(t, bot, bot.Text("fb1", "bob", "single", "", "hello bot"))
	if got := fs[len(fs)-1].Stream.Content; got != "[model-b] hello bot" {
		t.Fatalf("bob's stream ended with %q, want b's answer", got)
	}
	fs = waitFinished(t, bot, bot.Text("fb2", "alice", "single", "", "hi from alice"))
	if got := fs[len(fs)-1].Stream.Content; got != "[model-a] hi from alice" {
		t.Fatalf("alice's stream ended with %q, want a's answer", got)
	}
	// A group chat is a conversation of its own, homed like a user.
	if _, err := cb.FleetHome(ctx, admin.FleetRequest{User: "group:chat-7", Box: "b"}); err != nil {
		t.Fatal(err)
	}
	fs = waitFinished(t, bot, bot.Text("fb3", "carol", "group", "chat-7", "@bot hello group"))
	if got := fs[len(fs)-1].Stream.Content; got != "[model-b] hello group" {
		t.Fatalf("the group's stream ended with %q, want b's answer", got)
	}
	// A file: fetched by the home box, kept in bob's uploads there.
	pdf := []byte("%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n")
	u, k := bot.Serve(pdf, "report.pdf")
	fs = waitFinished(t, bot, bot.Media("fbf", "bob", "single", "", "file", u, k))
	if got := fs[len(fs)-1].Stream.Content; !strings.HasPrefix(got, "[model-b] ") || !strings.Contains(got, "report.pdf") {
		t.Fatalf("bob's file was answered with %q", got)
	}
	if got, err := os.ReadFile(filepath.Join(b.ws, workspace.FilesDir, workspace.ScopeDir("wecom:bob"), workspace.UploadsDir, time.Now().Format("20060102")+"-fbf.pdf")); err != nil || !bytes.Equal(got, pdf) {
		t.Fatalf("bob's file is not in his uploads on b: %v", err)
	}
	// WeCom repeats a message: not answered twice.
	n := llm.Count()
	bot.Text("fb1", "bob", "single", "", "hello bot")
	// The app channel and the bot share bob's session on b.
	if code := postCallback(t, a, "bob", "and from the app"); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	waitDelivered(t, api, "bob", "[model-b] and from the app")
	if got := llm.Count(); got != n+1 {
		t.Fatalf("%d model calls after a repeat and one app message, want %d", got, n+1)
	}
	sessions, err := cb.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range sessions {
		found = found || (s.Key == "p2p:wecom:bob" && s.Messages >= 4)
	}
	if !found {
		t.Fatalf("b has no session of bob with both channels' messages: %+v", sessions)
	}
	if ss, _ := ca.Sessions(ctx); len(ss) != 1 || ss[0].Key != "p2p:wecom:alice" {
		t.Fatalf("the ingress holds sessions of users homed elsewhere: %+v", ss)
	}

	// A stream WeCom refuses: the answer goes by push, through the ingress.
	bot.FailNext(aibot.CmdRespond, 40008, "invalid message")
	bot.Text("fb4", "bob", "single", "", "push me")
	waitPushed(t, bot, "bob", "[model-b] push me")

	// A fleet member cannot make the ingress answer a message it never
	// received, nor push a malformed message.
	nc, err := natsgo.Connect(nats.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	framesBefore := len(bot.Frames(aibot.CmdRespond))
	for _, body := range []string{
		`{"req_id":"cb_forged","conn":1,"id":"s_x","content":"forged","finish":true}`,
		`{"req_id":"","id":"s_x","content":"x"}`,
		`not json`,
	} {
		r, err := nc.Request("agent.call.a.wecom_bot_reply", []byte(body), 5*time.Second)
		if err != nil || r.Header.Get("Agent-Error") == "" {
			t.Fatalf("a forged reply %s was answered without an error: %v", body, err)
		}
	}
	r, err := nc.Request("agent.svc.wecom_bot_push", []byte(`{"chat":"bob","chat_type":3,"content":"x"}`), 5*time.Second)
	if err != nil || r.Header.Get("Agent-Error") == "" {
		t.Fatalf("a push to chat type 3 was sent: %v", err)
	}
	if got := len(bot.Frames(aibot.CmdRespond)); got != framesBefore {
		t.Fatalf("forged replies reached WeCom: %d frames, was %d", got, framesBefore)
	}

	// Moved to the ingress, bob is answered there, and remembers.
	if _, err := ca.FleetMove(ctx, admin.FleetRequest{User: "bob", Box: "a"}); err != nil {
		t.Fatal(err)
	}
	fs = waitFinished(t, bot, bot.Text("fb5", "bob", "single", "", "after the move"))
	if got := fs[len(fs)-1].Stream.Content; got != "[model-a] after the move" {
		t.Fatalf("bob's stream after the move ended with %q", got)
	}
	found = false
	sessions, _ = ca.Sessions(ctx)
	for _, s := range sessions {
		found = found || (s.Key == "p2p:wecom:bob" && s.Messages >= 8)
	}
	if !found {
		t.Fatalf("bob's bot conversation did not move along: %+v", sessions)
	}

	// NATS down: the bot's message waits on the ingress (WeCom does not
	// resend it), and is answered when NATS is back.
	if _, err := ca.FleetHome(ctx, admin.FleetRequest{User: "dave", Box: "b"}); err != nil {
		t.Fatal(err)
	}
	nats.Stop()
	req := bot.Text("fb6", "dave", "single", "", "while NATS is down")
	time.Sleep(500 * time.Millisecond)
	nats.Restart()
	fs = waitFinished(t, bot, req)
	if got := fs[len(fs)-1].Stream.Content; got != "[model-b] while NATS is down" {
		t.Fatalf("dave's stream ended with %q", got)
	}
}
