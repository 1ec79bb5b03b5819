package adminsrv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"agent/pkg/admin"
	"agent/pkg/scheduler"
)

// agentctl jobs: every user's scheduled jobs (pkg/scheduler).

func adminJob(j scheduler.Job) admin.Job {
	return admin.Job{ID: j.ID, Owner: j.Owner, Channel: j.Channel, To: j.To, Name: j.Name, Kind: j.Kind, Spec: j.Spec,
		TZ: j.TZ, Action: j.Action, Payload: j.Payload, State: j.State, Created: j.Created, Next: j.Next,
		LastRun: j.LastRun, LastStatus: j.LastStatus, LastError: j.LastError, Failures: j.Failures, Runs: j.Runs}
}

// JobsList implements admin.JobsBackend: every user's jobs.
func (b *Backend) JobsList(ctx context.Context) ([]admin.Job, error) {
	s, err := b.Assistant.Scheduler()
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
func (b *Backend) JobsAdd(ctx context.Context, spec admin.JobSpec) (admin.Job, error) {
	s, err := b.Assistant.Scheduler()
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
func (b *Backend) JobsRemove(ctx context.Context, id int64) (admin.Job, error) {
	s, err := b.Assistant.Scheduler()
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
