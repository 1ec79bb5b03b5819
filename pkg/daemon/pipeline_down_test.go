package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/admin"
	"agent/pkg/channel"
	"agent/pkg/channel/builtin"
	"agent/pkg/channelhost"
	"agent/pkg/config"
	"agent/pkg/turn"
)

// A pipeline that cannot start (the workspace is a file) leaves the daemon
// serving: READY, "conversations" failing on /healthz with the reason, and
// the channels built with an assistant that says why (Conversation nil,
// Err the cause). A channel whose Build panics is disabled, not the daemon.
func TestDaemonRunsWhenThePipelineCannotStart(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ws"), []byte("a file, not a folder"), 0o600) // an unusable workspace
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte("[server]\nlisten = \"127.0.0.1:0\"\n[agent]\nstate_dir = \"var\"\nworkspace = \"ws\"\n"), 0o600)
	cfg, _, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var got channelhost.Env
	probe := channelhost.Builder{Name: "probe", Build: func(_ context.Context, env channelhost.Env) (channel.Channel, error) {
		got = env
		return nil, nil
	}}
	crash := channelhost.Builder{Name: "crash", Build: func(context.Context, channelhost.Env) (channel.Channel, error) {
		panic("a bug in Build")
	}}
	n := newFakeNotifier(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: cfg, Notifier: n, Channels: append(builtin.Channels(), probe, crash)})
	}()
	n.waitFor(t, "READY=1", 1)
	st, err := admin.NewClient(cfg.Server.AdminSocket).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]string{}
	for _, c := range st.Checks {
		checks[c.Name] = c.Status + ": " + c.Detail
	}
	if c := checks["conversations"]; !strings.HasPrefix(c, "failing") || !strings.Contains(c, "agent.workspace") {
		t.Errorf("conversations check: %q", c)
	}
	if c := checks["crash"]; !strings.HasPrefix(c, "failing") || !strings.Contains(c, "panic while building the channel: a bug in Build") {
		t.Errorf("crash check: %q", c)
	}
	if _, err := admin.NewClient(cfg.Server.AdminSocket).Send(ctx, admin.SendRequest{To: "ops", Text: "hi"}); err == nil ||
		!strings.Contains(err.Error(), "conversation pipeline is unavailable") {
		t.Errorf("agentctl send with no pipeline: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got.Turns == nil {
		t.Fatal("Host.Turns is nil while the pipeline is unavailable; channel.Host documents non-nil Turns whose Err says why")
	}
	if err := got.Turns.Err(); err == nil || !strings.Contains(err.Error(), "agent.workspace") {
		t.Errorf("Turns.Err() = %v, want the cause", err)
	}
	if _, err := got.Turns.Handle(ctx, turn.Message{Channel: "probe", Sender: "bob", Text: "hi"}, turn.Sink{Reply: func(context.Context, string) error { return nil }}); err == nil {
		t.Error("Turns.Handle of an unavailable pipeline took a turn")
	}
	if got.Files != nil || got.Spaces != nil {
		t.Error("an unavailable pipeline hands channels users' folders")
	}
}
