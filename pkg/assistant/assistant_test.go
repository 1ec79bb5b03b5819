package assistant

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/admin"
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
	if _, err := a.Send(context.Background(), admin.SendRequest{To: "ops", Text: "hi"}); err == nil || !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("Send: %v", err)
	}
	for name, err := range map[string]error{
		"sessions": func() error { _, err := a.Sessions(context.Background()); return err }(),
		"jobs":     func() error { _, err := a.JobsList(context.Background()); return err }(),
		"memory":   func() error { _, err := a.MemoryList(context.Background(), admin.MemoryQuery{}); return err }(),
		"tools":    func() error { _, err := a.Tools(context.Background()); return err }(),
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
