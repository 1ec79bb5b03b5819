package assistant

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/health"
	"agent/pkg/llm/llmtest"
	"agent/pkg/sandbox/sandboxtest"
)

func sandboxAssistant(t *testing.T, srv *llmtest.Server, bwrap string) *Assistant {
	t.Helper()
	dir := sandboxtest.Dir(t)
	cfg := config.Default()
	cfg.Agent.StateDir = filepath.Join(dir, "var")
	cfg.Agent.Workspace = filepath.Join(dir, "ws")
	cfg.LLM.Provider, cfg.LLM.BaseURL, cfg.LLM.Model = "custom", srv.BaseURL(), "main"
	cfg.Security.DMPolicy = "open"
	st := testStore(t, cfg)
	a, err := New(cfg, Deps{Store: st, SysRoot: "/nonexistent", Bwrap: bwrap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.StartSandbox()
	<-a.SandboxReady()
	return a
}

// The model runs a command in the sandbox and answers from its output.
func TestExecInTheAgentLoop(t *testing.T) {
	sandboxtest.New(t, nil) // needs bwrap
	srv := llmtest.New(t,
		llmtest.Calls(llmtest.Call("exec", `{"command":"python3 -c 'print(6*7)' > answer.txt; cat answer.txt"}`)),
		llmtest.Text("It is 42."))
	a := sandboxAssistant(t, srv, "")
	if _, err := a.Sandbox(); err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	if rep := a.d.Health.Run(context.Background()); !rep.Healthy || checkOf(rep, "sandbox").Status != health.OK {
		t.Errorf("health: %+v", rep)
	}
	replies, err := a.Ask(context.Background(), conversation.Inbound{Channel: "wecom", Sender: "alice", Text: "what is 6*7? compute it"})
	if err != nil || len(replies) == 0 || replies[len(replies)-1] != "It is 42." {
		t.Fatalf("replies %q, %v", replies, err)
	}
	// "compute" offers exec; the sandbox's other tools are registered,
	// reachable through find_tools.
	offered := "," + strings.Join(srv.Request(0).ToolNames(), ",") + ","
	if !strings.Contains(offered, ",exec,") || !strings.Contains(offered, ",find_tools,") {
		t.Errorf("exec or find_tools not offered: %s", offered)
	}
	for _, name := range []string{"exec", "read_document", "trim_video", "add_bgm", "generate_video"} {
		if _, ok := a.reg.Get(name); !ok {
			t.Errorf("%s not registered", name)
		}
	}
	res := srv.Request(1).Last()
	if res.Role != "tool" || !strings.Contains(res.Content, "exit status: 0") || !strings.Contains(res.Content, "42") || !strings.Contains(res.Content, "files created: answer.txt") {
		t.Errorf("tool result: %+v", res)
	}
}

// Without a usable bwrap, exec is never offered: no fallback, and the
// health component says why.
func TestNoSandboxNoExec(t *testing.T) {
	srv := llmtest.New(t, llmtest.Text("I cannot run commands here."))
	a := sandboxAssistant(t, srv, "/nonexistent/bwrap")
	if _, err := a.Sandbox(); err == nil || !strings.Contains(err.Error(), "apt install bubblewrap") {
		t.Fatalf("sandbox: %v", err)
	}
	for _, name := range []string{"exec", "trim_video", "add_bgm", "generate_video"} {
		if _, ok := a.reg.Get(name); ok {
			t.Fatalf("%s registered without a sandbox", name)
		}
	}
	if _, ok := a.reg.Get("read_document"); !ok {
		t.Fatal("read_document not offered: it reads all but PDFs without a sandbox")
	}
	rep := a.d.Health.Run(context.Background())
	if c := checkOf(rep, "sandbox"); c.Status != health.Degraded || !strings.Contains(c.Detail, "bubblewrap") || !rep.Healthy {
		t.Errorf("health report: %+v", rep)
	}
	if _, err := a.Ask(context.Background(), conversation.Inbound{Channel: "wecom", Sender: "alice", Text: "run ls"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range srv.Request(0).ToolNames() {
		if name == "exec" {
			t.Fatal("exec offered to the model")
		}
	}
}

func checkOf(rep health.Report, name string) health.Result {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	return health.Result{}
}

// StartSandbox is once: a second call, or one after Close, starts nothing
// (and does not close the ready channel twice).
func TestStartSandboxOnce(t *testing.T) {
	srv := llmtest.New(t)
	a := sandboxAssistant(t, srv, "/nonexistent/bwrap")
	a.StartSandbox()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.StartSandbox()
	<-a.SandboxReady()
}
