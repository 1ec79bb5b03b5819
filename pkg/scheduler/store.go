package scheduler

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"agent/pkg/logging"
)

const jobColumns = `id, owner, channel, recipient, name, kind, spec, tz, action, payload, state,
	created_at, due_at, last_run_at, last_status, last_error, failures, runs, slot_at`

type scanner interface{ Scan(...any) error }

// scanJob reads jobColumns; it also returns slot_at.
func scanJob(r scanner) (Job, sql.NullInt64, error) {
	var j Job
	var created int64
	var due, lastRun, slot sql.NullInt64
	err := r.Scan(&j.ID, &j.Owner, &j.Channel, &j.To, &j.Name, &j.Kind, &j.Spec, &j.TZ, &j.Action, &j.Payload, &j.State,
		&created, &due, &lastRun, &j.LastStatus, &j.LastError, &j.Failures, &j.Runs, &slot)
	if err != nil {
		return j, slot, err
	}
	j.Created = time.UnixMilli(created).UTC()
	if due.Valid {
		j.Next = time.UnixMilli(due.Int64).UTC()
	}
	if lastRun.Valid {
		j.LastRun = time.UnixMilli(lastRun.Int64).UTC()
	}
	return j, slot, nil
}

// Add validates and stores a job and returns it with its first fire time.
func (s *Scheduler) Add(ctx context.Context, n NewJob) (Job, error) {
	now := s.clock.Now()
	n.Channel = strings.TrimSpace(n.Channel)
	n.To = strings.TrimSpace(n.To)
	if n.Action == "" {
		n.Action = ActionMessage
	}
	switch {
	case strings.TrimSpace(n.Owner) == "":
		return Job{}, fmt.Errorf("%w: the job has no owner", ErrInvalid)
	case strings.TrimSpace(n.Owner) != n.Owner:
		// The owner is whom the job's prompt runs as: never a name made
		// into another one ("boss\u00a0" trimmed would be the owner boss).
		return Job{}, fmt.Errorf("%w: owner %q has spaces around it", ErrInvalid, n.Owner)
	case n.Channel == "" || n.To == "":
		return Job{}, fmt.Errorf("%w: the job needs a channel and a recipient", ErrInvalid)
	case n.Action != ActionMessage && n.Action != ActionLLMTask:
		return Job{}, fmt.Errorf("%w: action %q: use message or llm_task", ErrInvalid, n.Action)
	case strings.TrimSpace(n.Payload) == "":
		if n.Action == ActionLLMTask {
			return Job{}, fmt.Errorf("%w: the prompt is empty", ErrInvalid)
		}
		return Job{}, fmt.Errorf("%w: the text to send is empty", ErrInvalid)
	case len(n.Payload) > maxPayload:
		return Job{}, fmt.Errorf("%w: the text is %d bytes; at most %d", ErrInvalid, len(n.Payload), maxPayload)
	case (n.Cron == "") == (n.At == ""):
		return Job{}, fmt.Errorf("%w: give either a cron expression (recurring) or an at time (once), not both or neither", ErrInvalid)
	}
	if err := s.checkRecipient(n.Owner, n.Channel, n.To); err != nil {
		return Job{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	loc, err := LoadZone(n.TZ, s.c.Location)
	if err != nil {
		return Job{}, err
	}
	j := Job{Owner: n.Owner, Channel: n.Channel, To: n.To, Name: strings.TrimSpace(n.Name), TZ: loc.String(),
		Action: n.Action, Payload: n.Payload, State: StateActive, Created: now.UTC()}
	var first time.Time
	if n.Cron != "" {
		sched, err := ParseCron(n.Cron, loc, now)
		if err != nil {
			return Job{}, err
		}
		j.Kind, j.Spec = KindCron, strings.Join(strings.Fields(n.Cron), " ")
		first = sched.Next(now.In(loc))
	} else {
		t, err := ParseAt(n.At, loc, now)
		if err != nil {
			return Job{}, err
		}
		j.Kind, j.Spec = KindAt, t.UTC().Format(time.RFC3339)
		first = t
	}
	j.Next = first.UTC()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Job{}, fmt.Errorf("scheduler: add job: %w", err)
	}
	defer tx.Rollback()
	var count int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sched_jobs WHERE owner = ? AND state IN ('active', 'running')`, j.Owner).Scan(&count); err != nil {
		return Job{}, fmt.Errorf("scheduler: add job: %w", err)
	}
	if count >= s.c.MaxPerOwner {
		return Job{}, fmt.Errorf("%w: %s already has %d scheduled jobs, the limit; remove some first (list_schedules, remove_schedule)", ErrInvalid, j.Owner, count)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO sched_jobs(owner, channel, recipient, name, kind, spec, tz, action, payload,
		state, created_at, updated_at, slot_at, due_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		j.Owner, j.Channel, j.To, j.Name, j.Kind, j.Spec, j.TZ, j.Action, j.Payload,
		StateActive, now.UnixMilli(), now.UnixMilli(), first.UnixMilli(), first.UnixMilli())
	if err != nil {
		return Job{}, fmt.Errorf("scheduler: add job: %w", err)
	}
	if j.ID, err = res.LastInsertId(); err != nil {
		return Job{}, fmt.Errorf("scheduler: add job: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Job{}, fmt.Errorf("scheduler: add job: %w", err)
	}
	s.kick()
	return j, nil
}

// List returns the jobs of owner ("" = everyone's), newest first.
func (s *Scheduler) List(ctx context.Context, owner string) ([]Job, error) {
	q := `SELECT ` + jobColumns + ` FROM sched_jobs`
	var args []any
	if owner != "" {
		q += ` WHERE owner = ?`
		args = append(args, owner)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("scheduler: list jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, _, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("scheduler: list jobs: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// Get returns job id.
func (s *Scheduler) Get(ctx context.Context, id int64) (Job, error) {
	j, _, err := scanJob(s.db.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM sched_jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("%w #%d", ErrNotFound, id)
	}
	if err != nil {
		return Job{}, fmt.Errorf("scheduler: get job %d: %w", id, err)
	}
	return j, nil
}

// Remove deletes job id when owner is "" or owns it. A job whose action is
// in flight finishes that run.
func (s *Scheduler) Remove(ctx context.Context, id int64, owner string) (Job, error) {
	j, err := s.Get(ctx, id)
	if err != nil {
		return Job{}, err
	}
	if owner != "" && j.Owner != owner {
		return Job{}, fmt.Errorf("%w #%d among your jobs", ErrNotFound, id)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sched_jobs WHERE id = ?`, id); err != nil {
		return Job{}, fmt.Errorf("scheduler: remove job %d: %w", id, err)
	}
	s.kick()
	return j, nil
}

