package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"agent/pkg/recipient"
	"agent/pkg/tools"
)

// checkWith is Config.Check on a recipient.Policy whose only owner is
// wecom:boss.
func checkWith(broadcast bool) func(owner, channel, to string) error {
	p := recipient.Policy{IsOwner: func(u string) bool { return u == "wecom:boss" }, OwnerBroadcast: func() bool { return broadcast }}
	return func(owner, channel, to string) error {
		ch, user, _ := strings.Cut(owner, ":")
		_, err := p.Check(recipient.Caller{Channel: ch, User: user}, channel, to)
		return err
	}
}

// The attack: a user schedules a broadcast to @all every minute.
func TestScheduleRefusesBroadcastAndOthers(t *testing.T) {
	h := newHarness(t, t0, func(c *Config) { c.Check = checkWith(false) })
	ctx := context.Background()
	for _, to := range []string{"@all", "ceo|cfo|hr", "bob", "tag:2"} {
		_, err := h.s.Add(ctx, NewJob{Owner: "wecom:alice", Channel: "wecom", To: to, Cron: "* * * * *", Payload: "spam"})
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrRecipient) {
			t.Errorf("alice to %s: %v; want ErrInvalid + ErrRecipient", to, err)
		}
	}
	if _, err := h.s.Add(ctx, NewJob{Owner: "wecom:boss", Channel: "wecom", To: "@all", Cron: "* * * * *", Payload: "x"}); !errors.Is(err, ErrRecipient) {
		t.Errorf("owner to @all without owner_broadcast: %v", err)
	}
	h.add(NewJob{Cron: "0 9 * * *", Payload: "mine"}) // alice to herself
	if _, err := h.s.Add(ctx, NewJob{Owner: "wecom:boss", Channel: "wecom", To: "bob", Cron: "0 9 * * *", Payload: "x"}); err != nil {
		t.Errorf("owner to one user: %v", err)
	}
	// Through the tool, as the model would call it.
	reg := toolRegistry(t, h.s, func(u string) bool { return u == "wecom:boss" })
	_, err := reg.Run(ctx, ToolSchedule, toolCall(`{"cron":"* * * * *","text":"hi all","to":"@all"}`, "wecom", "alice"))
	if err == nil || !strings.Contains(err.Error(), "many people") {
		t.Errorf("schedule tool to @all: %v", err)
	}
}

// Jobs stored before recipients were checked are disabled on start, the
// owners get one notice, and a disabled job never sends.
func TestExistingViolatingJobsDisabled(t *testing.T) {
	h := newHarness(t, t0, nil) // no check: as before the upgrade
	spam := h.add(NewJob{To: "@all", Cron: "* * * * *", Payload: "spam"})
	list := h.add(NewJob{To: "ceo|cfo", Cron: "0 9 * * *", Payload: "list"})
	mine := h.add(NewJob{Cron: "0 9 * * *", Payload: "mine"})
	h.cfg.Check = checkWith(false)
	h.restart()
	bad, err := h.s.Enforce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 2 || bad[0].ID != spam.ID || bad[1].ID != list.ID {
		t.Fatalf("disabled %+v; want #%d and #%d", bad, spam.ID, list.ID)
	}
	for _, id := range []int64{spam.ID, list.ID} {
		j := h.job(id)
		if j.State != StateDisabled || !strings.Contains(j.LastError, "many people") {
			t.Errorf("job %d: state %s, error %q", id, j.State, j.LastError)
		}
	}
	if j := h.job(mine.ID); j.State != StateActive {
		t.Errorf("alice's own job: %s", j.State)
	}
	notice := DisabledNotice(bad)
	if !strings.Contains(notice, fmt.Sprintf("#%d", spam.ID)) || !strings.Contains(notice, "@all") {
		t.Errorf("notice: %s", notice)
	}
	if again, _ := h.s.Enforce(context.Background()); len(again) != 0 {
		t.Errorf("second Enforce disabled %d again", len(again))
	}
	h.clock.Set(t0.Add(2 * time.Hour))
	h.step()
	for _, m := range h.out.all() {
		if m.To != "alice" {
			t.Errorf("sent to %s: %q", m.To, m.Text)
		}
	}
}

// A job whose owner stops being allowed (config changed) is refused at
// run time even before Enforce runs.
func TestActionChecksRecipient(t *testing.T) {
	owner := true
	h := newHarness(t, t0, func(c *Config) {
		c.Check = func(o, ch, to string) error {
			if to != "alice" && !owner {
				return errors.New("not allowed")
			}
			return nil
		}
	})
	j := h.add(NewJob{To: "bob", At: "2025-03-03T09:00", Payload: "hi bob"})
	owner = false
	h.clock.Set(t0.Add(time.Minute))
	h.step()
	if n := len(h.out.all()); n != 0 {
		t.Fatalf("sent %d", n)
	}
	if got := h.job(j.ID); !strings.Contains(got.LastError, "recipient not allowed") {
		t.Fatalf("job: %+v", got)
	}
}

func toolRegistry(t *testing.T, s *Scheduler, isOwner func(string) bool) *tools.Registry {
	t.Helper()
	reg := tools.NewRegistry()
	for _, tl := range s.Tools(isOwner) {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func toolCall(args, channel, user string) tools.Call {
	return tools.Call{Args: json.RawMessage(args), User: user, Channel: channel, Profile: channel, Session: "p2p:" + channel + ":" + user}
}
