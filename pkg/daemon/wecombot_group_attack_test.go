package daemon

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"agent/pkg/llm/llmtest"
	"agent/pkg/runner"
	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
)

// In a group chat on the AI Bot, the model's message tool
// addressed to "the conversation you are in" (the recipient policy admits
// the chat id itself: recipient.inConversation) must reach the group. The
// bot pushes every recipient without a "group:wecom:" prefix as a single
// chat (chat_type 1, chatid = the chat id taken for a user id), and the
// recipient policy refuses "group:wecom:CHAT" on channel wecom, so no
// message tool call can ever reach a group the right way.
func TestBotMessageToolInGroupPushesToTheGroup(t *testing.T) {
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last().Content, "tell the group") {
			return llmtest.Calls(llmtest.Call("message", `{"to":"chat-7","text":"a note for the group"}`))
		}
		return llmtest.Text("done")
	})
	bot := aibottest.New(t)
	_, stop := startDaemonIn(t, t.TempDir(), botConfig(llmSrv.BaseURL(), bot.URL()))
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("the daemon did not subscribe")
	}
	req := bot.Text("g1", "lisi", "group", "chat-7", "@bot tell the group")
	waitFinished(t, bot, req)
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, f := range bot.Frames(aibot.CmdSend) {
			var body struct {
				ChatID   string `json:"chatid"`
				ChatType int    `json:"chat_type"`
				Markdown struct {
					Content string `json:"content"`
				} `json:"markdown"`
			}
			_ = json.Unmarshal(f.Body, &body)
			if !strings.Contains(body.Markdown.Content, "a note for the group") {
				continue
			}
			if body.ChatType != 2 || body.ChatID != "chat-7" {
				t.Fatalf("the message for group chat-7 went out as chat_type %d to %q (a single chat: the chat id taken for a user id): %s",
					body.ChatType, body.ChatID, f.Body)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the message tool's note for the group was never pushed: %d pushes", len(bot.Frames(aibot.CmdSend)))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A flood from one user. The bot runs one turn per
// message and submits them to the runner one at a time, so the runner's
// per-conversation backlog bound (runner.DefaultQueueLen, the user told
// "please wait" beyond it) never applies: every stored message becomes a
// full model turn, however many were sent. The app channel coalesces a
// sender's messages (maxBatch); here nothing bounds the work a single user
// can queue.
func TestBotFloodFromOneUserIsBounded(t *testing.T) {
	release := make(chan struct{})
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		if strings.Contains(r.Last().Content, "the first one") {
			<-release
		}
		return llmtest.Text("ok")
	})
	bot := aibottest.New(t)
	_, stop := startDaemonIn(t, t.TempDir(), botConfig(llmSrv.BaseURL(), bot.URL()))
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("the daemon did not subscribe")
	}
	bot.Text("f0", "mallory", "single", "", "the first one")
	llmSrv.Wait(1)
	const flood = runner.DefaultQueueLen + 10
	for i := 1; i <= flood; i++ {
		bot.Text(fmt.Sprintf("f%d", i), "mallory", "single", "", fmt.Sprintf("flood %d", i))
	}
	time.Sleep(200 * time.Millisecond) // stored
	close(release)
	// Wait until the model stops being called.
	last, since := llmSrv.Count(), time.Now()
	deadline := time.Now().Add(90 * time.Second)
	for time.Since(since) < 2*time.Second && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if n := llmSrv.Count(); n != last {
			last, since = n, time.Now()
		}
	}
	if turns := llmSrv.Count(); turns > 1+runner.DefaultQueueLen {
		t.Fatalf("one user's %d queued messages cost %d model turns: no bound on a conversation's backlog (the runner's is %d)",
			flood+1, turns, runner.DefaultQueueLen)
	}
}

// A group message without a chatid (or with a chattype
// other than "group") is taken for a direct message: it runs in the
// sender's private session (their p2p memory and history), while the
// reply stream answers the group's req_id. A message whose chat cannot be
// told must not reach a private session.
func TestBotGroupMessageWithoutChatIDIsNotADirectMessage(t *testing.T) {
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		return llmtest.Text("answer")
	})
	bot := aibottest.New(t)
	_, stop := startDaemonIn(t, t.TempDir(), botConfig(llmSrv.BaseURL(), bot.URL()))
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("the daemon did not subscribe")
	}
	spoof := bot.Callback(aibot.CmdMsgCallback, map[string]any{"msgid": "sp1", "create_time": time.Now().Unix(), "aibotid": aibottest.BotID,
		"chattype": "group", "from": map[string]string{"userid": "zhangsan"}, "msgtype": "text",
		"text": map[string]string{"content": "@bot what did I tell you in private?"}})
	// The same sender's direct message comes after it (same conversation
	// key, so it is processed after the spoofed one).
	req := bot.Text("dm1", "zhangsan", "single", "", "hello")
	waitFinished(t, bot, req)
	for _, r := range llmSrv.Requests() {
		if r.Contains("what did I tell you in private") {
			t.Fatalf("a group message without a chatid ran as zhangsan's direct message (private session), answered on req %s", spoof)
		}
	}
}
