package store

import (
	"context"
	"fmt"
)

// Migration is one schema step. The schema version is the number of
// migrations applied, kept in PRAGMA user_version; steps are append-only.
type Migration struct {
	Name string
	SQL  string
}

// migrations is the ordered schema history. Never edit or reorder a step
// that has shipped; append a new one.
var migrations = []Migration{
	{Name: "meta", SQL: `
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;
INSERT INTO meta(key, value) VALUES ('created_at', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));`},
	// pkg/session: conversations per routing key and their messages. Times
	// are Unix milliseconds; at most one open session per key.
	{Name: "sessions", SQL: `
CREATE TABLE sessions (
	id            INTEGER PRIMARY KEY,
	key           TEXT    NOT NULL,
	created_at    INTEGER NOT NULL,
	last_at       INTEGER NOT NULL,
	closed_at     INTEGER,
	message_count INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE UNIQUE INDEX sessions_open_key ON sessions(key) WHERE closed_at IS NULL;
CREATE INDEX sessions_key ON sessions(key, id);
CREATE TABLE session_messages (
	session_id        INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	seq               INTEGER NOT NULL,
	role              TEXT    NOT NULL,
	content           TEXT    NOT NULL DEFAULT '',
	parts             TEXT,
	name              TEXT    NOT NULL DEFAULT '',
	tool_calls        TEXT,
	tool_call_id      TEXT    NOT NULL DEFAULT '',
	reasoning_content TEXT    NOT NULL DEFAULT '',
	created_at        INTEGER NOT NULL,
	PRIMARY KEY (session_id, seq)
) STRICT, WITHOUT ROWID;`},
}

// SchemaVersion is the version this binary writes.
func SchemaVersion() int { return len(migrations) }

// Version reports the database's schema version.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

func (s *Store) migrate(ctx context.Context, migs []Migration) error {
	cur, err := s.Version(ctx)
	if err != nil {
		return s.classify("read schema version", err)
	}
	if cur > len(migs) {
		return fmt.Errorf("store: %s: %w (database v%d, binary v%d): upgrade agent or restore a backup",
			s.path, ErrTooNew, cur, len(migs))
	}
	for i := cur; i < len(migs); i++ {
		m := migs[i]
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return s.classify("begin migration", err)
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migration %d (%s): %w", i+1, m.Name, err)
		}
		// PRAGMA cannot take a bound parameter; i+1 is our own integer.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migration %d (%s): set version: %w", i+1, m.Name, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("store: migration %d (%s): commit: %w", i+1, m.Name, err)
		}
		s.logger.Info("database migrated", "version", i+1, "step", m.Name)
	}
	return nil
}
