package assistant

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
)

func testStore(t testing.TB, cfg *config.Config) *store.Store {
	t.Helper()
	if err := os.MkdirAll(cfg.Agent.StateDir, 0o750); err != nil {
		t.Fatal(err)
	}
	st := storetest.OpenAt(t, filepath.Join(cfg.Agent.StateDir, store.FileName))
	return st
}

// A pipeline that did not start says why on every conversation call, and
// still runs the self-check (the owners most need it then).
func TestFailedAssistantSaysWhyAndStillChecks(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Agent.StateDir = filepath.Join(dir, "var")
	cfg.Agent.Workspace = filepath.Join(dir, "ws")
	st := testStore(t, cfg)
	cause := errors.New("agent.workspace /nope: permission denied")
	a := Failed(cause, cfg, Deps{Store: st, SysRoot: "/nonexistent"})

	if _, err := a.Ask(context.Background(), conversation.Inbound{Channel: "admin", Sender: "ops", Text: "hi"}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Ask: %v", err)
	}
	for name, err := range map[string]error{
		"sessions": func() error { _, err := a.Sessions(); return err }(),
		"jobs":     func() error { _, err := a.Scheduler(); return err }(),
		"memory":   func() error { _, err := a.Memory(); return err }(),
		"tools":    func() error { _, err := a.Tools(); return err }(),
		"mcp":      func() error { _, err := a.MCP(); return err }(),
		"custom":   func() error { _, err := a.CustomTools(); return err }(),
		"cache":    func() error { _, err := a.CommandCache(); return err }(),
		"backlog":  func() error { _, err := a.Backlog(); return err }(),
		"export":   func() error { _, err := a.Portable().Export(context.Background(), "wecom", "bob"); return err }(),
		"register": a.Register(),
		"start":    a.Start(context.Background()),
	} {
		if err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s: %v", name, err)
		}
	}
	rep, err := a.RunSelfCheck(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Text(), "database: quick_check ok") {
		t.Errorf("self-check of a failed pipeline:\n%s", rep.Text())
	}
	if err := a.Close(context.Background()); err != nil {
		t.Error(err)
	}
}
