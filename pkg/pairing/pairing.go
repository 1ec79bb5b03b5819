// Package pairing decides who may talk to the agent in a direct message
// (security.dm_policy and security.allow_from) and keeps the users an
// operator admitted with a pairing code. Users are "channel:id" principals,
// e.g. "wecom:zhangsan"; group chats are "group:channel:chatid".
package pairing

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Policies (config.DM*).
const (
	Pairing   = "pairing"
	Allowlist = "allowlist"
	Open      = "open"
	Closed    = "closed"
)

// Policy is the [security] configuration plus the owners.
type Policy struct {
	Mode      string   // pairing (default), allowlist, open, closed
	AllowFrom []string // "channel:id", "group:channel:chatid" or "*"
	Owners    []string // always admitted except under closed
}

// Verdict is what to do with a message.
type Verdict int

const (
	// Deny: drop the message silently (logged).
	Deny Verdict = iota
	// Allow: answer it.
	Allow
	// NewCode: a stranger under the pairing policy; tell them Code once.
	NewCode
	// Waiting: a stranger who already has a code; stay silent.
	Waiting
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case NewCode:
		return "new_code"
	case Waiting:
		return "waiting"
	}
	return "deny"
}

// ErrNotFound is returned for an unknown code or user.
var ErrNotFound = errors.New("pairing: not found")

// Entry is an approved user or a pending code.
type Entry struct {
	User     string
	Code     string // pending only
	Approved bool
	Since    time.Time
	By       string // approved only: who approved
}

// Store keeps pairings in the daemon's database (tables pairing_users and
// pairing_codes). Safe for concurrent use.
type Store struct {
	db  *sql.DB
	now func() time.Time
}

// New returns a Store on db; now is time.Now when nil.
func New(db *sql.DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now}
}

// Execer is *sql.DB or *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Match reports whether principal is admitted by list ("*" or an exact,
// case-sensitive entry).
func Match(list []string, principal string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, principal)
}

// Decide applies p to user ("channel:id"). For a group chat pass group
// ("group:channel:chatid"): a group needs an allow_from entry (or "*")
// under every policy but open. Under pairing a stranger gets a new code,
// created in q (so the caller can commit it with the code's message),
// exactly once.
func (s *Store) Decide(ctx context.Context, q Execer, p Policy, user, group string) (Verdict, string, error) {
	mode := p.Mode
	if mode == "" {
		mode = Pairing
	}
	switch mode {
	case Closed:
		return Deny, "", nil
	case Open:
		return Allow, "", nil
	}
	if group != "" {
		if Match(p.AllowFrom, group) {
			return Allow, "", nil
		}
		return Deny, "", nil
	}
	if Match(p.AllowFrom, user) || slices.Contains(p.Owners, user) {
		return Allow, "", nil
	}
	if mode == Allowlist {
		return Deny, "", nil
	}
	if q == nil {
		q = s.db
	}
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM pairing_users WHERE user = ?`, user).Scan(&one)
	if err == nil {
		return Allow, "", nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Deny, "", fmt.Errorf("pairing: look up %s: %w", user, err)
	}
	var code string
	err = q.QueryRowContext(ctx, `SELECT code FROM pairing_codes WHERE user = ?`, user).Scan(&code)
	if err == nil {
		return Waiting, code, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Deny, "", fmt.Errorf("pairing: look up code of %s: %w", user, err)
	}
	for range 5 { // a collision among 32^8 codes is rare; retry a few
		code = NewCode8()
		res, err := q.ExecContext(ctx, `INSERT INTO pairing_codes(code, user, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			code, user, s.now().UnixMilli())
		if err != nil {
			return Deny, "", fmt.Errorf("pairing: store code for %s: %w", user, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return NewCode, code, nil
		}
	}
	return Deny, "", fmt.Errorf("pairing: no free code for %s", user)
}

