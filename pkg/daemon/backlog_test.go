package daemon

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/conversation"
	"agent/pkg/llm/llmtest"
	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
)

// pushesTo are the texts pushed to a user, in order.
func pushesTo(bot *aibottest.Server, user string) []string {
	var out []string
	for _, f := range bot.Frames(aibot.CmdSend) {
		var b struct {
			ChatID   string `json:"chatid"`
			Markdown struct {
				Content string `json:"content"`
			} `json:"markdown"`
		}
		_ = json.Unmarshal(f.Body, &b)
		if b.ChatID == user {
			out = append(out, b.Markdown.Content)
		}
	}
	return out
}

// The model service goes down (connection refused, then 503s) while
// users write; the daemon restarts during the outage; the service comes
// back. Each message is answered once, after recovery, in order per
// conversation; the first message of each conversation was told it is
// kept, the ones behind it wait silently (their streams end with a
// note); agentctl status shows the held turns; the resumed turn does not
// send the user's message to the model twice.
func TestHeldTurnsAnsweredAfterOutage(t *testing.T) {
	var mode atomic.Int32 // 0 up, 1 503
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		if mode.Load() == 1 {
			return llmtest.Reply{Status: 503}
		}
		return llmtest.Reply{Chunks: []string{"answer to ", r.LastUser()}}
	})
	bot := aibottest.New(t)
	dir := t.TempDir()
	cfg := botConfig(llmSrv.BaseURL(), bot.URL())
	_, stop := startDaemonIn(t, dir, cfg)
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("not subscribed")
	}
	llmSrv.Refuse()
	last := func(fs []streamFrame) string { return fs[len(fs)-1].Stream.Content }
	if got := last(waitFinished(t, bot, bot.Text("a1", "alice", "single", "", "first question"))); !strings.Contains(got, conversation.HeldText) {
		t.Fatalf("first held message ended with %q", got)
	}
	if got := last(waitFinished(t, bot, bot.Text("a2", "alice", "single", "", "second question"))); strings.Contains(got, conversation.HeldText) || !strings.Contains(got, "Kept") {
		t.Fatalf("second held message ended with %q (told once, then a short note)", got)
	}
	llmSrv.Accept()
	mode.Store(1)
	if got := last(waitFinished(t, bot, bot.Text("b1", "bob", "single", "", "bob's question"))); !strings.Contains(got, conversation.HeldText) {
		t.Fatalf("bob's first held message ended with %q", got)
	}
	st, err := admin.NewClient(filepath.Join(dir, "var", "agent.sock")).Status(context.Background())
	if err != nil || st.Held == nil || st.Held.Turns != 3 || st.Held.Conversations != 2 {
		t.Fatalf("status during the outage: %+v, %v", st.Held, err)
	}
	stop() // a restart during the outage
	_, stop = startDaemonIn(t, dir, cfg)
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("not subscribed after the restart")
	}
	mode.Store(0)
	// Any answered turn wakes the backlog (else its next try comes
	// within a minute).
	waitFinished(t, bot, bot.Text("c1", "carol", "single", "", "hello"))
	deadline := time.Now().Add(30 * time.Second)
	for len(pushesTo(bot, "alice")) < 2 || len(pushesTo(bot, "bob")) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("after recovery alice got %q, bob %q", pushesTo(bot, "alice"), pushesTo(bot, "bob"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	a := pushesTo(bot, "alice")
	if len(a) != 2 || !strings.Contains(a[0], "answer to first question") || !strings.Contains(a[0], "“first question”") ||
		!strings.Contains(a[1], "answer to second question") {
		t.Fatalf("alice's answers out of order or wrong: %q", a)
	}
	if b := pushesTo(bot, "bob"); len(b) != 1 || !strings.Contains(b[0], "answer to bob's question") {
		t.Fatalf("bob's answers: %q", b)
	}
	// The first question's turn was resumed, not repeated: the model saw
	// it once in the request that answered it.
	for _, r := range llmSrv.Requests() {
		n := 0
		for _, m := range r.Messages {
			if m.Role == "user" && m.Content == "first question" {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("the model got the held message %d times in one request", n)
		}
	}
	// A held turn is marked answered just after its answer is pushed: the
	// count comes down moments after the pushes are seen.
	for {
		st, err = admin.NewClient(filepath.Join(dir, "var", "agent.sock")).Status(context.Background())
		if err == nil && st.Held != nil && st.Held.Turns == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after recovery: %+v, %v", st.Held, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // nothing is answered twice
	if len(pushesTo(bot, "alice")) != 2 || len(pushesTo(bot, "bob")) != 1 {
		t.Fatalf("answered more than once: alice %q, bob %q", pushesTo(bot, "alice"), pushesTo(bot, "bob"))
	}
}

// A scheduled task due while the model service is down is recorded
// "deferred" and runs late once it is back (here after a restart); its
// answer goes to the job's recipient and says it is late.
func TestScheduledTaskRunsLateAfterOutage(t *testing.T) {
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Chunks: []string{"done: ", r.LastUser()}}
	})
	bot := aibottest.New(t)
	dir := t.TempDir()
	_, stop := startDaemonIn(t, dir, botConfig(llmSrv.BaseURL(), bot.URL()))
	defer func() { stop() }()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("not subscribed")
	}
	llmSrv.Refuse()
	ctx := context.Background()
	c := admin.NewClient(filepath.Join(dir, "var", "agent.sock"))
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	j, err := c.AddJob(ctx, admin.JobSpec{Owner: "wecom:alice", At: at, Prompt: "the daily report"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := c.Jobs(ctx)
		if err == nil && len(list) == 1 && list[0].ID == j.ID && list[0].LastStatus == "deferred" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not deferred: %+v %v", list, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p := pushesTo(bot, "alice"); len(p) != 0 {
		t.Fatalf("pushed during the outage: %q", p)
	}
	// The service is back; the daemon restarts before the breaker's
	// cool-down ends (the held task is in the database, not in memory).
	llmSrv.Accept()
	stop()
	_, stop = startDaemonIn(t, dir, botConfig(llmSrv.BaseURL(), bot.URL()))
	for len(pushesTo(bot, "alice")) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the deferred task's answer never came")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p := pushesTo(bot, "alice")
	if len(p) != 1 || !strings.Contains(p[0], "Scheduled for") || !strings.Contains(p[0], "ran late") || !strings.Contains(p[0], "done: [scheduled task] the daily report") {
		t.Fatalf("late answer: %q", p)
	}
}
