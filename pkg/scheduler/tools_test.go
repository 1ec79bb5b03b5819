package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"agent/pkg/tools"
)

func TestTools(t *testing.T) {
	h := newHarness(t, t0, nil)
	reg := tools.NewRegistry()
	for _, tl := range h.s.Tools(func(u string) bool { return u == "wecom:boss" }) {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	run := func(user, name string, args any) (string, error) {
		b, _ := json.Marshal(args)
		return reg.Run(ctx, name, tools.Call{Args: b, User: user, Channel: "wecom", Profile: "wecom"})
	}
	out, err := run("alice", ToolSchedule, map[string]any{"cron": "0 9 * * 1", "text": "weekly"})
	if err != nil || !strings.Contains(out, "#1") || !strings.Contains(out, "2025-03-03 09:00 CST") {
		t.Fatalf("schedule: %q, %v; want job #1 next Monday 09:00 CST", out, err)
	}
	if _, err := run("bob", ToolSchedule, map[string]any{"at": "2025-03-04T08:00", "tz": "Europe/Berlin", "prompt": "news"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]any{
		{"cron": "not a cron", "text": "x"},
		{"at": "2020-01-01T00:00", "text": "x"},
		{"cron": "0 9 * * *", "tz": "Nowhere/City", "text": "x"},
		{"cron": "0 9 * * *", "text": "x", "prompt": "y"},
	} {
		if _, err := run("alice", ToolSchedule, bad); !errors.Is(err, tools.ErrBadArgs) {
			t.Errorf("schedule %v: %v; want ErrBadArgs", bad, err)
		}
	}
	out, _ = run("alice", ToolListSchedules, map[string]any{})
	if !strings.Contains(out, "#1") || strings.Contains(out, "#2") {
		t.Errorf("alice's list:\n%s\nwant only #1", out)
	}
	out, _ = run("boss", ToolListSchedules, map[string]any{})
	if !strings.Contains(out, "#1") || !strings.Contains(out, "#2") || !strings.Contains(out, "runs prompt") {
		t.Errorf("owner's list:\n%s\nwant #1 and #2", out)
	}
	if _, err := run("alice", ToolRemoveSchedule, map[string]any{"id": 2}); !errors.Is(err, tools.ErrBadArgs) {
		t.Errorf("alice removing bob's job: %v; want refused", err)
	}
	if out, err := run("boss", ToolRemoveSchedule, map[string]any{"id": 2}); err != nil || !strings.Contains(out, "removed #2") {
		t.Errorf("owner removing bob's job: %q, %v", out, err)
	}
	if out, err := run("alice", ToolRemoveSchedule, map[string]any{"id": 1}); err != nil || !strings.Contains(out, "removed #1") {
		t.Errorf("alice removing her job: %q, %v", out, err)
	}
	if out, _ := run("alice", ToolListSchedules, map[string]any{}); out != "no scheduled jobs" {
		t.Errorf("list after removal: %q", out)
	}
}
