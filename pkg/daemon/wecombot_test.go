package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/llm/llmtest"
	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
)

type streamFrame struct {
	MsgType string `json:"msgtype"`
	Stream  struct {
		ID      string `json:"id"`
		Finish  bool   `json:"finish"`
		Content string `json:"content"`
	} `json:"stream"`
}

// replyFrames are the stream frames answering reqID, in order.
func replyFrames(srv *aibottest.Server, reqID string) []streamFrame {
	var out []streamFrame
	for _, f := range srv.Frames(aibot.CmdRespond) {
		if f.Headers.ReqID != reqID {
			continue
		}
		var sf streamFrame
		_ = json.Unmarshal(f.Body, &sf)
		out = append(out, sf)
	}
	return out
}

// waitFinished waits for the stream answering reqID to finish and returns
// its frames.
func waitFinished(t *testing.T, srv *aibottest.Server, reqID string) []streamFrame {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		fs := replyFrames(srv, reqID)
		if len(fs) > 0 && fs[len(fs)-1].Stream.Finish {
			return fs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reply stream of %s did not finish: %+v", reqID, fs)
		}
		time.Sleep(10 * time.Millisecond) // polling the fake endpoint
	}
}

func botConfig(llmURL, botURL string) string {
	return fmt.Sprintf("[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = %q\n[security]\ndm_policy = \"open\"\n[wecom_bot]\nenabled = true\nbot_id = %q\nsecret = %q\nurl = %q\n",
		llmURL, aibottest.BotID, aibottest.Secret, botURL)
}

