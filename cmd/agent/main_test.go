package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/config"
	"agent/pkg/llm/llmtest"
)

// ---- in-process: flags and configuration errors ----

func runInProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb, func(string) (string, bool) { return "", false })
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := runInProcess(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "agent ") {
		t.Fatalf("code %d, out %q", code, out)
	}
}

func TestBadConfigExits78(t *testing.T) {
	cases := map[string]struct{ toml, want string }{
		"malformed":  {"[agent\nname = 1", "config.toml"},
		"wrong type": {"[llm]\ntimeout = 5\n", "llm.timeout"},
		"bad enum":   {"[security]\ndm_policy = \"maybe\"\n", "security.dm_policy"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			os.WriteFile(path, []byte(c.toml), 0o600)
			code, _, stderr := runInProcess(t, "-config", path, "-check-config")
			if code != config.ExitConfig {
				t.Fatalf("exit %d; want 78 (stderr %s)", code, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Fatalf("stderr does not name %q:\n%s", c.want, stderr)
			}
		})
	}
	code, _, stderr := runInProcess(t, "-config", filepath.Join(t.TempDir(), "missing.toml"))
	if code != config.ExitConfig || !strings.Contains(stderr, "missing.toml") {
		t.Fatalf("missing file: exit %d, %s", code, stderr)
	}
}

// ---- subprocess: the daemon as systemd runs it ----

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// agentBinary builds cmd/agent once per test run (with -race when the tests
// use it, so the build cache is shared).
func agentBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agent-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "agent")
		args := []string{"build", "-tags", "sqlite_fts5", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, ".")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// notifySock plays systemd's side of sd_notify and keeps every message.
type notifySock struct {
	path string
	mu   sync.Mutex
	seen []string
	more chan struct{} // signalled on each message
}

func newNotifySock(t *testing.T) *notifySock {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	n := &notifySock{path: path, more: make(chan struct{}, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.seen = append(n.seen, string(buf[:k]))
			n.mu.Unlock()
			select {
			case n.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return n
}

// await returns the first message so far, or to come, containing want. The
// deadline only guards against a hung daemon; it is not a performance
// assertion.
func (n *notifySock) await(t *testing.T, want string) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		n.mu.Lock()
		for _, m := range n.seen {
			if strings.Contains(m, want) {
				n.mu.Unlock()
				return m
			}
		}
		n.mu.Unlock()
		select {
		case <-n.more:
		case <-deadline:
			t.Fatalf("no %q from the daemon", want)
		}
	}
}

type instance struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
	dir    string
	config string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// writeConfig writes dir/config.toml: state and workspace under dir, a
// loopback listener on a free port, no local models, then extra.
func writeConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	return writeServerConfig(t, dir, "", extra)
}

// writeServerConfig is writeConfig with more [server] keys (lines ending in
// a newline).
func writeServerConfig(t *testing.T, dir, server, extra string) string {
	t.Helper()
	path := filepath.Join(dir, "config.toml")
	body := fmt.Sprintf(`[agent]
state_dir = "var"
workspace = "workspace"
[server]
listen = "127.0.0.1:0"
admin_socket = "var/agent.sock"
%s[embedding]
model_dir = "no-such-model"
[asr]
model = "no-such-model.bin"
%s`, server, extra)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func start(t *testing.T, dir string, env ...string) *instance {
	t.Helper()
	bin := agentBinary(t)
	cfg := filepath.Join(dir, "config.toml")
	cmd := exec.Command(bin, "-config", cfg, "-log-level", "debug")
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	in := &instance{cmd: cmd, stderr: &syncBuffer{}, done: make(chan error, 1), dir: dir, config: cfg}
	cmd.Stderr = in.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { in.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-in.done
		if t.Failed() {
			t.Logf("daemon stderr:\n%s", in.stderr.String())
		}
	})
	return in
}

func (in *instance) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-in.done:
		in.done <- nil // let Cleanup's receive proceed
		return in.cmd.ProcessState.ExitCode()
	case <-time.After(60 * time.Second):
		t.Fatalf("daemon did not exit; stderr:\n%s", in.stderr.String())
		return -1
	}
}

