package pairing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// A user's approval, as one box of a fleet hands it to another with the
// user (pkg/fleet): a paired user moved to another box is not asked to
// pair again. A pending code stays behind (the operator approves codes on
// the box that issued them).

// Portable is a user's approval.
type Portable struct {
	ApprovedAt time.Time `json:"approved_at"`
	ApprovedBy string    `json:"approved_by,omitempty"`
}

// Export returns user's approval, or nil when user is not approved here.
func (s *Store) Export(ctx context.Context, user string) (*Portable, error) {
	var ms int64
	var by string
	err := s.db.QueryRowContext(ctx, `SELECT approved_at, approved_by FROM pairing_users WHERE user = ?`, user).Scan(&ms, &by)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pairing: export %s: %w", user, err)
	}
	return &Portable{ApprovedAt: time.UnixMilli(ms).UTC(), ApprovedBy: by}, nil
}

// Import makes user's approval here what p says: the box the user comes
// from decides (nil: not approved, so an approval left here from an
// earlier stay and revoked since does not come back).
func (s *Store) Import(ctx context.Context, user string, p *Portable) error {
	var err error
	if p == nil {
		_, err = s.db.ExecContext(ctx, `DELETE FROM pairing_users WHERE user = ?`, user)
	} else {
		_, err = s.db.ExecContext(ctx, `INSERT INTO pairing_users(user, approved_at, approved_by) VALUES (?, ?, ?)
			ON CONFLICT(user) DO UPDATE SET approved_at = excluded.approved_at, approved_by = excluded.approved_by`,
			user, p.ApprovedAt.UnixMilli(), p.ApprovedBy)
	}
	if err != nil {
		return fmt.Errorf("pairing: import %s: %w", user, err)
	}
	return nil
}

// Purge removes user's approval (after the user moved to another box);
// it reports whether there was one.
func (s *Store) Purge(ctx context.Context, user string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM pairing_users WHERE user = ?`, user)
	if err != nil {
		return false, fmt.Errorf("pairing: purge %s: %w", user, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
