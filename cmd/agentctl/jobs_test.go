package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"agent/pkg/admin"
)

type jobsBackend struct {
	memBackend
	added []admin.JobSpec
}

func (b *jobsBackend) JobsList(context.Context) ([]admin.Job, error) {
	return []admin.Job{{ID: 7, Owner: "wecom:alice", Kind: "cron", Spec: "0 9 * * 1", TZ: "Asia/Shanghai", Action: "message",
		Payload: "weekly", State: "active", Next: time.Date(2025, 3, 3, 1, 0, 0, 0, time.UTC), Failures: 2, LastError: "send failed"}}, nil
}
func (b *jobsBackend) JobsAdd(_ context.Context, s admin.JobSpec) (admin.Job, error) {
	if s.Cron == "bad" {
		return admin.Job{}, fmt.Errorf("%w: cron expression %q: expected 5 fields", admin.ErrInvalidJob, s.Cron)
	}
	b.added = append(b.added, s)
	return admin.Job{ID: 8, Owner: s.Owner, TZ: "UTC", Next: time.Date(2025, 3, 3, 9, 0, 0, 0, time.UTC)}, nil
}
func (b *jobsBackend) JobsRemove(_ context.Context, id int64) (admin.Job, error) {
	if id != 7 {
		return admin.Job{}, fmt.Errorf("%w: job #%d", admin.ErrNotFound, id)
	}
	return admin.Job{ID: 7, Owner: "wecom:alice", Payload: "weekly"}, nil
}

func TestJobsCommands(t *testing.T) {
	b := &jobsBackend{}
	path := serveAdmin(t, b)
	if code, out, errs := agentctl(t, "-config", path, "jobs", "list"); code != 0 || !strings.Contains(out, "0 9 * * 1") ||
		!strings.Contains(out, "2025-03-03 09:00 CST") || !strings.Contains(out, "last error: send failed") {
		t.Fatalf("list: %d %q %q", code, out, errs)
	}
	if code, out, errs := agentctl(t, "-config", path, "jobs", "add", "--owner", "wecom:bob", "--cron", "0 9 * * *", "--prompt", "summarise", "my", "day"); code != 0 || out != "added #8, next run 2025-03-03 09:00 UTC\n" {
		t.Fatalf("add: %d %q %q", code, out, errs)
	}
	if len(b.added) != 1 || b.added[0].Prompt != "summarise my day" || b.added[0].Text != "" || b.added[0].Owner != "wecom:bob" {
		t.Fatalf("added %+v", b.added)
	}
	if code, _, errs := agentctl(t, "-config", path, "jobs", "add", "--owner", "wecom:bob", "--cron", "bad", "x"); code != 1 || !strings.Contains(errs, "expected 5 fields") {
		t.Fatalf("add bad: %d %q", code, errs)
	}
	if code, out, _ := agentctl(t, "-config", path, "jobs", "rm", "#7"); code != 0 || !strings.Contains(out, "removed #7") {
		t.Fatalf("rm: %d %q", code, out)
	}
	if code, _, errs := agentctl(t, "-config", path, "jobs", "rm", "9"); code != 1 || !strings.Contains(errs, "#9") {
		t.Fatalf("rm unknown: %d %q", code, errs)
	}
	for _, args := range [][]string{{"jobs"}, {"jobs", "rm"}, {"jobs", "add", "x"}, {"jobs", "add", "--owner", "a", "--cron", "* * * * *", "--at", "2030-01-01T00:00", "x"}, {"jobs", "zap"}} {
		if code, _, _ := agentctl(t, append([]string{"-config", path}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