// nextDue is the earliest due time of an active job (zero: none).
func (s *Scheduler) nextDue(ctx context.Context) (time.Time, error) {
	var due sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT min(due_at) FROM sched_jobs WHERE state = 'active'`).Scan(&due)
	if err != nil || !due.Valid {
		return time.Time{}, err
	}
	return time.UnixMilli(due.Int64), nil
}

// claimSQL claims a slot: a new slot, or one whose earlier attempt failed
// (a one-shot's retry). No row changes when the slot ran, is running, or
// was missed.
const claimSQL = `INSERT INTO sched_runs(job_id, slot, started_at, status) VALUES (?, ?, ?, 'running')
	ON CONFLICT(job_id, slot) DO UPDATE SET status = 'running', attempts = attempts + 1, started_at = excluded.started_at, error = ''
	WHERE sched_runs.status = 'failed' RETURNING attempts`

// claim moves every due job on, in one transaction: it claims the slots
// to run now, marks late one-shots missed and skips late or overlapping
// recurring slots. more reports that the batch was full.
func (s *Scheduler) claim(ctx context.Context, now time.Time) (fires []fire, notices []notice, more bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, false, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT `+jobColumns+` FROM sched_jobs WHERE state = 'active' AND due_at <= ? ORDER BY due_at LIMIT ?`,
		now.UnixMilli(), claimBatch)
	if err != nil {
		return nil, nil, false, err
	}
	type due struct {
		j    Job
		slot int64
	}
	var list []due
	for rows.Next() {
		j, slot, err := scanJob(rows)
		if err != nil {
			rows.Close()
			return nil, nil, false, err
		}
		list = append(list, due{j, slot.Int64})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, false, err
	}
	more = len(list) == claimBatch
	nowMs := now.UnixMilli()
	grace := s.c.Grace.Milliseconds()
	s.mu.Lock()
	running := make(map[int64]bool, len(s.running))
	for id := range s.running {
		running[id] = true
	}
	s.mu.Unlock()
	claimStmt, err := tx.PrepareContext(ctx, claimSQL)
	if err != nil {
		return nil, nil, false, err
	}
	defer claimStmt.Close()
	runStmt, err := tx.PrepareContext(ctx, `UPDATE sched_jobs SET state = 'running', due_at = NULL, updated_at = ? WHERE id = ?`)
	if err != nil {
		return nil, nil, false, err
	}
	defer runStmt.Close()
	for _, d := range list {
		j := d.j
		late := nowMs - j.Next.UnixMilli()
		if j.Kind == KindAt {
			if late > grace {
				if _, err := tx.ExecContext(ctx, `INSERT INTO sched_runs(job_id, slot, started_at, finished_at, status) VALUES (?,?,?,?, 'missed')
					ON CONFLICT(job_id, slot) DO UPDATE SET status = 'missed', finished_at = excluded.finished_at WHERE sched_runs.status = 'failed'`,
					j.ID, d.slot, nowMs, nowMs); err != nil {
					return nil, nil, false, err
				}
				if _, err := tx.ExecContext(ctx, `UPDATE sched_jobs SET state = 'missed', due_at = NULL, last_status = 'missed', updated_at = ? WHERE id = ?`,
					nowMs, j.ID); err != nil {
					return nil, nil, false, err
				}
				notices = append(notices, notice{j, missedText(j, time.Duration(late)*time.Millisecond)})
				continue
			}
			var attempts int
			err := claimStmt.QueryRowContext(ctx, j.ID, d.slot, nowMs).Scan(&attempts)
			if errors.Is(err, sql.ErrNoRows) {
				// Claimed before (a crash between claim and record): never twice.
				if _, err := tx.ExecContext(ctx, `UPDATE sched_jobs SET state = 'done', due_at = NULL, updated_at = ?,
					last_status = CASE WHEN last_status = '' THEN 'interrupted' ELSE last_status END WHERE id = ?`, nowMs, j.ID); err != nil {
					return nil, nil, false, err
				}
				continue
			}
			if err != nil {
				return nil, nil, false, err
			}
			if _, err := runStmt.ExecContext(ctx, nowMs, j.ID); err != nil {
				return nil, nil, false, err
			}
			fires = append(fires, fire{job: j, slot: d.slot, attempt: attempts})
			continue
		}
		// Recurring: plan the next slot first.
		loc, lerr := time.LoadLocation(j.TZ)
		if lerr != nil {
			loc = s.c.Location
		}
		from := now
		if d.slot > nowMs {
			from = time.UnixMilli(d.slot)
		}
		next, perr := nextCron(j.Spec, loc, from)
		status := ""
		if perr != nil || next.IsZero() {
			if _, err := tx.ExecContext(ctx, `UPDATE sched_jobs SET state = 'failed', due_at = NULL, slot_at = NULL, updated_at = ?,
				last_status = 'failed', last_error = ? WHERE id = ?`, nowMs, fmt.Sprintf("the cron expression no longer yields a time: %v", perr), j.ID); err != nil {
				return nil, nil, false, err
			}
			continue
		}
		claimed := false
		switch {
		case running[j.ID]:
			status = "skipped" // the previous run is still going
		case nowMs-d.slot > grace:
			status = "missed"
		default:
			var attempts int
			err := claimStmt.QueryRowContext(ctx, j.ID, d.slot, nowMs).Scan(&attempts)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, nil, false, err
			}
			claimed = err == nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sched_jobs SET slot_at = ?, due_at = ?, updated_at = ?,
			last_status = CASE WHEN ? = '' THEN last_status ELSE ? END WHERE id = ?`,
			next.UnixMilli(), next.UnixMilli(), nowMs, status, status, j.ID); err != nil {
			return nil, nil, false, err
		}
		if claimed {
			fires = append(fires, fire{job: j, slot: d.slot, attempt: 1})
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, false, err
	}
	return fires, notices, more, nil
}

func missedText(j Job, late time.Duration) string {
	loc, err := time.LoadLocation(j.TZ)
	if err != nil {
		loc = time.UTC
	}
	at := j.Spec
	if t, err := time.Parse(time.RFC3339, j.Spec); err == nil {
		at = t.In(loc).Format("2006-01-02 15:04 MST")
	}
	return fmt.Sprintf("Scheduled job #%d (%s) was due at %s but the assistant was not running (%s late), so it was not done: %s",
		j.ID, j.Action, at, late.Round(time.Minute), shorten(j.Payload, 200))
}

// scrub is Config.Scrub: an action's error may quote a URL with a token or
// a key (an llm_task's tool, a channel's transport error).
func (s *Scheduler) scrub(v string) string {
	if s.c.Scrub == nil {
		return logging.ScrubPatterns(v)
	}
	return s.c.Scrub(v)
}

// rescrub passes the error texts already stored through scrub: texts an
// older release wrote, or written before a secret was configured, lose it
// too (secure_delete overwrites the old text in the file).
func (s *Scheduler) rescrub(ctx context.Context, tx *sql.Tx) error {
	for _, q := range []struct{ sel, upd string }{
		{`SELECT id, 0, last_error FROM sched_jobs WHERE last_error <> ''`, `UPDATE sched_jobs SET last_error = ? WHERE id = ? AND ? = 0`},
		{`SELECT job_id, slot, error FROM sched_runs WHERE error <> ''`, `UPDATE sched_runs SET error = ? WHERE job_id = ? AND slot = ?`},
	} {
		type fix struct {
			a, b int64
			text string
		}
		var fixes []fix
		rows, err := tx.QueryContext(ctx, q.sel)
		if err != nil {
			return err
		}
		for rows.Next() {
			var f fix
			if err := rows.Scan(&f.a, &f.b, &f.text); err != nil {
				rows.Close()
				return err
			}
			if clean := s.scrub(f.text); clean != f.text {
				f.text = clean
				fixes = append(fixes, f)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, f := range fixes {
			if _, err := tx.ExecContext(ctx, q.upd, f.text, f.a, f.b); err != nil {
				return err
			}
		}
	}
	return nil
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// finish records finished actions and plans retries.
func (s *Scheduler) finish(ctx context.Context, batch []result) ([]notice, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var notices []notice
	for _, r := range batch {
		at := r.at.UnixMilli()
		if r.err == nil || errors.Is(r.err, ErrDeferred) {
			// A deferred run is done as far as the scheduler goes: the
			// backlog delivers its answer when the model service is back.
			status := "ok"
			if r.err != nil {
				status = "deferred"
			}
			if _, err := tx.ExecContext(ctx, `UPDATE sched_runs SET status = ?, finished_at = ? WHERE job_id = ? AND slot = ?`, status, at, r.job.ID, r.slot); err != nil {
				return nil, err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE sched_jobs SET last_run_at = ?, last_status = ?, last_error = '', failures = 0,
				runs = runs + 1, updated_at = ?, state = CASE kind WHEN 'at' THEN 'done' ELSE state END WHERE id = ?`, at, status, at, r.job.ID); err != nil {
				return nil, err
			}
			continue
		}
		// Scrubbed before it is cut, so no secret is left half-matched.
		msg := shorten(s.scrub(r.err.Error()), 500)
		if _, err := tx.ExecContext(ctx, `UPDATE sched_runs SET status = 'failed', finished_at = ?, error = ? WHERE job_id = ? AND slot = ?`,
			at, msg, r.job.ID, r.slot); err != nil {
			return nil, err
		}
		var failures int
		var slotAt sql.NullInt64
		err := tx.QueryRowContext(ctx, `UPDATE sched_jobs SET last_run_at = ?, last_status = 'failed', last_error = ?, failures = failures + 1,
			runs = runs + 1, updated_at = ? WHERE id = ? RETURNING failures, slot_at`, at, msg, at, r.job.ID).Scan(&failures, &slotAt)
		if errors.Is(err, sql.ErrNoRows) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		wait := backoff(failures)
		if r.job.Kind == KindAt {
			if r.attempt >= s.c.MaxAttempts {
				if _, err := tx.ExecContext(ctx, `UPDATE sched_jobs SET state = 'failed', due_at = NULL WHERE id = ?`, r.job.ID); err != nil {
					return nil, err
				}
				notices = append(notices, notice{r.job, fmt.Sprintf("Scheduled job #%d failed %d times and was given up: %s (last error: %s)",
					r.job.ID, r.attempt, shorten(r.job.Payload, 200), msg)})
				continue
			}
			// Same slot, later: claimSQL re-claims a failed slot.
			if _, err := tx.ExecContext(ctx, `UPDATE sched_jobs SET state = 'active', due_at = ? WHERE id = ?`,
				r.at.Add(wait).UnixMilli(), r.job.ID); err != nil {
				return nil, err
			}
			continue
		}
		// Recurring: the next slot at least the back-off away.
		loc, lerr := time.LoadLocation(r.job.TZ)
		if lerr != nil {
			loc = s.c.Location
		}
		next, perr := nextCron(r.job.Spec, loc, r.at.Add(wait))
		if perr != nil || next.IsZero() || !slotAt.Valid || next.UnixMilli() <= slotAt.Int64 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sched_jobs SET slot_at = ?, due_at = ? WHERE id = ? AND state = 'active'`,
			next.UnixMilli(), next.UnixMilli(), r.job.ID); err != nil {
			return nil, err
		}
	}
	return notices, tx.Commit()
}

// recover is Start's pass over what a previous process left: runs in
// flight at a crash are marked interrupted (and not repeated), and
// recurring jobs whose slots passed resume at their next future slot.
// One-shots are left to the loop, which applies the grace period.
func (s *Scheduler) recover(ctx context.Context, now time.Time) error {
	nowMs := now.UnixMilli()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("scheduler: restore jobs: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE sched_runs SET status = 'interrupted', finished_at = ?,
		error = 'the daemon stopped while this ran' WHERE status = 'running'`, nowMs); err != nil {
		return fmt.Errorf("scheduler: restore jobs: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sched_jobs SET state = 'done', last_status = 'interrupted', updated_at = ?,
		last_error = 'the daemon stopped while this ran; not repeated (it may or may not have been delivered)'
		WHERE state = 'running'`, nowMs); err != nil {
		return fmt.Errorf("scheduler: restore jobs: %w", err)
	}
	if err := s.rescrub(ctx, tx); err != nil {
		return fmt.Errorf("scheduler: restore jobs: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("scheduler: restore jobs: %w", err)
	}
	if err := s.replan(ctx, now, true); err != nil {
		return fmt.Errorf("scheduler: restore jobs: %w", err)
	}
	s.mu.Lock()
	s.lastNow = nowMs
	s.mu.Unlock()
	return nil
}

// replan moves recurring jobs to their next slot after now. pastOnly
// (start-up) touches only jobs whose slot passed, marking them missed;
// otherwise (the clock went backwards) every job whose next slot after now
// comes sooner than the planned one.
func (s *Scheduler) replan(ctx context.Context, now time.Time, pastOnly bool) error {
	nowMs := now.UnixMilli()
	q := `SELECT id, spec, tz, slot_at FROM sched_jobs WHERE state = 'active' AND kind = 'cron'`
	if pastOnly {
		q += ` AND due_at <= ?`
	} else {
		q += ` AND due_at > ?`
	}
	rows, err := s.db.QueryContext(ctx, q, nowMs)
	if err != nil {
		return err
	}
	type plan struct {
		id   int64
		next int64
	}
	var plans []plan
	for rows.Next() {
		var id int64
		var spec, tz string
		var slot sql.NullInt64
		if err := rows.Scan(&id, &spec, &tz, &slot); err != nil {
			rows.Close()
			return err
		}
		loc, err := time.LoadLocation(tz)
		if err != nil {
			loc = s.c.Location
		}
		next, err := nextCron(spec, loc, now)
		if err != nil || next.IsZero() {
			continue // the loop marks it failed
		}
		if pastOnly || !slot.Valid || next.UnixMilli() < slot.Int64 {
			plans = append(plans, plan{id, next.UnixMilli()})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(plans) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	status := ""
	if pastOnly {
		status = "missed"
	}
	for _, p := range plans {
		if _, err := tx.ExecContext(ctx, `UPDATE sched_jobs SET slot_at = ?, due_at = ?, updated_at = ?,
			last_status = CASE WHEN ? = '' THEN last_status ELSE ? END WHERE id = ?`,
			p.next, p.next, nowMs, status, status, p.id); err != nil {
			return err
		}
	}
	if len(plans) > 0 {
		s.logger.Info("recurring jobs re-planned", "jobs", len(plans), "missed_slots_skipped", pastOnly)
	}
	return tx.Commit()
}

// prune drops finished one-shots after a week and run records after 30 days.
func (s *Scheduler) prune(ctx context.Context, now time.Time) {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sched_jobs WHERE state IN ('done', 'missed', 'failed') AND updated_at < ?`,
		now.Add(-keepFinished).UnixMilli()); err != nil && ctx.Err() == nil {
		s.logger.Warn("prune finished jobs", "err", err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sched_runs WHERE status != 'running' AND started_at < ?`,
		now.Add(-keepRuns).UnixMilli()); err != nil && ctx.Err() == nil {
		s.logger.Warn("prune job runs", "err", err)
	}
}
