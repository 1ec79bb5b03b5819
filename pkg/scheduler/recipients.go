package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"agent/pkg/recipient"
)

// StateDisabled is a job whose recipient its owner may not address (any
// more): it does not run; list_schedules shows it with the reason and its
// owner or an owner removes it.
const StateDisabled = "disabled"

// ErrRecipient marks an action refused because the job's owner may not
// address its recipient.
var ErrRecipient = errors.New("recipient not allowed")

// checkRecipient applies Config.Check to a job's owner, channel and
// recipient.
func (s *Scheduler) checkRecipient(owner, channel, to string) error {
	if s.c.Check == nil {
		return nil
	}
	if err := s.c.Check(owner, channel, to); err != nil {
		return fmt.Errorf("%w: %w", ErrRecipient, err)
	}
	return nil
}

// Enforce disables every active job whose owner may not address its
// recipient under Config.Check (an error wrapping recipient.ErrRefused) (jobs made before recipients were checked,
// or whose owner stopped being an owner) and returns them, with LastError
// saying why. Start runs it; the daemon runs it again after a
// configuration reload.
func (s *Scheduler) Enforce(ctx context.Context) ([]Job, error) {
	if s.c.Check == nil {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+jobColumns+` FROM sched_jobs WHERE state IN ('active', 'running') ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("scheduler: check recipients: %w", err)
	}
	var bad []Job
	for rows.Next() {
		j, _, err := scanJob(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("scheduler: check recipients: %w", err)
		}
		// Only a refusal disables a job; a failure to decide (the
		// database) leaves it for the next check.
		if cerr := s.checkRecipient(j.Owner, j.Channel, j.To); cerr != nil && errors.Is(cerr, recipient.ErrRefused) {
			j.LastError = shorten("disabled: "+cerr.Error(), 500)
			bad = append(bad, j)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("scheduler: check recipients: %w", err)
	}
	now := s.clock.Now().UnixMilli()
	for i := range bad {
		j := &bad[i]
		if _, err := s.db.ExecContext(ctx, `UPDATE sched_jobs SET state = ?, due_at = NULL, last_status = 'disabled', last_error = ?, updated_at = ?
			WHERE id = ? AND state IN ('active', 'running')`, StateDisabled, j.LastError, now, j.ID); err != nil {
			return nil, fmt.Errorf("scheduler: disable job %d: %w", j.ID, err)
		}
		j.State, j.LastStatus = StateDisabled, "disabled"
		s.logger.Warn("scheduled job disabled: its owner may not address its recipient", "job", j.ID, "owner", j.Owner,
			"channel", j.Channel, "to", j.To, "reason", j.LastError)
	}
	if len(bad) > 0 {
		s.kick()
	}
	return bad, nil
}

// DisabledNotice is the text owners get about jobs Enforce disabled.
func DisabledNotice(jobs []Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d scheduled job(s) were disabled because their owner may not send to their recipient (for example @all or a list of users):\n", len(jobs))
	for i, j := range jobs {
		if i == 20 {
			fmt.Fprintf(&b, "... and %d more (agentctl jobs list)\n", len(jobs)-i)
			break
		}
		fmt.Fprintf(&b, "#%d of %s to %s:%s: %s\n", j.ID, j.Owner, j.Channel, j.To, shorten(j.Payload, 80))
	}
	b.WriteString("Remove them (agentctl jobs rm ID), or have an owner schedule them again.")
	return b.String()
}
