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
	// whole chain (forget). Two external-content FTS5 indexes: memory_words
	// (unicode61 words, for alphabetic scripts) carries each fact's scope
	// tag (one token per scope) so a search reads only its scope's postings;
	// memory_fts (trigram) matches Chinese, Japanese and Korean text, which
	// has no spaces, as substrings. The vector index (sqlite-vec, its width
	// set by the embedding model) is created by pkg/memory at run time.
	// sessions.memory_seq is the last message compressed into facts.
	{Name: "memory", SQL: `
CREATE TABLE memory_facts (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	scope         TEXT    NOT NULL,
	tag           TEXT    NOT NULL,
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
CREATE VIRTUAL TABLE memory_words USING fts5(tag, fact, keywords, persons, topic,
	content='memory_facts', content_rowid='id', tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE memory_words_vocab USING fts5vocab(memory_words, row);
CREATE TRIGGER memory_facts_ai AFTER INSERT ON memory_facts BEGIN
	INSERT INTO memory_fts(rowid, fact, keywords, persons, topic) VALUES (new.id, new.fact, new.keywords, new.persons, new.topic);
	INSERT INTO memory_words(rowid, tag, fact, keywords, persons, topic) VALUES (new.id, new.tag, new.fact, new.keywords, new.persons, new.topic);
END;
CREATE TRIGGER memory_facts_ad AFTER DELETE ON memory_facts BEGIN
	INSERT INTO memory_fts(memory_fts, rowid, fact, keywords, persons, topic) VALUES ('delete', old.id, old.fact, old.keywords, old.persons, old.topic);
	INSERT INTO memory_words(memory_words, rowid, tag, fact, keywords, persons, topic) VALUES ('delete', old.id, old.tag, old.fact, old.keywords, old.persons, old.topic);
END;
CREATE TRIGGER memory_facts_au AFTER UPDATE OF tag, fact, keywords, persons, topic ON memory_facts BEGIN
	INSERT INTO memory_fts(memory_fts, rowid, fact, keywords, persons, topic) VALUES ('delete', old.id, old.fact, old.keywords, old.persons, old.topic);
	INSERT INTO memory_fts(rowid, fact, keywords, persons, topic) VALUES (new.id, new.fact, new.keywords, new.persons, new.topic);
	INSERT INTO memory_words(memory_words, rowid, tag, fact, keywords, persons, topic) VALUES ('delete', old.id, old.tag, old.fact, old.keywords, old.persons, old.topic);
	INSERT INTO memory_words(rowid, tag, fact, keywords, persons, topic) VALUES (new.id, new.tag, new.fact, new.keywords, new.persons, new.topic);
END;
ALTER TABLE sessions ADD COLUMN memory_seq INTEGER NOT NULL DEFAULT 0;`},
	// pkg/channel/wecom and pkg/pairing: the WeCom inbox (a callback is
	// acknowledged only once its row is here; dedup_key is the MsgId, or
	// sender+time+event for events; state 0 pending, 1 done, 2 ignored),
	// the outbox (replies in order per recipient; state 0 pending, 1 sent,
	// 2 failed, 3 being sent), and DM pairing (approved users, pending
	// codes). Times are Unix milliseconds.
	{Name: "wecom", SQL: `
CREATE TABLE wecom_inbox (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	dedup_key   TEXT    NOT NULL UNIQUE,
	sender      TEXT    NOT NULL,
	chat_id     TEXT    NOT NULL DEFAULT '',
	msg_type    TEXT    NOT NULL,
	content     TEXT    NOT NULL DEFAULT '',
	raw         TEXT    NOT NULL DEFAULT '',
	received_at INTEGER NOT NULL,
	state       INTEGER NOT NULL DEFAULT 0,
	done_at     INTEGER
) STRICT;
CREATE INDEX wecom_inbox_pending ON wecom_inbox(id) WHERE state = 0;
CREATE TABLE wecom_outbox (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	to_user    TEXT    NOT NULL,
	msg_type   TEXT    NOT NULL DEFAULT 'text',
	content    TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	state      INTEGER NOT NULL DEFAULT 0,
	attempts   INTEGER NOT NULL DEFAULT 0,
	next_at    INTEGER NOT NULL DEFAULT 0,
	last_error TEXT    NOT NULL DEFAULT '',
	sent_at    INTEGER
) STRICT;
CREATE INDEX wecom_outbox_pending ON wecom_outbox(to_user, id) WHERE state IN (0, 3);
CREATE TABLE pairing_users (
	user        TEXT    PRIMARY KEY,
	approved_at INTEGER NOT NULL,
	approved_by TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE TABLE pairing_codes (
	code       TEXT    PRIMARY KEY,
	user       TEXT    NOT NULL UNIQUE,
	created_at INTEGER NOT NULL
) STRICT;`},
	// pkg/scheduler: cron and one-shot jobs (times in Unix milliseconds;
	// slot_at is the scheduled time of the next run, due_at when it is
	// attempted: later than slot_at while a one-shot backs off). A run is
	// claimed in sched_runs before its action starts, so a slot never runs
	// twice, also across a crash. error_log keeps the daemon's recent
	// warnings and errors (bounded) for self_check.
	{Name: "scheduler", SQL: `
CREATE TABLE sched_jobs (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	owner       TEXT    NOT NULL,
	channel     TEXT    NOT NULL,
	recipient   TEXT    NOT NULL,
	name        TEXT    NOT NULL DEFAULT '',
	kind        TEXT    NOT NULL,
	spec        TEXT    NOT NULL,
	tz          TEXT    NOT NULL,
	action      TEXT    NOT NULL,
	payload     TEXT    NOT NULL,
	state       TEXT    NOT NULL DEFAULT 'active',
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	slot_at     INTEGER,
	due_at      INTEGER,
	last_run_at INTEGER,
	last_status TEXT    NOT NULL DEFAULT '',
	last_error  TEXT    NOT NULL DEFAULT '',
	failures    INTEGER NOT NULL DEFAULT 0,
	runs        INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX sched_jobs_owner ON sched_jobs(owner, state);
CREATE INDEX sched_jobs_due ON sched_jobs(due_at) WHERE state = 'active';
CREATE TABLE sched_runs (
	job_id      INTEGER NOT NULL REFERENCES sched_jobs(id) ON DELETE CASCADE,
	slot        INTEGER NOT NULL,
	started_at  INTEGER NOT NULL,
	finished_at INTEGER,
	status      TEXT    NOT NULL,
	attempts    INTEGER NOT NULL DEFAULT 1,
	error       TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (job_id, slot)
) STRICT, WITHOUT ROWID;
CREATE INDEX sched_runs_started ON sched_runs(started_at);
CREATE TABLE error_log (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	at        INTEGER NOT NULL,
	level     TEXT    NOT NULL,
	component TEXT    NOT NULL DEFAULT '',
	msg       TEXT    NOT NULL,
	attrs     TEXT    NOT NULL DEFAULT ''
) STRICT;`},
	// pkg/channel/wecom: exactly-once sends. first_try_at is when a row's
	// first send attempt began (NULL before), dup_window the WeCom
	// duplicate_check_interval in seconds every attempt of the row carries
	// (0: sent without the check).
	{Name: "wecom_outbox_dedup", SQL: `
ALTER TABLE wecom_outbox ADD COLUMN first_try_at INTEGER;
ALTER TABLE wecom_outbox ADD COLUMN dup_window INTEGER NOT NULL DEFAULT 0;
CREATE INDEX wecom_outbox_tried ON wecom_outbox(to_user, first_try_at) WHERE first_try_at IS NOT NULL;`},
	// pkg/channel/mailbox: the inbox and outbox of every channel, keyed by
	// channel, with the columns (and meaning) of wecom_inbox and
	// wecom_outbox; dedup keys are unique per channel. Every WeCom row is
	// copied as it is (same id, state, attempts, times, duplicate-check
	// stamp) with channel 'wecom', the AUTOINCREMENT counters are carried
	// over (an id is never handed out twice), and the old tables are
	// dropped: one transaction, like every step.
	{Name: "mailbox", SQL: `
CREATE TABLE inbox (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	channel     TEXT    NOT NULL,
	dedup_key   TEXT    NOT NULL,
	sender      TEXT    NOT NULL,
	chat_id     TEXT    NOT NULL DEFAULT '',
	msg_type    TEXT    NOT NULL,
	content     TEXT    NOT NULL DEFAULT '',
	raw         TEXT    NOT NULL DEFAULT '',
	received_at INTEGER NOT NULL,
	state       INTEGER NOT NULL DEFAULT 0,
	done_at     INTEGER,
	UNIQUE (channel, dedup_key)
) STRICT;
CREATE INDEX inbox_pending ON inbox(channel, id) WHERE state = 0;
CREATE TABLE outbox (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	channel      TEXT    NOT NULL,
	to_user      TEXT    NOT NULL,
	msg_type     TEXT    NOT NULL DEFAULT 'text',
	content      TEXT    NOT NULL,
	created_at   INTEGER NOT NULL,
	state        INTEGER NOT NULL DEFAULT 0,
	attempts     INTEGER NOT NULL DEFAULT 0,
	next_at      INTEGER NOT NULL DEFAULT 0,
	last_error   TEXT    NOT NULL DEFAULT '',
	sent_at      INTEGER,
	first_try_at INTEGER,
	dup_window   INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX outbox_pending ON outbox(channel, to_user, id) WHERE state IN (0, 3);
CREATE INDEX outbox_tried ON outbox(channel, to_user, first_try_at) WHERE first_try_at IS NOT NULL;
INSERT INTO inbox(id, channel, dedup_key, sender, chat_id, msg_type, content, raw, received_at, state, done_at)
	SELECT id, 'wecom', dedup_key, sender, chat_id, msg_type, content, raw, received_at, state, done_at
	FROM wecom_inbox ORDER BY id;
INSERT INTO outbox(id, channel, to_user, msg_type, content, created_at, state, attempts, next_at, last_error, sent_at, first_try_at, dup_window)
	SELECT id, 'wecom', to_user, msg_type, content, created_at, state, attempts, next_at, last_error, sent_at, first_try_at, dup_window
	FROM wecom_outbox ORDER BY id;
DELETE FROM sqlite_sequence WHERE name IN ('inbox', 'outbox');
INSERT INTO sqlite_sequence(name, seq) VALUES
	('inbox', max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'wecom_inbox'), 0), coalesce((SELECT max(id) FROM inbox), 0))),
	('outbox', max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'wecom_outbox'), 0), coalesce((SELECT max(id) FROM outbox), 0)));
DROP TABLE wecom_inbox;
DROP TABLE wecom_outbox;`},
	// Whether an id is a group chat a channel has had messages from (the
	// WeCom AI Bot routes sends to its groups by it) without a scan.
	{Name: "inbox_chat", SQL: `CREATE INDEX inbox_chat ON inbox(channel, chat_id);`},
	// pkg/backlog: turns the model service could not answer, run again
	// (oldest first) once it is back. state: 0 held, 1 answered,
	// 2 cancelled (/new), 3 dropped (failed for another reason).
	{Name: "held_turns", SQL: `
CREATE TABLE held_turns (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	key        TEXT    NOT NULL,
	message    TEXT    NOT NULL,
	session_id INTEGER NOT NULL DEFAULT 0,
	msg_id     TEXT    NOT NULL DEFAULT '',
	told       INTEGER NOT NULL DEFAULT 0,
	held_at    INTEGER NOT NULL,
	state      INTEGER NOT NULL DEFAULT 0,
	tries      INTEGER NOT NULL DEFAULT 0,
	done_at    INTEGER
) STRICT;
CREATE INDEX held_turns_waiting ON held_turns(state, key, id);
CREATE INDEX held_turns_msg ON held_turns(key, msg_id) WHERE msg_id != '';`},
	// pkg/egress: outbound traffic per hour, purpose and destination, and
	// the values [privacy] redact kept from the model per hour and kind.
	{Name: "egress", SQL: `
CREATE TABLE egress_hours (
	hour      INTEGER NOT NULL,
	purpose   TEXT    NOT NULL,
	host      TEXT    NOT NULL,
	conns     INTEGER NOT NULL DEFAULT 0,
	refused   INTEGER NOT NULL DEFAULT 0,
	bytes_out INTEGER NOT NULL DEFAULT 0,
	bytes_in  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (hour, purpose, host)
) STRICT, WITHOUT ROWID;
CREATE TABLE egress_redactions (
	hour INTEGER NOT NULL,
	kind TEXT    NOT NULL,
	n    INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (hour, kind)
) STRICT, WITHOUT ROWID;`},
	// pkg/cmdcache: voice and hardware commands answered without the
	// model, per channel, sender, device and profile.
	{Name: "command_cache", SQL: `
CREATE TABLE command_cache (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	channel     TEXT    NOT NULL,
	sender      TEXT    NOT NULL,
	device      TEXT    NOT NULL DEFAULT '',
	profile     TEXT    NOT NULL,
	tool_set    TEXT    NOT NULL,
	utterance   TEXT    NOT NULL,
	vec         BLOB    NOT NULL,
	tool        TEXT    NOT NULL,
	args        TEXT    NOT NULL,
	result      TEXT    NOT NULL,
	reply       TEXT    NOT NULL,
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	hits        INTEGER NOT NULL DEFAULT 0,
	last_hit_at INTEGER
) STRICT;
CREATE INDEX command_cache_device ON command_cache(channel, sender, device, profile, id);`},
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