func TestDaemonLifecycle(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "")
	ns := newNotifySock(t)
	in := start(t, dir, "NOTIFY_SOCKET="+ns.path, "WATCHDOG_USEC=400000")

	ready := ns.await(t, "READY=1")
	addr := strings.TrimSpace(ready[strings.Index(ready, "serving on ")+len("serving on "):])
	base := "http://" + addr

	// /healthz: healthy with no models and no LLM key (they are degraded, not fatal).
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var hz struct {
		Status string
		Checks []struct{ Name, Status string }
	}
	json.NewDecoder(resp.Body).Decode(&hz)
	resp.Body.Close()
	if resp.StatusCode != 200 || hz.Status != "ok" {
		t.Fatalf("/healthz = %d %+v", resp.StatusCode, hz)
	}
	degraded := map[string]bool{}
	for _, c := range hz.Checks {
		if c.Status == "degraded" {
			degraded[c.Name] = true
		}
	}
	if !degraded["llm"] {
		t.Errorf("/healthz does not report the missing LLM key: %+v", hz.Checks)
	}

	// The watchdog is fed while healthy.
	ns.await(t, "WATCHDOG=1")

	// Models are reported unavailable, with the reason, and the daemon stays up.
	ns.await(t, "local models ready")
	sock := filepath.Join(dir, "var", "agent.sock")
	st, err := admin.NewClient(sock).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(st.Components["embedding"], "unavailable") {
		t.Errorf("embedding component = %q; want unavailable", st.Components["embedding"])
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket mode %v, %v", fi.Mode(), err)
	}

	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"process_resident_memory_bytes ", `agent_http_requests_total{code="200",route="GET /healthz"} 1`, `agent_component_ready{component="embedding"} 0`, "agent_memory_facts 0", "agent_memory_semantic 0"} {
		if !bytes.Contains(metrics, []byte(want)) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// A second daemon on the same state dir refuses to start and says why.
	second := start(t, dir)
	if code := second.wait(t); code == 0 {
		t.Fatal("second daemon on the same state dir exited 0")
	}
	if !strings.Contains(second.stderr.String(), "in use by another agent") {
		t.Errorf("second daemon's message: %s", second.stderr.String())
	}

	// SIGHUP with a broken file keeps the running configuration.
	os.WriteFile(in.config, []byte("[llm]\ntimeout = \"soon\"\n"), 0o600)
	in.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, in, "reload failed, keeping the running configuration")
	// SIGHUP with a valid file applies it.
	writeConfig(t, dir, "[llm]\nmodel = \"gpt-4o-mini\"\n")
	in.cmd.Process.Signal(syscall.SIGHUP)
	ns.await(t, "STATUS=configuration reloaded")
	waitLog(t, in, "configuration reloaded")

	// SIGTERM: STOPPING=1, then a clean exit.
	in.cmd.Process.Signal(syscall.SIGTERM)
	ns.await(t, "STOPPING=1")
	if code := in.wait(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d", code)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("admin socket left behind after a clean stop")
	}
}

func waitLog(t *testing.T, in *instance, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(in.stderr.String(), want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("log never said %q", want)
}

func TestCorruptDatabaseRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "")
	os.MkdirAll(filepath.Join(dir, "var"), 0o750)
	db := filepath.Join(dir, "var", "agent.db")
	garbage := []byte("definitely not sqlite, just bytes on a flash card")
	os.WriteFile(db, garbage, 0o600)
	in := start(t, dir)
	if code := in.wait(t); code == 0 {
		t.Fatal("started on a corrupt database")
	}
	if !strings.Contains(in.stderr.String(), "mv "+db) {
		t.Errorf("no fix named:\n%s", in.stderr.String())
	}
	if b, _ := os.ReadFile(db); !bytes.Equal(b, garbage) {
		t.Fatal("corrupt database was modified")
	}
}

