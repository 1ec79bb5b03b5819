package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/channel/builtin"
	"agent/pkg/clock"
)

func TestJobsThroughAdminAPI(t *testing.T) {
	cfg := testConfig(t)
	n := newFakeNotifier(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Config: cfg, Notifier: n, Channels: builtin.Channels()}) }()
	n.waitFor(t, "READY=1", 1)
	c := admin.NewClient(cfg.Server.AdminSocket)

	j, err := c.AddJob(ctx, admin.JobSpec{Owner: "wecom:alice", Cron: "0 9 * * 1", TZ: "Asia/Shanghai", Text: "weekly summary"})
	if err != nil {
		t.Fatal(err)
	}
	if j.ID == 0 || j.Channel != "wecom" || j.To != "alice" || j.Next.IsZero() || j.State != "active" {
		t.Fatalf("added %+v", j)
	}
	if _, err := c.AddJob(ctx, admin.JobSpec{Owner: "wecom:alice", Cron: "0 0 30 2 *", Text: "never"}); err == nil || !strings.Contains(err.Error(), "never fires") {
		t.Fatalf("never-firing cron: %v", err)
	}
	if _, err := c.AddJob(ctx, admin.JobSpec{Owner: "alice", At: "2099-01-01T00:00", Text: "x"}); err == nil || !strings.Contains(err.Error(), "user scope") {
		t.Fatalf("owner without channel: %v", err)
	}
	list, err := c.Jobs(ctx)
	if err != nil || len(list) != 1 || list[0].Payload != "weekly summary" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := c.RemoveJob(ctx, j.ID+100); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("remove unknown: %v", err)
	}
	if _, err := c.RemoveJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := c.Jobs(ctx); len(list) != 0 {
		t.Fatalf("after rm: %+v", list)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A scheduled task runs tools as its owner, so it runs only while the DM
// policy lets the owner in: a user who is not (or no longer) approved
// gets no turn through a job, and the job says why. A broadcast job is
// refused when it is added.
func TestJobOfUserNotAdmittedDoesNotRun(t *testing.T) {
	cfg := testConfig(t)
	cfg.Security.DMPolicy = "allowlist"
	cfg.Security.AllowFrom = []string{"wecom:bob"}
	n := newFakeNotifier(0)
	clk := clock.NewFake(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Config: cfg, Notifier: n, Channels: builtin.Channels(), Clock: clk}) }()
	n.waitFor(t, "READY=1", 1)
	c := admin.NewClient(cfg.Server.AdminSocket)
	if _, err := c.AddJob(ctx, admin.JobSpec{Owner: "wecom:bob", To: "@all", Cron: "* * * * *", Text: "spam"}); err == nil ||
		!strings.Contains(err.Error(), "many people") {
		t.Fatalf("broadcast job: %v", err)
	}
	at := clk.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	j, err := c.AddJob(ctx, admin.JobSpec{Owner: "wecom:mallory", At: at, Prompt: "write a file"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute) // the job is due
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := c.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got admin.Job
		for _, x := range list {
			if x.ID == j.ID {
				got = x
			}
		}
		if strings.Contains(got.LastError, "no longer) allowed to use the assistant") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %+v", got)
		}
		time.Sleep(20 * time.Millisecond) // polling the job's run, bounded
	}
	sessions, _ := c.Sessions(ctx)
	for _, s := range sessions {
		if strings.Contains(s.Key, "mallory") {
			t.Errorf("a turn ran for mallory: %+v", s)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
