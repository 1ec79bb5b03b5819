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
	// pkg/memory: long-term facts per memory scope (a user, or a group
	// chat). A fact that was corrected keeps its history: the old row points
	// at its replacement (superseded_by) and deleting the newest deletes the
	// whole chain (forget). memory_fts is an external-content FTS5 index
	// with the trigram tokenizer (substring matches, so Chinese works); the
	// vector index (sqlite-vec, its width set by the embedding model) is
	// created by pkg/memory at run time. sessions.memory_seq is the last
	// message compressed into facts.
	{Name: "memory", SQL: `
CREATE TABLE memory_facts (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	scope         TEXT    NOT NULL,
	fact          TEXT    NOT NULL,
	keywords      TEXT    NOT NULL DEFAULT '',
	persons       TEXT    NOT NULL DEFAULT '',
	topic         TEXT    NOT NULL DEFAULT '',
	time_text     TEXT    NOT NULL DEFAULT '',
	time_at       INTEGER,
	source        TEXT    NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	seen          INTEGER NOT NULL DEFAULT 1,
	superseded_by INTEGER REFERENCES memory_facts(id) ON DELETE CASCADE,
	superseded_at INTEGER,
	embedding     BLOB
) STRICT;
CREATE INDEX memory_facts_current ON memory_facts(scope, updated_at) WHERE superseded_by IS NULL;
CREATE INDEX memory_facts_superseded ON memory_facts(superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX memory_facts_unembedded ON memory_facts(id) WHERE embedding IS NULL AND superseded_by IS NULL;
CREATE VIRTUAL TABLE memory_fts USING fts5(fact, keywords, persons, topic,
	content='memory_facts', content_rowid='id', tokenize='trigram');
CREATE TRIGGER memory_facts_ai AFTER INSERT ON memory_facts BEGIN
	INSERT INTO memory_fts(rowid, fact, keywords, persons, topic) VALUES (new.id, new.fact, new.keywords, new.persons, new.topic);
END;
CREATE TRIGGER memory_facts_ad AFTER DELETE ON memory_facts BEGIN
	INSERT INTO memory_fts(memory_fts, rowid, fact, keywords, persons, topic) VALUES ('delete', old.id, old.fact, old.keywords, old.persons, old.topic);
END;
CREATE TRIGGER memory_facts_au AFTER UPDATE OF fact, keywords, persons, topic ON memory_facts BEGIN
	INSERT INTO memory_fts(memory_fts, rowid, fact, keywords, persons, topic) VALUES ('delete', old.id, old.fact, old.keywords, old.persons, old.topic);
	INSERT INTO memory_fts(rowid, fact, keywords, persons, topic) VALUES (new.id, new.fact, new.keywords, new.persons, new.topic);
END;
ALTER TABLE sessions ADD COLUMN memory_seq INTEGER NOT NULL DEFAULT 0;`},
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
