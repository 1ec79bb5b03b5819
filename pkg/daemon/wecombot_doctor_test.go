package daemon

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/config"
	"agent/pkg/doctor"
	"agent/pkg/llm/llmtest"
	"agent/pkg/wecom/aibottest"
)

// agentctl doctor's wecom_bot line reads the running daemon's connection
// through the admin API (it never subscribes itself: that would replace
// the daemon's connection): subscribed, then a refused subscription with
// WeCom's errcode and where the credentials come from.
func TestDoctorReadsTheBotConnection(t *testing.T) {
	llmSrv := llmtest.NewFunc(t, func(*llmtest.Request) llmtest.Reply { return llmtest.Reply{Chunks: []string{"ok"}} })
	bot := aibottest.New(t)
	dir := t.TempDir()
	_, stop := startDaemonIn(t, dir, botConfig(llmSrv.BaseURL(), bot.URL()))
	defer stop()
	if !bot.WaitReady(20 * time.Second) {
		t.Fatal("the daemon did not subscribe")
	}
	cfg, _, err := config.Load(filepath.Join(dir, "config.toml"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	check := func() doctor.Result {
		for _, c := range doctor.Checks(doctor.Env{Config: cfg, SkipModels: true}) {
			if c.Name == "wecom_bot" {
				return doctor.Run(context.Background(), []doctor.Check{c}, 10*time.Second)[0]
			}
		}
		t.Fatal("doctor has no wecom_bot check")
		return doctor.Result{}
	}
	deadline := time.Now().Add(20 * time.Second)
	r := check()
	for r.Level != doctor.OK && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // the daemon marks itself subscribed
		r = check()
	}
	if r.Level != doctor.OK || !strings.Contains(r.Detail, "subscribed") {
		t.Fatalf("subscribed: %+v", r)
	}
	dials := bot.Dials()
	bot.Reject(40058, "invalid secret")
	bot.Drop()
	for {
		r = check()
		if r.Level == doctor.Fail {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refused subscription: %+v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(r.Detail, "40058") || !strings.Contains(r.Fix, "wecom_bot.secret") {
		t.Fatalf("refused subscription: %+v", r)
	}
	if bot.Dials() != dials+1 {
		t.Fatalf("doctor or the daemon dialled %d times after the refusal, want 1 (no hammering, doctor never dials)", bot.Dials()-dials)
	}
}
