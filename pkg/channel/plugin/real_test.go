package plugin

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"agent/pkg/agent"
	"agent/pkg/channel"
	"agent/pkg/channel/gate"
	"agent/pkg/channel/mailbox"
	"agent/pkg/clock"
	"agent/pkg/conversation"
	"agent/pkg/llm"
	"agent/pkg/llm/llmtest"
	"agent/pkg/pairing"
	"agent/pkg/runner"
	"agent/pkg/session"
	"agent/pkg/store/storetest"
	"agent/pkg/tools"
)

// pipeline is the real conversation pipeline (runner, agent loop,
// sessions in SQLite) on db, its model an llmtest server answering "you
// said: TEXT" at once.
func pipeline(tb testing.TB, db *sql.DB) channel.Turns {
	tb.Helper()
	srv := llmtest.NewFunc(tb, func(r *llmtest.Request) llmtest.Reply { return llmtest.Text("you said: " + r.LastUser()) })
	client, err := llm.New(llm.Config{Provider: "openai", BaseURL: srv.BaseURL(), APIKey: "sk-test", Model: "test-model", Timeout: 10 * time.Second},
		llm.WithRetry(llm.RetryPolicy{MaxAttempts: 1}), llm.WithBreaker(-1, 0))
	if err != nil {
		tb.Fatal(err)
	}
	sessions := session.New(db, nil)
	a := agent.New(agent.Config{}, agent.Deps{LLM: client, Tools: tools.NewRegistry(), Sessions: sessions, Prompt: agent.NewPrompt(tb.TempDir(), nil)})
	r := runner.New(runner.Config{MaxConcurrent: 4, QueueLen: 64}, nil)
	tb.Cleanup(func() { r.Close(context.Background()) })
	svc := conversation.New(conversation.Deps{Runner: r, Agent: a, Sessions: sessions, Model: "test-model"})
	return conversation.Turns(svc, nil, nil)
}

// realDeps is a channel on a real database and the real pipeline, under
// the wall clock, running command.
func realDeps(tb testing.TB, name, command string, args ...string) (Deps, *syncBuffer) {
	db := storetest.DB(tb)
	logs := &syncBuffer{}
	return Deps{
		Name:    name,
		Command: command,
		Args:    args,
		Dir:     filepath.Join(tb.TempDir(), "channels", name),
		DB:      db,
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
		Clock:   clock.Real(),
		Gate:    gate.Gate{Pairings: pairing.New(db, nil), Policy: func() pairing.Policy { return pairing.Policy{Mode: pairing.Open} }},
		Ask:     Ask(name, pipeline(tb, db)),
	}, logs
}

// The example plugin, unchanged, against the real channel and pipeline: a
// line written into its FIFO becomes a message, acked, answered by a
// turn, sent back as a send it delivers into its outbox file and answers
// sent.
func TestExamplePluginEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed (scripts/deps.sh installs it)")
	}
	script, err := filepath.Abs("../../../examples/channel-plugin/fifo_chat.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fifo, outbox := filepath.Join(dir, "chat.fifo"), filepath.Join(dir, "sent.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	d, logs := realDeps(t, "fifo", script, "--fifo", fifo, "--outbox", outbox)
	c, err := New(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := ended(t, done); err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			t.Log(logs.String())
		}
	}()

	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // never blocks, reader or not
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("alice: hello plugin\n"); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	eventually(t, "the plugin delivered the answer", func() bool {
		b, _ := os.ReadFile(outbox)
		return json.Unmarshal([]byte(strings.SplitN(string(b), "\n", 2)[0]), &got) == nil
	})
	if got["chat"] != "alice" || got["text"] != "you said: hello plugin" || got["reply_to"] == "" {
		t.Fatalf("delivered %v", got)
	}
	eventually(t, "the send is recorded sent", func() bool {
		var st int
		err := d.DB.QueryRow(`SELECT state FROM outbox WHERE channel = ?`, MailboxPrefix+"fifo").Scan(&st)
		return err == nil && st == mailbox.OutSent
	})
	var state int
	if err := d.DB.QueryRow(`SELECT state FROM inbox WHERE channel = ? AND dedup_key = ?`, MailboxPrefix+"fifo", got["reply_to"]).Scan(&state); err != nil || state != mailbox.InDone {
		t.Fatalf("inbox row of %s: state %d, %v", got["reply_to"], state, err)
	}
	// Acked: the plugin's journal of unacked messages is empty again.
	eventually(t, "the plugin saw the ack", func() bool {
		b, err := os.ReadFile(filepath.Join(d.Dir, "unacked.json"))
		return err == nil && strings.TrimSpace(string(b)) == "{}"
	})
	if !strings.Contains(logs.String(), "channel plugin stderr") || !strings.Contains(logs.String(), "channel=fifo") {
		t.Errorf("the plugin's stderr is not in the log with its channel:\n%s", logs.String())
	}
}

