package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"agent/pkg/admin"
	"agent/pkg/clock"
	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/recipient"
	"agent/pkg/scheduler"
	"agent/pkg/tools"
)

// Scheduled jobs (pkg/scheduler): startBrain creates the scheduler and
// registers schedule, list_schedules and remove_schedule; runScheduler
// restores the stored jobs and starts the loop once the channels are up, so
// a job due at start-up finds its channel connected. Messages go out through
// sendOut; an llm_task runs through the conversation pipeline as its owner.

// schedPart is the brain's scheduler.
type schedPart struct {
	s *scheduler.Scheduler
}

// startScheduler creates the scheduler and registers its tools.
func (d *Daemon) startScheduler(b *brain, reg *tools.Registry, cfg *config.Config) error {
	s, err := scheduler.New(scheduler.Config{
		DB:       d.store.DB(),
		Clock:    clock.Func(d.now),
		Location: cfg.Location(),
		Send:     d.sendOut,
		Prompt:   d.schedulePrompt,
		Check:    d.checkJobRecipient,
		Scrub:    d.opts.Scrubber.Scrub, // job errors are redacted like the logs (nil-safe)
		Logger:   d.logger,
	})
	if err != nil {
		return err
	}
	b.sched = &schedPart{s: s}
	for _, t := range s.Tools(d.isOwner) {
		if err := reg.Register(t); err != nil {
			return err
		}
	}
	return nil
}

// runScheduler restores the jobs and starts the loop (after the channels).
func (d *Daemon) runScheduler() {
	if d.brain == nil || d.brain.sched == nil {
		return
	}
	d.enforceJobRecipients(context.Background())
	if err := d.brain.sched.s.Start(context.Background()); err != nil {
		d.logger.Error("scheduled jobs are not running", "err", err)
		d.checker.Register("scheduler", func(context.Context) error { return err })
		return
	}
	d.setComponent("scheduler", "ready")
}

func (p *schedPart) close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.s.Close(ctx)
}

// checkJobRecipient is the scheduler's recipient rule: the job's owner
// (a user scope) addresses to on channel as a caller would.
func (d *Daemon) checkJobRecipient(owner, channel, to string) error {
	ch, user, _ := strings.Cut(owner, ":")
	_, err := d.recipients().Check(recipient.Caller{Channel: ch, User: user}, channel, to)
	return err
}

// enforceJobRecipients disables stored jobs whose owner may not address
// their recipient (made before recipients were checked, or an owner who
// is no longer one) and tells the owners, once.
func (d *Daemon) enforceJobRecipients(ctx context.Context) {
	bad, err := d.brain.sched.s.Enforce(ctx)
	if err != nil {
		d.logger.Error("scheduled jobs: checking recipients failed", "err", err)
		return
	}
	if len(bad) == 0 {
		return
	}
	d.notifyOwners(ctx, scheduler.DisabledNotice(bad))
}

// isOwner reports whether user ("wecom:alice") is one of agent.owners.
func (d *Daemon) isOwner(user string) bool {
	return slices.Contains(d.config().Agent.Owners, user)
}

// scheduledPrefix marks a scheduled prompt in the owner's conversation (and
// keeps a prompt that starts with "/" from being read as a slash command).
const scheduledPrefix = "[scheduled task] "

