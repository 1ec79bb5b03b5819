package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/admin"
)

func agentctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb, func(string) (string, bool) { return "", false })
	return code, out.String(), errb.String()
}

func TestDoctorOnBrokenConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(path, []byte("[memory]\ndedup_threshold = 3\n"), 0o600)
	code, out, _ := agentctl(t, "-config", path, "doctor")
	if code != 1 || !strings.HasPrefix(out, "fail  config") || !strings.Contains(out, "memory.dedup_threshold") || !strings.Contains(out, "fix: ") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, _ = agentctl(t, "-config", path, "--json", "doctor")
	var rep struct {
		OK     bool
		Checks []struct{ Level, Name string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.OK || code != 1 || rep.Checks[0].Level != "fail" {
		t.Fatalf("json exit %d %v: %s", code, err, out)
	}
}

func TestStatusWhenDaemonDown(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte("[agent]\nstate_dir = \"var\"\n"), 0o600)
	code, _, stderr := agentctl(t, "-config", path, "status")
	if code != 3 || !strings.Contains(stderr, "not running") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func TestModelsVerifyMissing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte("[embedding]\nmodel_dir = \"nope\"\n"), 0o600)
	code, out, _ := agentctl(t, "-config", path, "models", "verify")
	if code != 1 || !strings.Contains(out, "missing") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestUnknownCommand(t *testing.T) {
	if code, _, stderr := agentctl(t, "frobnicate"); code != 2 || !strings.Contains(stderr, "unknown command") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// memBackend is an admin backend with a small memory.
type memBackend struct {
	facts map[int64]admin.Fact
	last  admin.MemoryQuery
}

func (b *memBackend) Status(context.Context) admin.Status { return admin.Status{} }
func (b *memBackend) Reload(context.Context) error        { return nil }
func (b *memBackend) Send(context.Context, admin.SendRequest) (admin.SendResult, error) {
	return admin.SendResult{}, nil
}
func (b *memBackend) Sessions(context.Context) ([]admin.Session, error) { return nil, nil }
func (b *memBackend) MemoryList(_ context.Context, q admin.MemoryQuery) ([]admin.Fact, error) {
	b.last = q
	var out []admin.Fact
	for _, f := range b.facts {
		out = append(out, f)
	}
	return out, nil
}
func (b *memBackend) MemorySearch(_ context.Context, q admin.MemoryQuery) ([]admin.Fact, error) {
	b.last = q
	return b.MemoryList(context.Background(), q)
}
func (b *memBackend) MemoryForget(_ context.Context, id int64) (admin.Fact, error) {
	f, ok := b.facts[id]
	if !ok {
		return f, fmt.Errorf("%w: no fact #%d", admin.ErrNotFound, id)
	}
	delete(b.facts, id)
	return f, nil
}

// serveAdmin serves b on an admin socket in a temporary directory until the
// test ends and returns the path of a config file that points agentctl at it.
func serveAdmin(t *testing.T, b admin.Backend) string {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte("[server]\nadmin_socket = \""+sock+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := admin.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go admin.Serve(ctx, ln, b, slog.New(slog.DiscardHandler))
	return path
}

func TestMemoryCommands(t *testing.T) {
	b := &memBackend{facts: map[int64]admin.Fact{7: {ID: 7, Scope: "wecom:alice", Text: "Alice likes oolong", Updated: time.Now()}}}
	path := serveAdmin(t, b)

	code, out, errs := agentctl(t, "-config", path, "memory", "list", "--scope", "wecom:alice", "--history")
	if code != 0 || !strings.Contains(out, "Alice likes oolong") || b.last.Scope != "wecom:alice" || !b.last.History {
		t.Fatalf("list: exit %d %q %q, query %+v", code, out, errs, b.last)
	}
	code, out, _ = agentctl(t, "-config", path, "--json", "memory", "search", "--limit", "3", "oolong", "tea")
	if code != 0 || !strings.Contains(out, `"scope": "wecom:alice"`) || b.last.Query != "oolong tea" || b.last.Limit != 3 {
		t.Fatalf("search: exit %d %q, query %+v", code, out, b.last)
	}
	if code, out, _ = agentctl(t, "-config", path, "memory", "forget", "#7"); code != 0 || !strings.Contains(out, "forgotten #7 (wecom:alice)") {
		t.Fatalf("forget: exit %d %q", code, out)
	}
	if code, _, errs = agentctl(t, "-config", path, "memory", "forget", "7"); code != 1 || !strings.Contains(errs, "no fact #7") {
		t.Fatalf("forget again: exit %d %q", code, errs)
	}
	for _, args := range [][]string{{"memory"}, {"memory", "search"}, {"memory", "forget", "x"}, {"memory", "forget", "7abc"}, {"memory", "forget", "-3"}, {"memory", "drop"}} {
		if code, _, _ := agentctl(t, append([]string{"-config", path}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