// Admitted reports whether p admits user ("channel:id") as it stands:
// like Decide for a direct message, but a stranger is only refused (no
// code is created).
func (s *Store) Admitted(ctx context.Context, p Policy, user string) (bool, error) {
	switch p.Mode {
	case Closed:
		return false, nil
	case Open:
		return true, nil
	}
	if Match(p.AllowFrom, user) || slices.Contains(p.Owners, user) {
		return true, nil
	}
	if p.Mode == Allowlist {
		return false, nil
	}
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM pairing_users WHERE user = ?`, user).Scan(&one)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	}
	return false, fmt.Errorf("pairing: look up %s: %w", user, err)
}

// codeAlphabet has no 0/O or 1/I/L, so a code read aloud survives.
const codeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// NewCode8 returns a random 8-character pairing code.
func NewCode8() string {
	b := make([]byte, 8)
	rand.Read(b) // never fails (crypto/rand)
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b)
}

// CodeText is what a stranger reads, once.
func CodeText(code string) string {
	return fmt.Sprintf("Hi! I only talk to people my operator has approved. Your pairing code is %s — send it to the operator (agentctl pair approve %s).", code, code)
}

// ApprovedText is what a user reads when approved.
const ApprovedText = "You have been approved; you can talk to me now."

// Approve admits the user holding code. by names the approver.
func (s *Store) Approve(ctx context.Context, code, by string) (Entry, error) {
	code = strings.ToUpper(strings.TrimSpace(code))
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Entry{}, fmt.Errorf("pairing: approve: %w", err)
	}
	defer tx.Rollback()
	var user string
	if err := tx.QueryRowContext(ctx, `SELECT user FROM pairing_codes WHERE code = ?`, code).Scan(&user); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Entry{}, fmt.Errorf("%w: no pending code %q", ErrNotFound, code)
		}
		return Entry{}, fmt.Errorf("pairing: approve: %w", err)
	}
	now := s.now()
	if _, err := tx.ExecContext(ctx, `DELETE FROM pairing_codes WHERE code = ?`, code); err != nil {
		return Entry{}, fmt.Errorf("pairing: approve: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO pairing_users(user, approved_at, approved_by) VALUES (?, ?, ?)
		ON CONFLICT(user) DO UPDATE SET approved_at = excluded.approved_at, approved_by = excluded.approved_by`,
		user, now.UnixMilli(), by); err != nil {
		return Entry{}, fmt.Errorf("pairing: approve: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Entry{}, fmt.Errorf("pairing: approve: %w", err)
	}
	return Entry{User: user, Approved: true, Since: now, By: by}, nil
}

// Revoke removes an approved user, or a pending code, of user.
func (s *Store) Revoke(ctx context.Context, user string) (Entry, error) {
	user = strings.TrimSpace(user)
	a, err := s.db.ExecContext(ctx, `DELETE FROM pairing_users WHERE user = ?`, user)
	if err != nil {
		return Entry{}, fmt.Errorf("pairing: revoke: %w", err)
	}
	p, err := s.db.ExecContext(ctx, `DELETE FROM pairing_codes WHERE user = ?`, user)
	if err != nil {
		return Entry{}, fmt.Errorf("pairing: revoke: %w", err)
	}
	na, _ := a.RowsAffected()
	np, _ := p.RowsAffected()
	if na+np == 0 {
		return Entry{}, fmt.Errorf("%w: %q is neither approved nor pending", ErrNotFound, user)
	}
	return Entry{User: user, Approved: na > 0, Since: s.now()}, nil
}

// List returns approved users, then pending codes, oldest first.
func (s *Store) List(ctx context.Context) ([]Entry, error) {
	rows, err := s.db.QueryContext(ctx, `
		SELECT user, '', 1, approved_at, approved_by FROM pairing_users
		UNION ALL
		SELECT user, code, 0, created_at, '' FROM pairing_codes
		ORDER BY 3 DESC, 4`)
	if err != nil {
		return nil, fmt.Errorf("pairing: list: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var ms int64
		if err := rows.Scan(&e.User, &e.Code, &e.Approved, &ms, &e.By); err != nil {
			return nil, fmt.Errorf("pairing: list: %w", err)
		}
		e.Since = time.UnixMilli(ms)
		out = append(out, e)
	}
	return out, rows.Err()
}
