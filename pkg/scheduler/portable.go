package scheduler

import (
	"context"
	"database/sql"
	"fmt"
)

// A user's scheduled jobs, as one box of a fleet hands them to another
// with the user (pkg/fleet): a reminder keeps firing after its owner
// moved. A job's run history (sched_runs) stays behind.

// PortableJob is a job without its id: its row as it stands.
type PortableJob struct {
	Channel    string `json:"channel"`
	To         string `json:"to"`
	Name       string `json:"name,omitempty"`
	Kind       string `json:"kind"`
	Spec       string `json:"spec"`
	TZ         string `json:"tz"`
	Action     string `json:"action"`
	Payload    string `json:"payload"`
	State      string `json:"state"`
	Created    int64  `json:"created"` // Unix ms, as the row keeps times
	Updated    int64  `json:"updated"`
	Slot       *int64 `json:"slot,omitempty"`
	Due        *int64 `json:"due,omitempty"`
	LastRun    *int64 `json:"last_run,omitempty"`
	LastStatus string `json:"last_status,omitempty"`
	LastError  string `json:"last_error,omitempty"`
	Failures   int    `json:"failures,omitempty"`
	Runs       int    `json:"runs,omitempty"`
}

const portableColumns = `channel, recipient, name, kind, spec, tz, action, payload, state, created_at, updated_at,
	slot_at, due_at, last_run_at, last_status, last_error, failures, runs`

// Export returns owner's jobs, oldest first. A job whose run is in flight
// is exported held and due again at that run's slot (the caller waits for
// runs to end first: Running).
func (s *Scheduler) Export(ctx context.Context, owner string) ([]PortableJob, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+portableColumns+` FROM sched_jobs WHERE owner = ? ORDER BY id`, owner)
	if err != nil {
		return nil, fmt.Errorf("scheduler: export %s: %w", owner, err)
	}
	defer rows.Close()
	var out []PortableJob
	for rows.Next() {
		var j PortableJob
		var slot, due, last sql.NullInt64
		if err := rows.Scan(&j.Channel, &j.To, &j.Name, &j.Kind, &j.Spec, &j.TZ, &j.Action, &j.Payload, &j.State, &j.Created, &j.Updated,
			&slot, &due, &last, &j.LastStatus, &j.LastError, &j.Failures, &j.Runs); err != nil {
			return nil, fmt.Errorf("scheduler: export %s: %w", owner, err)
		}
		if j.State == StateRunning {
			j.State, due = StateMoving, slot
		}
		j.Slot, j.Due, j.LastRun = ptr(slot), ptr(due), ptr(last)
		out = append(out, j)
	}
	return out, rows.Err()
}

func ptr(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}

// StateMoving is a job held while its owner moves to another box: it
// does not fire until Release (on the box the owner stays on, or moved
// to), so a slot that comes during the move fires once, on one box.
const StateMoving = "moving"

// Hold holds owner's active jobs (StateMoving) and returns how many.
func (s *Scheduler) Hold(ctx context.Context, owner string) (int, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE sched_jobs SET state = ? WHERE owner = ? AND state = ?`, StateMoving, owner, StateActive)
	if err != nil {
		return 0, fmt.Errorf("scheduler: hold %s: %w", owner, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Release lets owner's held jobs fire again (a slot that passed while
// they were held follows the scheduler's rules for late slots) and
// returns how many.
func (s *Scheduler) Release(ctx context.Context, owner string) (int, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE sched_jobs SET state = ? WHERE owner = ? AND state = ?`, StateActive, owner, StateMoving)
	if err != nil {
		return 0, fmt.Errorf("scheduler: release %s: %w", owner, err)
	}
	n, _ := res.RowsAffected()
	if n > 0 {
		s.kick()
	}
	return int(n), nil
}

// HeldOwners are the owners with held jobs.
func (s *Scheduler) HeldOwners(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT owner FROM sched_jobs WHERE state = ?`, StateMoving)
	if err != nil {
		return nil, fmt.Errorf("scheduler: held jobs: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// Running is how many runs of owner's jobs are in flight.
func (s *Scheduler) Running(ctx context.Context, owner string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sched_runs r JOIN sched_jobs j ON j.id = r.job_id
		WHERE j.owner = ? AND r.status = 'running'`, owner).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("scheduler: runs of %s: %w", owner, err)
	}
	return n, nil
}

// Import adds owner's jobs from another box and returns how many were
// new: a job already here (same kind, spec, payload and creation time) is
// not added twice, so an import tried again adds nothing. Jobs come held
// as they were exported (Hold before Export): they fire once released.
func (s *Scheduler) Import(ctx context.Context, owner string, jobs []PortableJob) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("scheduler: import %s: %w", owner, err)
	}
	defer tx.Rollback()
	n := 0
	for _, j := range jobs {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM sched_jobs WHERE owner = ? AND kind = ? AND spec = ? AND payload = ? AND created_at = ?`,
			owner, j.Kind, j.Spec, j.Payload, j.Created).Scan(&one)
		if err == nil {
			continue
		}
		if err != sql.ErrNoRows {
			return 0, fmt.Errorf("scheduler: import %s: %w", owner, err)
		}
		if j.State == StateRunning || j.State == StateActive {
			j.State = StateMoving // released when the move commits
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sched_jobs(owner, `+portableColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			owner, j.Channel, j.To, j.Name, j.Kind, j.Spec, j.TZ, j.Action, j.Payload, j.State, j.Created, j.Updated,
			j.Slot, j.Due, j.LastRun, j.LastStatus, j.LastError, j.Failures, j.Runs); err != nil {
			return 0, fmt.Errorf("scheduler: import %s: %w", owner, err)
		}
		n++
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("scheduler: import %s: %w", owner, err)
	}
	return n, nil
}

// Purge deletes owner's jobs (after the owner moved to another box) and
// returns how many there were. A run in flight finishes.
func (s *Scheduler) Purge(ctx context.Context, owner string) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM sched_jobs WHERE owner = ?`, owner)
	if err != nil {
		return 0, fmt.Errorf("scheduler: purge %s: %w", owner, err)
	}
	n, _ := res.RowsAffected()
	s.kick()
	return int(n), nil
}