// A real process: its environment is PATH and its section's env only (not
// the daemon's), its working directory the channel's state directory,
// its stderr lines in the log with the channel's name; when the daemon
// stops, it and what it started (its process group) are gone.
func TestRealProcessEnvironmentDirAndGroup(t *testing.T) {
	t.Setenv("AGENT_DAEMON_SECRET", "must-not-leak")
	dir := t.TempDir()
	script := filepath.Join(dir, "plugin.sh")
	body := `#!/bin/sh
read hello
echo "plugin stderr: started in $(pwd)" >&2
sleep 1000 &
echo $! > child.pid
printf '{"type":"message","id":"env-1","sender":"probe","text":"PATH=%s TOKEN=%s LEAK=%s"}\n' "$PATH" "$TOKEN" "$AGENT_DAEMON_SECRET"
while read line; do :; done
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	d, logs := realDeps(t, "shell", script)
	d.Env = map[string]string{"TOKEN": "t0k"}
	d.LookupEnv = func(k string) (string, bool) {
		if k == "PATH" {
			return "/usr/bin:/bin", true
		}
		return os.LookupEnv(k)
	}
	var mu sync.Mutex
	var asked []string
	ask := d.Ask
	d.Ask = func(ctx context.Context, r Request, reply func(context.Context, string) error) (<-chan struct{}, error) {
		mu.Lock()
		asked = append(asked, r.Text)
		mu.Unlock()
		return ask(ctx, r, reply)
	}
	c, err := New(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	eventually(t, "the plugin's message answered", func() bool {
		var st int
		err := d.DB.QueryRow(`SELECT state FROM inbox WHERE channel = ? AND dedup_key = 'env-1'`, MailboxPrefix+"shell").Scan(&st)
		return err == nil && st == mailbox.InDone
	})
	mu.Lock()
	if len(asked) != 1 || asked[0] != "PATH=/usr/bin:/bin TOKEN=t0k LEAK=" {
		t.Fatalf("the plugin saw %q", asked)
	}
	mu.Unlock()
	eventually(t, "the plugin logged", func() bool { return strings.Contains(logs.String(), "started in "+d.Dir) })
	if !strings.Contains(logs.String(), "channel=shell") {
		t.Errorf("stderr not logged with the channel:\n%s", logs.String())
	}
	pidText, err := os.ReadFile(filepath.Join(d.Dir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	cancel()
	if err := ended(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	eventually(t, fmt.Sprintf("the plugin's child %d is gone", pid), func() bool { return !running(pid) })
	if fi, err := os.Stat(d.Dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("working directory: %v %v", fi.Mode(), err)
	}
}

// running reports whether pid is a live process (a zombie is not).
func running(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// A plugin that cannot be started (its file gone since the configuration
// was read) is a failed Run, not a crash: the Set retries it.
func TestMissingExecutableIsAFailedRun(t *testing.T) {
	d, _ := realDeps(t, "gone", filepath.Join(t.TempDir(), "no-such-plugin"))
	c, err := New(d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "start") {
		t.Fatalf("Run: %v", err)
	}
}
