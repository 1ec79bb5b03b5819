package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/channel/builtin"
	"agent/pkg/config"
	"agent/pkg/health"
	"agent/pkg/llm/llmtest"
	"agent/pkg/sandbox/sandboxtest"
)

// execLLM runs "RUN: COMMAND" messages through exec and answers with the
// tool's result, verbatim.
func execLLM(t testing.TB) *llmtest.Server {
	t.Helper()
	return llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		if cmd, ok := strings.CutPrefix(last.Content, "RUN: "); ok && last.Role == "user" {
			b, _ := json.Marshal(map[string]string{"command": cmd})
			return llmtest.Calls(llmtest.Call("exec", string(b)))
		}
		return llmtest.Text(last.Content)
	})
}

// startSandboxDaemon runs the daemon (in this process, a loopback
// listener) on a config of body in a directory a root test's sandboxes can
// reach, and waits for READY; it stops when the test ends.
func startSandboxDaemon(tb testing.TB, body string) (*config.Config, *fakeNotifier, context.Context) {
	tb.Helper()
	path := filepath.Join(sandboxtest.Dir(tb), "config.toml")
	if err := os.WriteFile(path, []byte("[server]\nlisten = \"127.0.0.1:0\"\n"+body), 0o600); err != nil {
		tb.Fatal(err)
	}
	cfg, _, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	n := newFakeNotifier(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: cfg, Notifier: n, Channels: builtin.Channels(), SysRoot: "/nonexistent"})
	}()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
	waitNotify(tb, n, "READY=1")
	waitSandbox(tb, readyAddr(tb, n))
	return cfg, n, ctx
}

// waitSandbox waits until /healthz at addr reports the sandbox ok: the
// probe runs in the background from start, and its tools are offered once it passes.
func waitSandbox(tb testing.TB, addr string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			var hz healthzBody
			_ = json.NewDecoder(resp.Body).Decode(&hz)
			resp.Body.Close()
			for _, c := range hz.Checks {
				if c.Name == "sandbox" && c.Status == health.OK {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the sandbox is not ready after 30 s: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling the daemon's HTTP side
	}
}

// A user of the box tries every way out of the sandbox through the real
// daemon; each fails, nothing of the daemon leaks, and the daemon stays
// healthy throughout.
func TestSandboxEscapesFailAndDaemonStaysHealthy(t *testing.T) {
	sandboxtest.New(t, nil) // bwrap required
	t.Setenv("AGENT_TEST_DAEMON_SECRET", "daemon-env-secret-value")
	llmSrv := execLLM(t)
	cfg, n, ctx := startSandboxDaemon(t, strings.TrimPrefix(fmt.Sprintf(`
[llm]
provider = "custom"
model = "fake"
base_url = %q
api_key = "sk-config-secret-value"
[agent]
state_dir = "var"
workspace_quota_mb = 20
[sandbox]
timeout = "5s"
cpu_seconds = 2
max_processes = 32
max_output_kb = 8
max_file_mb = 5
`, llmSrv.BaseURL()), "\n"))
	path := cfg.Path
	addr := readyAddr(t, n)
	_, daemonPort, _ := net.SplitHostPort(addr)
	_, llmPort, _ := net.SplitHostPort(strings.TrimPrefix(llmSrv.URL(), "http://"))
	c := admin.NewClient(cfg.Server.AdminSocket)
	run := func(user, cmd string) string {
		t.Helper()
		res, err := c.Send(ctx, admin.SendRequest{To: user, Text: "RUN: " + cmd})
		if err != nil || len(res.Replies) == 0 {
			t.Fatalf("send %q: %+v %v", cmd, res, err)
		}
		return strings.Join(res.Replies, "\n")
	}
	healthy := func(after string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("after %s: %v", after, err)
		}
		var hz healthzBody
		err = json.NewDecoder(resp.Body).Decode(&hz)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("after %s: /healthz %d %+v %v", after, resp.StatusCode, hz, err)
		}
		for _, ch := range hz.Checks {
			if ch.Name == "sandbox" && ch.Status != health.OK {
				t.Fatalf("after %s: sandbox %s: %s", after, ch.Status, ch.Detail)
			}
		}
	}
	healthy("start")
	if out := run("alice", "echo alice-private-note > note.txt && echo saved"); !strings.Contains(out, "saved") {
		t.Fatalf("alice's run: %s", out)
	}
	connect := `python3 -c 'import socket,sys
try:
    socket.create_connection(("127.0.0.1", %s), 2); print("CONNECTED")
except Exception as e:
    print("refused:", e)'`
	secrets := []string{"sk-config-secret-value", "daemon-env-secret-value", "alice-private-note", "CONNECTED", "SQLite format"}
	attacks := []struct{ name, cmd string }{
		{"the daemon's own port", fmt.Sprintf(connect, daemonPort)},
		{"the LLM's port", fmt.Sprintf(connect, llmPort)},
		{"config.toml", "cat " + path + " 2>&1; cat /etc/agent/config.toml 2>&1"},
		{"the database", "head -c 100 " + filepath.Join(cfg.Agent.StateDir, "agent.db") + " 2>&1"},
		{"the state dir", "ls -la " + cfg.Agent.StateDir + " 2>&1; ls /var/lib/agent 2>&1"},
		{"the admin socket", "ls -la " + cfg.Server.AdminSocket + " 2>&1"},
		{"/proc/1/environ", "tr '\\0' '\\n' < /proc/1/environ; env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"},
		{"another user's files", "cat ../*/note.txt 2>&1; find / -name note.txt 2>/dev/null | head; ls -la /work"},
		{"a symlink out", "ln -sf " + filepath.Join(cfg.Agent.StateDir, "agent.db") + " db && head -c 100 db 2>&1; ln -sf /proc/1/root r && ls r/ 2>&1 | head"},
		{"writing outside", "touch /usr/x /etc/x /x " + filepath.Join(cfg.Agent.StateDir, "x") + " 2>&1"},
		{"fork bomb", "b() { b | b & }; b; sleep 10"},
		{"endless loop", "while :; do :; done"},
		{"1 GB of output", "head -c 1000000000 /dev/zero | tr '\\0' 'x'"},
		{"filling the disk", "i=0; while :; do i=$((i+1)); head -c 4000000 /dev/zero > f$i || break; done; echo wrote $i"},
		{"one huge file", "head -c 1000000000 /dev/zero > huge"},
	}
	for _, a := range attacks {
		out := run("mallory", a.cmd)
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s: leaked %q:\n%s", a.name, s, out)
			}
		}
		healthy(a.name)
	}
	if _, err := os.Stat(filepath.Join(cfg.Agent.StateDir, "x")); err == nil {
		t.Error("a run wrote into the state dir")
	}
	// Filling the disk was stopped at the quota and taken back: mallory's
	// folder is as before the attacks, and the next run goes.
	if out := run("mallory", "ls f1 huge 2>&1; echo still-works"); !strings.Contains(out, "still-works") || !strings.Contains(out, "No such file") {
		t.Errorf("mallory after filling the folder: %s", out)
	}
	if out := run("bob", "echo still-works"); !strings.Contains(out, "still-works") {
		t.Errorf("after the attacks: %s", out)
	}
}
