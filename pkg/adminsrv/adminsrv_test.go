package adminsrv

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/assistant"
	"agent/pkg/config"
	"agent/pkg/health"
	"agent/pkg/mcp"
	"agent/pkg/store/storetest"
)

// failed is a backend over a pipeline that did not start.
func failed(t *testing.T) *Backend {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Agent.StateDir = filepath.Join(dir, "var")
	cfg.Agent.Workspace = filepath.Join(dir, "ws")
	cfg.Path = filepath.Join(dir, "config.toml")
	a := assistant.Failed(errors.New("agent.workspace /nope: permission denied"), cfg, assistant.Deps{Store: storetest.Open(t), SysRoot: "/nonexistent"})
	t.Cleanup(func() { a.Close(context.Background()) })
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &Backend{
		Host: Host{Config: func() *config.Config { return cfg }, Health: health.New(time.Second, nil),
			Now: func() time.Time { return started.Add(90 * time.Second) }, Started: started, Listen: "127.0.0.1:8080",
			Components: func() map[string]string { return map[string]string{"models": "loading"} },
			Reload:     func(context.Context) error { return errors.New("reload: configuration was not loaded from a file") }},
		Assistant: a,
	}
}

// While the pipeline is down every part of it says why, and status still
// answers (without the pipeline's counts).
func TestAPipelineThatDidNotStartSaysWhy(t *testing.T) {
	ctx := context.Background()
	b := failed(t)
	const why = "the conversation pipeline is unavailable: agent.workspace /nope: permission denied"
	for name, err := range map[string]error{
		"send": func() error {
			_, err := b.Send(ctx, admin.SendRequest{Channel: "wecom", To: "ops", Text: "hi"})
			return err
		}(),
		"sessions": func() error { _, err := b.Sessions(ctx); return err }(),
		"memory":   func() error { _, err := b.MemoryList(ctx, admin.MemoryQuery{}); return err }(),
		"search":   func() error { _, err := b.MemorySearch(ctx, admin.MemoryQuery{Query: "x"}); return err }(),
		"forget":   func() error { _, err := b.MemoryForget(ctx, 1); return err }(),
		"tools":    func() error { _, err := b.Tools(ctx); return err }(),
		"reload":   b.ReloadTools(ctx),
		"custom":   func() error { _, err := b.CustomTool(ctx, "x"); return err }(),
		"action":   func() error { _, err := b.CustomToolAction(ctx, "x", "approve", ""); return err }(),
		"skills":   func() error { _, err := b.SkillsList(ctx); return err }(),
		"install":  func() error { _, err := b.InstallSkill(ctx, bytes.NewReader(nil)); return err }(),
		"enable":   func() error { _, err := b.SetSkillEnabled(ctx, "x", true); return err }(),
		"cache":    func() error { _, err := b.CacheList(ctx); return err }(),
		"clear":    func() error { _, err := b.CacheClear(ctx, 0); return err }(),
	} {
		if err == nil || err.Error() != why {
			t.Errorf("%s: %v; want %q", name, err, why)
		}
	}
	for name, err := range map[string]error{
		"jobs": func() error { _, err := b.JobsList(ctx); return err }(),
		"add": func() error {
			_, err := b.JobsAdd(ctx, admin.JobSpec{Owner: "wecom:bob", Text: "x", At: "10m"})
			return err
		}(),
		"remove": func() error { _, err := b.JobsRemove(ctx, 1); return err }(),
	} {
		if err == nil || !strings.Contains(err.Error(), "the scheduler is unavailable: agent.workspace /nope") {
			t.Errorf("%s: %v", name, err)
		}
	}
	st := b.Status(ctx)
	if st.Uptime != "1m30s" || st.Listen != "127.0.0.1:8080" || !st.Healthy || st.Components["models"] != "loading" ||
		st.ConfigPath != b.Host.Config().Path || st.Held != nil || st.Memory != nil || st.PID == 0 {
		t.Errorf("status = %+v", st)
	}
	if err := b.Reload(ctx); err == nil || !strings.Contains(err.Error(), "not loaded from a file") {
		t.Errorf("reload: %v", err)
	}
}

// A registry name belongs to the MCP server whose name prefixes it.
func TestServerOf(t *testing.T) {
	servers := []mcp.ServerStatus{{Name: "web"}, {Name: "web2"}}
	for name, want := range map[string]string{"web__echo": "web", "web2__get": "web2", "web_search": "", "reload_mcp": "", "webx__y": ""} {
		if got := serverOf(name, servers); got != want {
			t.Errorf("serverOf(%q) = %q; want %q", name, got, want)
		}
	}
}