func TestUnusableStateDir(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "")
	os.WriteFile(filepath.Join(dir, "var"), []byte("a file, not a dir"), 0o600)
	in := start(t, dir)
	if code := in.wait(t); code == 0 {
		t.Fatal("started with a file as state dir")
	}
	sc := bufio.NewScanner(strings.NewReader(in.stderr.String()))
	found := false
	for sc.Scan() {
		if strings.Contains(sc.Text(), "var") && strings.Contains(sc.Text(), "fix:") {
			found = true
		}
	}
	if !found {
		t.Errorf("no clear message:\n%s", in.stderr.String())
	}
}

// A database whose pages are damaged (but whose header and schema read)
// starts, and health says so with the fix, instead of serving silently.
func TestDamagedPagesReportedInHealth(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, "")
	ns := newNotifySock(t)
	in := start(t, dir, "NOTIFY_SOCKET="+ns.path)
	ns.await(t, "READY=1")
	sock := filepath.Join(dir, "var", "agent.sock")
	// Grow the database through SQLite itself, then stop the daemon.
	db := filepath.Join(dir, "var", "agent.db")
	in.cmd.Process.Signal(syscall.SIGTERM)
	in.wait(t)
	fill := exec.Command("sqlite3", db, "CREATE TABLE filler(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 300) INSERT INTO filler SELECT randomblob(600) FROM n;")
	if out, err := fill.CombinedOutput(); err != nil {
		t.Skipf("sqlite3 CLI unavailable (%v: %s)", err, out)
	}
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte{0xff}, 4096), 4096*4)
	f.Close()

	ns2 := newNotifySock(t)
	in2 := start(t, dir, "NOTIFY_SOCKET="+ns2.path)
	ns2.await(t, "READY=1")
	waitLog(t, in2, "database integrity check failed")
	st, err := admin.NewClient(sock).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Healthy {
		t.Fatalf("damaged database reported healthy: %+v", st.Checks)
	}
	if !strings.Contains(in2.stderr.String(), "mv "+db) {
		t.Errorf("no fix in the log:\n%s", in2.stderr.String())
	}
}

// fakeLLM answers the first request of each conversation with a
// write_file tool call and the next with the final answer.
func fakeLLM(t *testing.T) *llmtest.Server {
	t.Helper()
	return llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		if r.Last().Role == "user" {
			return llmtest.Calls(llmtest.Call("write_file", `{"path":"notes/todo.txt","content":"buy milk"}`))
		}
		return llmtest.Text("Saved your note.")
	})
}

// The admin channel drives the same pipeline a WeCom message takes: a tool
// call writes into the workspace, the reply comes back, slash commands
// work, and an unreachable model gets a clear reply instead of silence.
func TestAdminSendRunsTheAgent(t *testing.T) {
	llmSrv := fakeLLM(t)
	dir := t.TempDir()
	writeConfig(t, dir, "[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = \""+llmSrv.BaseURL()+"\"\n")
	ns := newNotifySock(t)
	in := start(t, dir, "NOTIFY_SOCKET="+ns.path)
	ns.await(t, "READY=1")
	c := admin.NewClient(filepath.Join(dir, "var", "agent.sock"))
	ctx := context.Background()

	res, err := c.Send(ctx, admin.SendRequest{To: "alice", Text: "note: buy milk"})
	if err != nil || len(res.Replies) != 1 || res.Replies[0] != "Saved your note." {
		t.Fatalf("send = %+v, %v", res, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "workspace", "files", "admin%3Aalice", "notes", "todo.txt")); err != nil || string(b) != "buy milk" {
		t.Fatalf("workspace file = %q, %v", b, err)
	}
	res, err = c.Send(ctx, admin.SendRequest{To: "alice", Text: "/status"})
	if err != nil || len(res.Replies) != 1 || !strings.Contains(res.Replies[0], "4 messages") {
		t.Fatalf("/status = %+v, %v", res, err)
	}
	if res, err = c.Send(ctx, admin.SendRequest{To: "alice", Text: "/new"}); err != nil || !strings.Contains(res.Replies[0], "New conversation") {
		t.Fatalf("/new = %+v, %v", res, err)
	}
	ss, err := c.Sessions(ctx)
	if err != nil || len(ss) != 2 {
		t.Fatalf("sessions = %+v, %v", ss, err)
	}

	llmSrv.Close() // the model goes away
	res, err = c.Send(ctx, admin.SendRequest{To: "bob", Text: "hello?"})
	// The user hears that it is retrying, then why it gave up.
	if err != nil || len(res.Replies) != 2 || !strings.Contains(res.Replies[0], "retrying") || !strings.Contains(res.Replies[1], "cannot reach the model") {
		t.Fatalf("unreachable model: %+v, %v", res, err)
	}
	in.cmd.Process.Signal(syscall.SIGTERM)
	if code := in.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// compressionPrompt marks the memory compressor's requests.
const compressionPrompt = "long-term memory of an assistant"

// newMemoryLLM answers compression requests with one fact and every other
// request with "ok".
func newMemoryLLM(t *testing.T) *llmtest.Server {
	t.Helper()
	return llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		if strings.Contains(r.System(), compressionPrompt) {
			return llmtest.Text(`{"facts": [{"fact": "Alice's favourite tea is oolong", "keywords": ["tea", "oolong"], "topic": "drinks"}]}`)
		}
		return llmtest.Text("ok")
	})
}

