package assistant

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/llm/llmtest"
)

// The whole loop with the real selector: a greeting is offered find_tools
// alone; the model pulls a tool in and uses it in the same turn; a
// non-owner's call of an owner-only tool fails as unknown; and a tool the
// session used stays offered on the next turn.
func TestToolsChosenPerTurn(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Text("Hello!"),
		llmtest.Calls(llmtest.Call("find_tools", `{"query":"what reminders are scheduled"}`)),
		llmtest.Calls(llmtest.Call("list_schedules", `{}`)),
		llmtest.Calls(llmtest.Call("self_check", `{}`)),
		llmtest.Text("You have no reminders."),
		llmtest.Text("Hi again."),
	)
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Agent.StateDir = filepath.Join(dir, "var")
	cfg.Agent.Workspace = filepath.Join(dir, "ws")
	cfg.Agent.Owners = []string{"wecom:boss"}
	cfg.LLM.Provider, cfg.LLM.BaseURL, cfg.LLM.Model = "custom", srv.BaseURL(), "main"
	cfg.Security.DMPolicy = "open"
	a, err := New(cfg, Deps{Store: testStore(t, cfg), SysRoot: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ask := func(text string) string {
		t.Helper()
		r, err := a.Ask(context.Background(), conversation.Inbound{Channel: "wecom", Sender: "alice", Text: text})
		if err != nil || len(r) == 0 {
			t.Fatalf("%q: %v %v", text, r, err)
		}
		return r[len(r)-1]
	}
	ask("hello")
	if got := srv.Request(0).ToolNames(); !slices.Equal(got, []string{"find_tools"}) {
		t.Errorf("hello offers %v", got)
	}
	if got := ask("anything on my calendar?"); got != "You have no reminders." {
		t.Fatalf("reply %q", got)
	}
	if got := srv.Request(2).ToolNames(); !slices.Contains(got, "list_schedules") {
		t.Errorf("after find_tools the next step offers %v", got)
	}
	if res := srv.Request(4).Last(); res.Role != "tool" || !strings.Contains(res.Content, `unknown tool "self_check"`) {
		t.Errorf("alice's self_check: %+v", res)
	}
	for i := range 5 {
		if slices.Contains(srv.Request(i).ToolNames(), "self_check") {
			t.Errorf("step %d offered alice self_check", i)
		}
	}
	ask("thanks")
	if got := srv.Request(5).ToolNames(); !slices.Contains(got, "list_schedules") || !slices.Contains(got, "find_tools") {
		t.Errorf("the next turn offers %v; want the tools the session used", got)
	}
}
