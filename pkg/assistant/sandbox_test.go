package assistant

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/doctor"
	"agent/pkg/health"
	"agent/pkg/llm/llmtest"
	"agent/pkg/sandbox"
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

// A turn that comes the moment the sandbox's probe has started (a user
// writing as the daemon starts) waits for the probe's decision: it is
// offered exec, not a tool list without it.
func TestFirstTurnWaitsForTheSandboxProbe(t *testing.T) {
	sandboxtest.New(t, nil) // needs bwrap
	srv := llmtest.New(t, llmtest.Text("ok"))
	dir := sandboxtest.Dir(t)
	cfg := config.Default()
	cfg.Agent.StateDir = filepath.Join(dir, "var")
	cfg.Agent.Workspace = filepath.Join(dir, "ws")
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
	a.StartSandbox()
	if _, err := a.Ask(context.Background(), conversation.Inbound{Channel: "wecom", Sender: "alice", Text: "what is 6*7? compute it"}); err != nil {
		t.Fatal(err)
	}
	if offered := srv.Request(0).ToolNames(); !slices.Contains(offered, "exec") {
		t.Errorf("the first turn was not offered exec: %v", offered)
	}
}

// Run as root with the state dir in a private (0700) directory ("make run"
// in a clone under /root): the sandbox keeps its own files where its
// account reaches them, so exec is offered when the workspace is
// reachable; when the workspace is not, the daemon and doctor both say
// why, in the same words. Doctor's verdict is the daemon's either way.
func TestDaemonAndDoctorAgreeOnTheSandboxInAPrivateDirectory(t *testing.T) {
	sandboxtest.New(t, nil) // needs bwrap
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root daemon's sandbox runs as another account")
	}
	for _, tc := range []struct {
		name       string
		privateWS  bool
		wantWorks  bool
		wantReason string
	}{
		{name: "workspace reachable", wantWorks: true},
		{name: "workspace private", privateWS: true, wantReason: "cannot reach"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A 0700 directory of root's, like /root.
			open := sandboxtest.Dir(t)
			private := filepath.Join(open, "root")
			if err := os.Mkdir(private, 0o700); err != nil {
				t.Fatal(err)
			}
			srv := llmtest.New(t)
			cfg := config.Default()
			cfg.Agent.StateDir = filepath.Join(private, "var")
			cfg.Agent.Workspace = filepath.Join(open, "ws")
			if tc.privateWS {
				cfg.Agent.Workspace = filepath.Join(private, "ws")
			}
			cfg.LLM.Provider, cfg.LLM.BaseURL, cfg.LLM.Model = "custom", srv.BaseURL(), "main"
			t.Cleanup(func() {
				os.RemoveAll(sandbox.FallbackTempDir(cfg.Agent.StateDir))
			})
			a, err := New(cfg, Deps{Store: testStore(t, cfg), SysRoot: "/nonexistent"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close(context.Background()) })
			a.StartSandbox()
			<-a.SandboxReady()
			_, daemonErr := a.Sandbox()

			var doctorRes doctor.Result
			for _, c := range doctor.Checks(doctor.Env{Config: cfg}) {
				if c.Name == "sandbox" {
					doctorRes = c.Run(context.Background())
				}
			}
			doctorWorks := strings.Contains(doctorRes.Detail, "bubblewrap works")
			if (daemonErr == nil) != tc.wantWorks || doctorWorks != tc.wantWorks {
				t.Fatalf("daemon: %v; doctor: %+v; want works=%v for both", daemonErr, doctorRes, tc.wantWorks)
			}
			if tc.wantWorks {
				if _, ok := a.reg.Get("exec"); !ok {
					t.Error("exec not registered")
				}
				if dir := a.sandbox.tempDir; !strings.HasPrefix(dir, "/var/tmp/agent-sandbox-") || sandbox.Reach(dir, sandbox.Self().As) != nil {
					t.Errorf("the sandbox's own files are in %s: want a reachable directory under /var/tmp", dir)
				}
				return
			}
			if !strings.Contains(daemonErr.Error(), tc.wantReason) || !strings.Contains(daemonErr.Error(), private+" is -rwx------") {
				t.Errorf("daemon's reason: %v", daemonErr)
			}
			if !strings.Contains(doctorRes.Detail, daemonErr.Error()) {
				t.Errorf("doctor's reason differs from the daemon's:\ndoctor: %s\ndaemon: %v", doctorRes.Detail, daemonErr)
			}
		})
	}
}