// lastSystem is the system prompt of the latest request that was not a
// compression request.
func lastSystem(srv *llmtest.Server) string {
	reqs := srv.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if sys := reqs[i].System(); sys != "" && !strings.Contains(sys, compressionPrompt) {
			return sys
		}
	}
	return ""
}

// Long-term memory through the daemon: a closed conversation is compressed
// into a fact, the fact comes back in the prompt of a later conversation,
// the operator lists, searches and forgets it, and /forget works in chat.
func TestMemoryThroughTheDaemon(t *testing.T) {
	llmSrv := newMemoryLLM(t)
	dir := t.TempDir()
	writeConfig(t, dir, "[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = \""+llmSrv.BaseURL()+"\"\n")
	ns := newNotifySock(t)
	in := start(t, dir, "NOTIFY_SOCKET="+ns.path)
	ns.await(t, "READY=1")
	c := admin.NewClient(filepath.Join(dir, "var", "agent.sock"))
	ctx := context.Background()
	send := func(user, text string) []string {
		t.Helper()
		res, err := c.Send(ctx, admin.SendRequest{To: user, Text: text})
		if err != nil {
			t.Fatalf("send %q: %v", text, err)
		}
		return res.Replies
	}
	send("alice", "I really like oolong tea")
	send("alice", "/new") // the closed conversation is compressed in the background
	var facts []admin.Fact
	deadline := time.Now().Add(20 * time.Second)
	for len(facts) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no fact was stored from the closed conversation")
		}
		time.Sleep(20 * time.Millisecond)
		var err error
		if facts, err = c.MemoryList(ctx, admin.MemoryQuery{Scope: "admin:alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if facts[0].Text != "Alice's favourite tea is oolong" || facts[0].Source == "" {
		t.Fatalf("fact: %+v", facts[0])
	}
	send("alice", "what tea should I buy?")
	if sys := lastSystem(llmSrv); !strings.Contains(sys, "## Relevant memory") || !strings.Contains(sys, "favourite tea is oolong") {
		t.Fatalf("system prompt without the fact:\n%s", sys)
	}
	send("bob", "what tea should I buy?")
	if sys := lastSystem(llmSrv); strings.Contains(sys, "oolong") {
		t.Fatalf("bob's prompt shows alice's fact:\n%s", sys)
	}
	if hits, err := c.MemorySearch(ctx, admin.MemoryQuery{Query: "oolong"}); err != nil || len(hits) != 1 || hits[0].Scope != "admin:alice" {
		t.Fatalf("operator search: %+v %v", hits, err)
	}
	if r := send("alice", "/status"); !strings.Contains(r[0], "Memory: 1 facts") {
		t.Fatalf("/status: %q", r)
	}
	if r := send("alice", "/forget oolong"); !strings.Contains(r[0], "Forgotten (1)") {
		t.Fatalf("/forget: %q", r)
	}
	if _, err := c.MemoryForget(ctx, facts[0].ID); err == nil || !strings.Contains(err.Error(), "no fact") {
		t.Fatalf("forgetting a forgotten fact: %v", err)
	}
	in.cmd.Process.Signal(syscall.SIGTERM)
	if code := in.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