// schedulePrompt runs an llm_task's prompt as owner through the
// conversation pipeline and returns the replies.
func (d *Daemon) schedulePrompt(ctx context.Context, owner, prompt string) (string, error) {
	if d.brain == nil {
		return "", fmt.Errorf("the conversation pipeline is unavailable: %v", d.brainErr)
	}
	channel, user, ok := strings.Cut(owner, ":")
	if !ok || channel == "" || user == "" {
		return "", fmt.Errorf("owner %q is not a user scope such as wecom:alice", owner)
	}
	// A task runs tools as its owner: only while security.dm_policy still
	// lets the owner in (a revoked user, or one dropped from allow_from,
	// runs no more turns through their jobs).
	if channel != recipient.AdminChannel {
		ok, err := d.pairings().Admitted(ctx, d.dmPolicy(), owner)
		if err != nil {
			return "", fmt.Errorf("checking whether %s may use the assistant: %w", owner, err)
		}
		if !ok {
			return "", fmt.Errorf("%w: %s is not (or no longer) allowed to use the assistant (security.dm_policy, pairing); the task did not run", recipient.ErrRefused, owner)
		}
	}
	var mu sync.Mutex
	var replies []string
	done, err := d.brain.conv.Handle(ctx, conversation.Inbound{Channel: channel, Sender: user, Text: scheduledPrefix + prompt},
		func(_ context.Context, text string) error {
			if text == conversation.RetryingText {
				return nil
			}
			mu.Lock()
			replies = append(replies, text)
			mu.Unlock()
			return nil
		})
	if err != nil {
		return "", err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	return strings.Join(replies, "\n\n"), nil
}

func (d *Daemon) scheduler() (*scheduler.Scheduler, error) {
	if d.brain == nil || d.brain.sched == nil {
		return nil, fmt.Errorf("the scheduler is unavailable: %v", d.brainErr)
	}
	return d.brain.sched.s, nil
}

func adminJob(j scheduler.Job) admin.Job {
	return admin.Job{ID: j.ID, Owner: j.Owner, Channel: j.Channel, To: j.To, Name: j.Name, Kind: j.Kind, Spec: j.Spec,
		TZ: j.TZ, Action: j.Action, Payload: j.Payload, State: j.State, Created: j.Created, Next: j.Next,
		LastRun: j.LastRun, LastStatus: j.LastStatus, LastError: j.LastError, Failures: j.Failures, Runs: j.Runs}
}

// JobsList implements admin.JobsBackend: every user's jobs.
func (d *Daemon) JobsList(ctx context.Context) ([]admin.Job, error) {
	s, err := d.scheduler()
	if err != nil {
		return nil, err
	}
	list, err := s.List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]admin.Job, 0, len(list))
	for _, j := range list {
		out = append(out, adminJob(j))
	}
	return out, nil
}

// JobsAdd implements admin.JobsBackend. The job is delivered to its owner
// unless the spec names a channel and recipient.
func (d *Daemon) JobsAdd(ctx context.Context, spec admin.JobSpec) (admin.Job, error) {
	s, err := d.scheduler()
	if err != nil {
		return admin.Job{}, err
	}
	channel, user, ok := strings.Cut(spec.Owner, ":")
	if !ok || channel == "" || user == "" {
		return admin.Job{}, fmt.Errorf("%w: owner %q: give a user scope such as wecom:alice", admin.ErrInvalidJob, spec.Owner)
	}
	n := scheduler.NewJob{Owner: spec.Owner, Channel: spec.Channel, To: spec.To, Name: spec.Name,
		Cron: spec.Cron, At: spec.At, TZ: spec.TZ, Action: scheduler.ActionMessage, Payload: spec.Text}
	if n.Channel == "" {
		n.Channel = channel
	}
	if n.To == "" {
		n.To = user
	}
	if spec.Prompt != "" {
		if spec.Text != "" {
			return admin.Job{}, fmt.Errorf("%w: give a text or a prompt, not both", admin.ErrInvalidJob)
		}
		n.Action, n.Payload = scheduler.ActionLLMTask, spec.Prompt
	}
	j, err := s.Add(ctx, n)
	if errors.Is(err, scheduler.ErrInvalid) {
		return admin.Job{}, fmt.Errorf("%w: %s", admin.ErrInvalidJob, strings.TrimPrefix(err.Error(), scheduler.ErrInvalid.Error()+": "))
	}
	if err != nil {
		return admin.Job{}, err
	}
	return adminJob(j), nil
}

// JobsRemove implements admin.JobsBackend.
func (d *Daemon) JobsRemove(ctx context.Context, id int64) (admin.Job, error) {
	s, err := d.scheduler()
	if err != nil {
		return admin.Job{}, err
	}
	j, err := s.Remove(ctx, id, "")
	if errors.Is(err, scheduler.ErrNotFound) {
		return admin.Job{}, fmt.Errorf("%w: job #%d", admin.ErrNotFound, id)
	}
	if err != nil {
		return admin.Job{}, err
	}
	return adminJob(j), nil
}

var _ admin.JobsBackend = (*Daemon)(nil)