// The AI Bot channel through the real daemon: subscribed, a message is
// answered with a reply stream (first frame at once, finished with the
// model's text), a repeated msgid is not answered twice, a group chat has
// its own session, the user is the same "wecom:" user as on the app
// channel, the message tool reaches them by push, /healthz shows the
// connection.
func TestWeComBotThroughDaemon(t *testing.T) {
	bot := aibottest.New(t)
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		if strings.Contains(last.Content, "tell me later") {
			return llmtest.Calls(llmtest.Call("message", `{"to":"zhangsan","text":"a note for later"}`))
		}
		if last.Role == "tool" {
			// The answer waits until the stream showed the tool's step
			// (a fast turn may otherwise end before any frame shows it).
			bot.Await(10*time.Second, 0, func(f aibot.Frame) bool {
				return f.Cmd == aibot.CmdRespond && strings.Contains(string(f.Body), " message")
			})
		}
		return llmtest.Reply{Chunks: []string{"Hello", " from", " the bot"}}
	})
	dir := t.TempDir()
	addr, stop := startDaemonIn(t, dir, botConfig(llmSrv.BaseURL(), bot.URL()))
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("the daemon did not subscribe")
	}
	req := bot.Text("m1", "zhangsan", "single", "", "hi there")
	fs := waitFinished(t, bot, req)
	if fs[0].Stream.Content != "…" || fs[0].Stream.Finish || fs[len(fs)-1].Stream.Content != "Hello from the bot" || fs[0].Stream.ID == "" {
		t.Fatalf("stream frames: %+v", fs)
	}
	for _, f := range fs {
		if f.Stream.ID != fs[0].Stream.ID {
			t.Fatalf("one stream, one id: %+v", fs)
		}
	}
	n := llmSrv.Count()
	bot.Text("m1", "zhangsan", "single", "", "hi there") // WeCom repeats it
	greq := bot.Text("m2", "lisi", "group", "chat-9", "@bot hello group")
	waitFinished(t, bot, greq)
	if got := llmSrv.Count(); got != n+1 {
		t.Fatalf("%d model calls after a repeat and a group message, want %d", got, n+1)
	}
	c := admin.NewClient(filepath.Join(dir, "var", "agent.sock"))
	ss, err := c.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, s := range ss {
		keys[s.Key] = true
	}
	if !keys["p2p:wecom:zhangsan"] || !keys["group:wecom:chat-9"] {
		t.Fatalf("sessions %v: want the app channel's user key and a group session", keys)
	}
	// The model's message tool reaches the user by push (aibot_send_msg).
	req = bot.Text("m3", "zhangsan", "single", "", "tell me later")
	status := false // the tool's step showed as a status line
	for _, f := range waitFinished(t, bot, req) {
		status = status || (!f.Stream.Finish && (strings.Contains(f.Stream.Content, "⏳ message") || strings.Contains(f.Stream.Content, "✓ message")))
	}
	if !status {
		t.Fatalf("no status line for the message tool: %+v", replyFrames(bot, req))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var pushed []string
		for _, f := range bot.Frames(aibot.CmdSend) {
			pushed = append(pushed, string(f.Body))
		}
		if len(pushed) == 1 && strings.Contains(pushed[0], `"chatid":"zhangsan"`) && strings.Contains(pushed[0], "a note for later") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pushes: %q", pushed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mt := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{`agent_wecom_bot_stream_seconds_count{end="finished"} 3`, `agent_wecom_bot_stream_seconds_count{end="limit"} 0`, "agent_wecom_bot_connected 1"} {
		if !strings.Contains(mt, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	hz := getHealthz(t, addr)
	if !strings.Contains(hz, `"channel_wecom_bot_connection"`) {
		t.Fatalf("/healthz lacks the connection: %s", hz)
	}
}

// Stopped mid-turn (the process dies with the model still thinking): the
// message is answered after the restart, by push, since its reply stream
// belonged to the old connection.
func TestWeComBotAnswersAfterRestart(t *testing.T) {
	hang := make(chan struct{})
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		select {
		case <-hang:
			return llmtest.Text("the late answer")
		default:
			return llmtest.Hang()
		}
	})
	bot := aibottest.New(t)
	dir := t.TempDir()
	_, stop := startDaemonIn(t, dir, botConfig(llmSrv.BaseURL(), bot.URL()))
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("not subscribed")
	}
	req := bot.Text("k1", "wangwu", "single", "", "a hard question")
	llmSrv.Wait(1)
	stop() // mid-turn
	close(hang)
	_, stop = startDaemonIn(t, dir, botConfig(llmSrv.BaseURL(), bot.URL()))
	defer stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var pushed []string
		for _, f := range bot.Frames(aibot.CmdSend) {
			pushed = append(pushed, string(f.Body))
		}
		if len(pushed) == 1 && strings.Contains(pushed[0], "the late answer") && strings.Contains(pushed[0], `"chatid":"wangwu"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pushes after the restart: %q", pushed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, f := range replyFrames(bot, req) {
		if f.Stream.Finish {
			t.Fatalf("the old stream was finished on the new connection: %+v", f)
		}
	}
}

func getHealthz(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func testLogger() *slog.Logger {
	if os.Getenv("AGENT_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Under the pairing policy a stranger on the bot gets a code by push and
// no turn; a picture they sent is neither kept in a folder nor left in
// the spool.
func TestWeComBotStrangerGetsCode(t *testing.T) {
	llmSrv := llmtest.NewFunc(t, func(*llmtest.Request) llmtest.Reply { return llmtest.Reply{Chunks: []string{"hi"}} })
	bot := aibottest.New(t)
	dir := t.TempDir()
	cfg := strings.Replace(botConfig(llmSrv.BaseURL(), bot.URL()), `dm_policy = "open"`, `dm_policy = "pairing"`, 1)
	_, stop := startDaemonIn(t, dir, cfg)
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("the daemon did not subscribe")
	}
	u, k := bot.Serve([]byte("\x89PNG\r\n\x1a\nnot really"), "")
	bot.Media("s1", "stranger", "single", "", "image", u, k)
	if _, ok := bot.Await(20*time.Second, 0, func(f aibot.Frame) bool {
		return f.Cmd == aibot.CmdSend && strings.Contains(string(f.Body), `"chatid":"stranger"`) && strings.Contains(string(f.Body), "agentctl pair approve")
	}); !ok {
		t.Fatal("the stranger got no pairing code")
	}
	if n := llmSrv.Count(); n != 0 {
		t.Fatalf("%d model calls for a stranger", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, _ := os.ReadDir(filepath.Join(dir, "var", "wecom_bot", "media"))
		if len(ents) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stranger's picture stayed in the spool: %d entries", len(ents))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "ws", "files")); err == nil {
		ents, _ := os.ReadDir(filepath.Join(dir, "ws", "files"))
		for _, e := range ents {
			if strings.Contains(e.Name(), "stranger") {
				t.Fatalf("a folder was made for the stranger: %s", e.Name())
			}
		}
	}
}
