// Package report is the self-check's report: its levels, items and texts,
// and where the last one is kept (the meta table). It links nothing the
// checks inspect, so that a reader of the report (agentctl doctor) needs
// only this; agent/pkg/selfcheck builds reports.
package report

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Level of a finding.
type Level string

// Levels, from good to bad.
const (
	OK   Level = "ok"
	Warn Level = "warn"
	Fail Level = "fail"
)

func (l Level) rank() int {
	switch l {
	case Warn:
		return 1
	case Fail:
		return 2
	}
	return 0
}

// Item is one part of the report.
type Item struct {
	Name   string `json:"name"`
	Level  Level  `json:"level"`
	Detail string `json:"detail"`
}

// Report is one self-check.
type Report struct {
	At    time.Time `json:"at"`
	Since time.Time `json:"since,omitzero"` // the previous check; zero: none
	Items []Item    `json:"items"`
}

// Level is the worst level of the report.
func (r Report) Level() Level {
	worst := OK
	for _, it := range r.Items {
		if it.Level.rank() > worst.rank() {
			worst = it.Level
		}
	}
	return worst
}

// Problems are the items that are not ok.
func (r Report) Problems() []Item {
	var out []Item
	for _, it := range r.Items {
		if it.Level != OK {
			out = append(out, it)
		}
	}
	return out
}

// Text is the report for people: a verdict line, then one line per item
// ("ok|warn|fail  name: detail").
func (r Report) Text() string {
	var b strings.Builder
	p := r.Problems()
	if len(p) == 0 {
		fmt.Fprintf(&b, "Self-check %s: all good.\n", r.At.Format("2006-01-02 15:04"))
	} else {
		fmt.Fprintf(&b, "Self-check %s: %d problem(s).\n", r.At.Format("2006-01-02 15:04"), len(p))
	}
	for _, it := range r.Items {
		fmt.Fprintf(&b, "%-4s  %s: %s\n", it.Level, it.Name, it.Detail)
	}
	return strings.TrimRight(b.String(), "\n")
}

// Summary is the problems only, for a notice to the owners.
func (r Report) Summary() string {
	p := r.Problems()
	if len(p) == 0 {
		return "Self-check: all good."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Self-check found %d problem(s):", len(p))
	for _, it := range p {
		fmt.Fprintf(&b, "\n- %s (%s): %s", it.Name, it.Level, it.Detail)
	}
	return b.String()
}

// metaKey is where the last report is kept.
const metaKey = "selfcheck_report"

// Save keeps r as the last report (meta table).
func Save(ctx context.Context, db *sql.DB, r Report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, metaKey, string(b))
	if err != nil {
		return fmt.Errorf("selfcheck: save report: %w", err)
	}
	return nil
}

// Last reads the last saved report; ok is false when there is none.
func Last(ctx context.Context, db *sql.DB) (r Report, ok bool, err error) {
	var v string
	err = db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, metaKey).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return Report{}, false, nil
	}
	if err != nil {
		return Report{}, false, fmt.Errorf("selfcheck: read last report: %w", err)
	}
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return Report{}, false, fmt.Errorf("selfcheck: last report is unreadable: %w", err)
	}
	return r, true, nil
}
