package doctor

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"agent/pkg/admin"
)

// statusBackend answers the admin API's status with the report set.
type statusBackend struct {
	mu sync.Mutex
	st admin.Status
}

func (b *statusBackend) Status(context.Context) admin.Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.st
}
func (*statusBackend) Reload(context.Context) error { return nil }
func (*statusBackend) Send(context.Context, admin.SendRequest) (admin.SendResult, error) {
	return admin.SendResult{}, nil
}
func (*statusBackend) Sessions(context.Context) ([]admin.Session, error) { return nil, nil }

// A channel whose Run keeps failing leaves the daemon healthy (the others
// run on) but doctor warns about it, with where to look.
func TestDaemonReportsRestartingChannel(t *testing.T) {
	e := baseEnv(t, "", nil)
	ln, err := admin.Listen(e.Config.Server.AdminSocket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := admin.Status{PID: 42, Version: "test", Uptime: "1m", Healthy: true, Checks: []admin.Check{
		{Name: "database", Status: "ok"},
		{Name: "channel_wecom", Status: "ok"},
		{Name: "channel_aibot", Status: "degraded", Detail: "channel aibot failed 3 time(s) in a row and is restarted with backoff: dial: connection refused"},
	}}
	b := &statusBackend{st: st}
	go admin.Serve(ctx, ln, b, slog.New(slog.DiscardHandler))
	r := e.checkDaemon(ctx)
	if r.Level != Warn || !strings.Contains(r.Detail, "channel aibot is restarting") || !strings.Contains(r.Detail, "connection refused") ||
		strings.Contains(r.Detail, "wecom") || r.Fix == "" {
		t.Fatalf("%+v", r)
	}
	b.mu.Lock()
	b.st.Checks = st.Checks[:2]
	b.mu.Unlock()
	if r := e.checkDaemon(ctx); r.Level != OK {
		t.Fatalf("healthy channels: %+v", r)
	}
}

// wecom_bot with no daemon running says doctor cannot check the
// connection (it does not dial WeCom itself). Missing credentials are the
// config check's (validation refuses them).
func TestWeComBotCheckOffline(t *testing.T) {
	e := baseEnv(t, "[wecom_bot]\nenabled = true\nbot_id = \"b1\"\nsecret = \"s1\"\n", nil)
	r := e.checkWeComBot(context.Background())
	if r.Level != Warn || !strings.Contains(r.Detail, "not running") {
		t.Fatalf("no daemon: %+v", r)
	}
	e = baseEnv(t, "", nil)
	if r := e.checkWeComBot(context.Background()); r.Level != OK || r.Detail != "disabled" {
		t.Fatalf("disabled: %+v", r)
	}
}
