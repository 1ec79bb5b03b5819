package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/assistant"
	"agent/pkg/channel/builtin"
	"agent/pkg/health"
	"agent/pkg/llm/llmtest"
	"agent/pkg/runner"
)

// toolLLM answers "check yourself" with a self_check call, "diagnose" with
// a diagnose call, and a tool result by repeating it as the answer.
func toolLLM(t *testing.T) *llmtest.Server {
	t.Helper()
	return llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		switch {
		case last.Role == "user" && strings.Contains(last.Content, "check yourself"):
			return llmtest.Calls(llmtest.Call(assistant.ToolSelfCheck, "{}"))
		case last.Role == "user" && strings.Contains(last.Content, "diagnose"):
			return llmtest.Calls(llmtest.Call(assistant.ToolDiagnose, "{}"))
		}
		return llmtest.Text(last.Content)
	})
}

func TestSelfCheckAndDiagnoseTools(t *testing.T) {
	llmSrv := toolLLM(t)
	cfg := fakeLLMConfig(t, llmSrv.BaseURL(), "owners = [\"wecom:boss\"]\n")
	sysRoot, _ := filepath.Abs("../selfcheck/testdata/sys")
	n := newFakeNotifier(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: cfg, Notifier: n, Channels: builtin.Channels(), SysRoot: sysRoot})
	}()
	n.waitFor(t, "READY=1", 1)
	c := admin.NewClient(cfg.Server.AdminSocket)

	res, err := c.Send(ctx, admin.SendRequest{To: "alice", Text: "please check yourself"})
	if err != nil || len(res.Replies) != 1 {
		t.Fatalf("send: %+v %v", res, err)
	}
	report := res.Replies[0]
	for _, want := range []string{"Self-check ", "database: quick_check ok", "temperature: cpu-thermal 47.5°C", "tj-thermal runs hot",
		"models: LLM fake reachable", "jobs: 0 active of 0", "memory: RSS "} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	res, err = c.Send(ctx, admin.SendRequest{To: "alice", Text: "diagnose this"})
	if err != nil || len(res.Replies) != 1 {
		t.Fatalf("send: %+v %v", res, err)
	}
	if got := res.Replies[0]; !strings.Contains(got, "(p2p:admin:alice), open") || !strings.Contains(got, "Context: about") {
		t.Errorf("diagnosis:\n%s", got)
	}

	addr := readyAddr(t, n)
	metrics := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{"agent_turn_duration_seconds_count 2", "agent_tool_calls_total 2", "agent_tool_failures_total 0",
		`agent_turns_total{result="ok"} 2`, "agent_runner_queued 0", `agent_job_runs{status="ok"} 0`, `agent_llm_errors_total{kind="server"} 0`,
		"agent_error_log_dropped 0", "process_resident_memory_bytes"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var hz healthzBody
	if err := json.Unmarshal([]byte(get(t, "http://"+addr+"/healthz")), &hz); err != nil {
		t.Fatal(err)
	}
	seen := map[string]health.Status{}
	for _, c := range hz.Checks {
		seen[c.Name] = c.Status
	}
	for _, name := range []string{"database", "event_loop", "runner"} {
		if seen[name] != health.OK {
			t.Errorf("liveness check %s: %q; want ok (%+v)", name, seen[name], hz.Checks)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func readyAddr(t testing.TB, n *fakeNotifier) string {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range n.msgs {
		if i := strings.Index(m, "serving on "); i >= 0 {
			return strings.TrimSpace(m[i+len("serving on "):])
		}
	}
	t.Fatal("no READY address")
	return ""
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A turn running longer than a turn can take withholds the watchdog.
func TestWedgedRunnerFailsLiveness(t *testing.T) {
	r := runner.New(runner.Config{}, nil)
	started, release := make(chan struct{}), make(chan struct{})
	defer func() { close(release); r.Close(context.Background()) }()
	if err := r.Submit("p2p:wecom:alice", func(context.Context) { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	<-started
	now := time.Now()
	c := health.New(time.Second, nil)
	c.RegisterLiveness("runner", func(context.Context) error { return runnerWedged(r, now, wedgedAfter) })
	if rep := c.Run(context.Background()); !rep.Alive {
		t.Fatalf("a turn that just started counts as wedged: %+v", rep)
	}
	now = now.Add(wedgedAfter + time.Minute)
	rep := c.Run(context.Background())
	if rep.Alive || rep.Checks[0].Status != health.Failing || !strings.Contains(rep.Checks[0].Detail, "runner wedged: the turn of p2p:wecom:alice has run for") {
		t.Fatalf("wedged runner: %+v", rep)
	}
}
