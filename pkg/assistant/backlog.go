package assistant

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"agent/pkg/backlog"
	"agent/pkg/clip"
	"agent/pkg/conversation"
	"agent/pkg/pairing"
	"agent/pkg/recipient"
)

// The backlog (pkg/backlog): turns the model service could not answer are
// held and run again, oldest first, when it is back; their answers go out
// through the channels like any message the assistant sends. Start runs
// it; Close stops it before the runner.

type backlogPart struct {
	b      *backlog.Backlog
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (a *Assistant) newBacklog() *backlog.Backlog {
	return backlog.New(backlog.Config{DB: a.d.Store.DB(), Clock: a.clock, Logger: a.logger.With("component", "backlog"),
		Run: func(ctx context.Context, t backlog.Turn) ([]string, backlog.Outcome, error) {
			if err := a.mayReplay(ctx, t); err != nil {
				return nil, backlog.Answered, err // dropped, nothing said
			}
			return a.conv.Replay(ctx, t)
		},
		Deliver: a.deliverHeld})
}

func (p *backlogPart) start(ctx context.Context) {
	ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.b.Run(ctx)
	}()
}

func (p *backlogPart) close() {
	if p == nil || p.cancel == nil {
		return
	}
	p.cancel()
	p.wg.Wait()
}

// Backlog holds the turns the model service could not answer (agentctl
// status counts them).
func (a *Assistant) Backlog() (*backlog.Backlog, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	return a.backlog.b, nil
}

// mayReplay checks again, when a held turn is about to run, what was
// checked when it arrived: its sender (or group) is still admitted by the
// DM policy, and a scheduled task's job still exists.
func (a *Assistant) mayReplay(ctx context.Context, t backlog.Turn) error {
	m := t.Message
	if id, ok := strings.CutPrefix(m.MsgID, "job:"); ok {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return fmt.Errorf("held task of job %q: not a job id", id)
		}
		if _, err := a.sched.s.Get(ctx, n); err != nil {
			return fmt.Errorf("held task of job %d: the job is gone: %w", n, err)
		}
	}
	if m.Channel == recipient.AdminChannel {
		return nil
	}
	policy := a.dmPolicy()
	if (m.ChatType == conversation.Group || m.ChatType == conversation.Thread) && m.ChatID != "" &&
		policy.Mode != pairing.Closed && pairing.Match(policy.AllowFrom, "group:"+m.Channel+":"+m.ChatID) {
		return nil
	}
	ok, err := pairing.New(a.d.Store.DB(), a.clock.Now).Admitted(ctx, policy, m.Channel+":"+m.Sender)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s is no longer admitted by the DM policy", m.Channel+":"+m.Sender)
	}
	return nil
}

// deliverHeld sends a held turn's answer where it belongs (the sender, or
// a scheduled task's recipient), saying what it answers and that it is
// late.
func (a *Assistant) deliverHeld(ctx context.Context, t backlog.Turn, replies []string) error {
	m := t.Message
	channel, to := m.Channel, m.Sender
	if m.ReplyTo != "" {
		channel, to = m.ReplyChannel, m.ReplyTo
	}
	loc := a.config().Location()
	var note string
	if !m.Due.IsZero() {
		note = fmt.Sprintf("(Scheduled for %s; it ran late, at %s, because the model service was unreachable.)",
			m.Due.In(loc).Format("2006-01-02 15:04"), a.clock.Now().In(loc).Format("15:04"))
	} else {
		where := ""
		if m.ChatType == conversation.Group || m.ChatType == conversation.Thread {
			where = " in the group chat"
		}
		note = fmt.Sprintf("(The answer to your message%s of %s, kept while the model service was unreachable: “%s”)",
			where, t.Held.In(loc).Format("01-02 15:04"), clip.Line(m.Text, 80))
	}
	for i, r := range replies {
		if i == 0 {
			r = note + "\n\n" + r
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := a.sendOut(sctx, channel, to, r)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}
