package daemon

import (
	"strings"
	"testing"
	"time"

	"agent/pkg/llm/llmtest"
	"agent/pkg/wecom/aibottest"
)

// [privacy] redact through the daemon: the user's phone number and e-mail
// never reach the model (in this turn or in the history of the next), the
// user reads them back, the model's tool call with a placeholder reaches
// the tool with the real value, and /metrics counts what was kept back.
func TestRedactionThroughDaemon(t *testing.T) {
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		switch {
		case last.Role == "tool":
			return llmtest.Text("noted")
		case strings.Contains(last.Content, "remember"):
			return llmtest.Calls(llmtest.Call("message", `{"to":"zhangsan","text":"call [PHONE_1] back"}`))
		}
		return llmtest.Reply{Chunks: []string{"You wrote: ", last.Content}}
	})
	bot := aibottest.New(t)
	dir := t.TempDir()
	cfg := botConfig(llmSrv.BaseURL(), bot.URL()) + "[privacy]\nredact = [\"phone\", \"email\"]\n"
	addr, stop := startDaemonIn(t, dir, cfg)
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("not subscribed")
	}
	fs := waitFinished(t, bot, bot.Text("r1", "zhangsan", "single", "", "my number is 13800138000, mail zs@example.com"))
	if got := fs[len(fs)-1].Stream.Content; got != "You wrote: my number is 13800138000, mail zs@example.com" {
		t.Fatalf("the user read %q", got)
	}
	waitFinished(t, bot, bot.Text("r2", "zhangsan", "single", "", "remember to call 13800138000"))
	deadline := time.Now().Add(20 * time.Second)
	for len(pushesTo(bot, "zhangsan")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the message tool's text never came")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p := pushesTo(bot, "zhangsan"); p[0] != "call 13800138000 back" {
		t.Fatalf("the tool got %q", p[0])
	}
	for _, r := range llmSrv.Requests() {
		for _, v := range []string{"13800138000", "zs@example.com"} {
			if strings.Contains(string(r.Body), v) {
				t.Fatalf("the model was sent %s: %s", v, r.Body)
			}
		}
	}
	mt := get(t, "http://"+addr+"/metrics")
	if !strings.Contains(mt, `agent_redactions_total{kind="phone"}`) || !strings.Contains(mt, `agent_redactions_total{kind="email"}`) {
		t.Fatalf("/metrics lacks the redaction counts")
	}
}
