package assistant

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/pairing"
	"agent/pkg/recipient"
	"agent/pkg/scheduler"
)

// Scheduled jobs (pkg/scheduler): New creates the scheduler and registers
// schedule, list_schedules and remove_schedule; Start restores the stored
// jobs and starts the loop once the host's channels are up. Messages go out
// through Deps.Send; an llm_task runs through the conversation pipeline as
// its owner.

// schedPart is the assistant's scheduler.
type schedPart struct {
	s *scheduler.Scheduler
}

// startScheduler creates the scheduler and registers its tools.
func (a *Assistant) startScheduler(cfg *config.Config) error {
	s, err := scheduler.New(scheduler.Config{
		DB:       a.d.Store.DB(),
		Clock:    a.clock,
		Location: cfg.Location(),
		Send:     a.sendOut,
		Prompt:   a.schedulePrompt,
		Check:    a.checkJobRecipient,
		Scrub:    a.d.Scrubber.Scrub, // job errors are redacted like the logs (nil-safe)
		Logger:   a.logger,
	})
	if err != nil {
		return err
	}
	a.sched = &schedPart{s: s}
	return a.Register(s.Tools(a.IsOwner)...)
}

func (p *schedPart) close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.s.Close(ctx)
}

// checkJobRecipient is the scheduler's recipient rule: the job's owner
// (a user scope) addresses to on channel as a caller would.
func (a *Assistant) checkJobRecipient(owner, channel, to string) error {
	ch, user, _ := strings.Cut(owner, ":")
	_, err := a.Recipients().Check(recipient.Caller{Channel: ch, User: user}, channel, to)
	return err
}

// enforceJobRecipients disables stored jobs whose owner may not address
// their recipient (made before recipients were checked, or an owner who
// is no longer one) and tells the owners, once.
func (a *Assistant) enforceJobRecipients(ctx context.Context) {
	bad, err := a.sched.s.Enforce(ctx)
	if err != nil {
		a.logger.Error("scheduled jobs: checking recipients failed", "err", err)
		return
	}
	if len(bad) == 0 {
		return
	}
	a.NotifyOwners(ctx, scheduler.DisabledNotice(bad))
}

// scheduledPrefix marks a scheduled prompt in the owner's conversation (and
// keeps a prompt that starts with "/" from being read as a slash command).
const scheduledPrefix = "[scheduled task] "

// schedulePrompt runs an llm_task's prompt as its owner through the
// conversation pipeline and returns the replies. When the model service
// is unreachable the task is held (pkg/backlog) and reported deferred:
// its answer goes to the task's recipient, late and saying so, once the
// service is back.
func (a *Assistant) schedulePrompt(ctx context.Context, t scheduler.Task) (string, error) {
	if err := a.unavailable(); err != nil {
		return "", err
	}
	owner, prompt := t.Owner, t.Prompt
	channel, user, ok := strings.Cut(owner, ":")
	if !ok || channel == "" || user == "" {
		return "", fmt.Errorf("owner %q is not a user scope such as wecom:alice", owner)
	}
	// A task runs tools as its owner: only while security.dm_policy still
	// lets the owner in (a revoked user, or one dropped from allow_from,
	// runs no more turns through their jobs).
	if channel != recipient.AdminChannel {
		ok, err := pairing.New(a.d.Store.DB(), a.clock.Now).Admitted(ctx, a.dmPolicy(), owner)
		if err != nil {
			return "", fmt.Errorf("checking whether %s may use the assistant: %w", owner, err)
		}
		if !ok {
			return "", fmt.Errorf("%w: %s is not (or no longer) allowed to use the assistant (security.dm_policy, pairing); the task did not run", recipient.ErrRefused, owner)
		}
	}
	var held atomic.Bool
	in := conversation.Inbound{Channel: channel, Sender: user, Text: scheduledPrefix + prompt,
		ReplyChannel: t.Channel, ReplyTo: t.To, Due: t.Due, OnHeld: func() { held.Store(true) },
		MsgID: fmt.Sprintf("job:%d", t.Job)} // one late run per job, however many fell due
	in.Fast = a.d.Fast != nil && a.d.Fast(channel) // as the owner's own turns on that channel
	replies, err := a.Ask(ctx, in)
	if held.Load() {
		return "", scheduler.ErrDeferred
	}
	if err != nil {
		return "", err
	}
	kept := replies[:0]
	for _, r := range replies {
		if r != conversation.RetryingText {
			kept = append(kept, r)
		}
	}
	return strings.Join(kept, "\n\n"), nil
}

// dmPolicy is the DM policy in force (it follows reloads).
func (a *Assistant) dmPolicy() pairing.Policy {
	cfg := a.config()
	return pairing.Policy{Mode: cfg.Security.DMPolicy, AllowFrom: cfg.Security.AllowFrom, Owners: cfg.Agent.Owners}
}

// Scheduler is the job scheduler, for the admin API.
func (a *Assistant) Scheduler() (*scheduler.Scheduler, error) {
	if err := a.unavailable(); err != nil {
		return nil, fmt.Errorf("the scheduler is unavailable: %v", a.err)
	}
	return a.sched.s, nil
}
