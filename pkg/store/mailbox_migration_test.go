package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// mailboxStep is the index of the migration that moves wecom_inbox and
// wecom_outbox into inbox and outbox.
func mailboxStep(t *testing.T) int {
	t.Helper()
	i := slices.IndexFunc(migrations, func(m Migration) bool { return m.Name == "mailbox" })
	if i < 0 {
		t.Fatal("no mailbox migration")
	}
	return i
}

// tableRows reads every row of query as column -> value.
func tableRows(t *testing.T, db *sql.DB, query string) []map[string]any {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		m := make(map[string]any, len(cols))
		for i, c := range cols {
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sequence(t *testing.T, db *sql.DB, table string) int64 {
	t.Helper()
	var seq int64
	err := db.QueryRow(`SELECT seq FROM sqlite_sequence WHERE name = ?`, table).Scan(&seq)
	if err == sql.ErrNoRows {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// A database at the schema before the mailbox step, with WeCom inbox and
// outbox rows in every state (in doubt, retrying with persisted backoff,
// stamped for the duplicate check, sent, failed, media), migrates with
// nothing lost: every row, column by column, under channel 'wecom', the
// same ids, and ids never handed out twice.
func TestMailboxMigrationKeepsEveryRow(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	old, err := Open(ctx, path, nil, Options{Migrations: migrations[:mailboxStep(t)]})
	if err != nil {
		t.Fatal(err)
	}
	db := old.DB()
	const ms = int64(1_700_000_000_000)
	for _, r := range []struct {
		key, sender, chat, typ, content, raw string
		state                                int
		done                                 any
	}{
		{"msg:1", "alice", "", "text", "hello", `{"MsgId":"1"}`, 1, ms + 10},
		{"msg:2", "alice", "", "image", "[The user sent a picture.]", `{"MediaId":"IMG"}`, 0, nil},
		{"ev:bob:1700000000:enter_agent", "bob", "", "event", "", `{"Event":"enter_agent"}`, 2, nil},
		{"msg:3", "carol", "chat42", "text", "在群里 😀", `{"MsgId":"3"}`, 2, ms + 30},
		{"msg:4", "dave", "", "text", "pending", `{}`, 0, nil},
		{"msg:5", "erin", "", "text", "deleted later", `{}`, 0, nil},
	} {
		mustExec(t, db.Exec, `INSERT INTO wecom_inbox(dedup_key, sender, chat_id, msg_type, content, raw, received_at, state, done_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.key, r.sender, r.chat, r.typ, r.content, r.raw, ms, r.state, r.done)
	}
	for _, r := range []struct {
		to, typ, content string
		state, attempts  int
		next             int64
		lastErr          string
		sent, first      any
		window           int
	}{
		{"alice", "text", "queued, never tried", 0, 0, 0, "", nil, nil, 0},
		{"alice", "text", "retrying", 0, 3, ms + 8000, "errcode 45009", nil, ms - 5000, 14400},
		{"bob", "text", "sent", 1, 1, 0, "", ms + 100, ms + 50, 14400},
		{"bob", "text", "failed", 2, 1, 0, "errcode 40003: invalid user", nil, ms + 60, 14400},
		{"carol", "text", "in doubt", 3, 0, 0, "", nil, ms + 70, 14400},
		{"carol", "text", "OK", 3, 0, 0, "", nil, ms + 80, 0}, // a legitimate repeat in doubt
		{"dave", "image", `{"kind":"image","media_id":"M1"}`, 0, 1, ms + 2000, "timeout", nil, ms + 90, 3600},
		{"erin", "text", "deleted later", 1, 1, 0, "", ms + 5, ms + 1, 14400},
	} {
		mustExec(t, db.Exec, `INSERT INTO wecom_outbox(to_user, msg_type, content, created_at, state, attempts, next_at, last_error, sent_at, first_try_at, dup_window)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.to, r.typ, r.content, ms, r.state, r.attempts, r.next, r.lastErr, r.sent, r.first, r.window)
	}
	// The newest rows are gone (as if pruned): their ids must not return.
	mustExec(t, db.Exec, `DELETE FROM wecom_inbox WHERE dedup_key = 'msg:5'`)
	mustExec(t, db.Exec, `DELETE FROM wecom_outbox WHERE content = 'deleted later'`)
	wantIn := tableRows(t, db, `SELECT * FROM wecom_inbox ORDER BY id`)
	wantOut := tableRows(t, db, `SELECT * FROM wecom_outbox ORDER BY id`)
	inSeq, outSeq := sequence(t, db, "wecom_inbox"), sequence(t, db, "wecom_outbox")
	if len(wantIn) != 5 || len(wantOut) != 7 || inSeq != 6 || outSeq != 8 {
		t.Fatalf("fixture: %d inbox rows (seq %d), %d outbox rows (seq %d)", len(wantIn), inSeq, len(wantOut), outSeq)
	}
	old.Close()

	s, err := Open(ctx, path, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db = s.DB()
	if v, _ := s.Version(ctx); v != SchemaVersion() {
		t.Fatalf("version %d, want %d", v, SchemaVersion())
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name IN ('wecom_inbox', 'wecom_outbox')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("old tables left: %d (%v)", n, err)
	}
	for _, c := range []struct {
		table string
		want  []map[string]any
	}{{"inbox", wantIn}, {"outbox", wantOut}} {
		got := tableRows(t, db, `SELECT * FROM `+c.table+` ORDER BY id`)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d rows, want %d", c.table, len(got), len(c.want))
		}
		for i, g := range got {
			if g["channel"] != "wecom" {
				t.Errorf("%s row %v: channel %v, want wecom", c.table, g["id"], g["channel"])
			}
			delete(g, "channel")
			if !reflect.DeepEqual(g, c.want[i]) {
				t.Errorf("%s row %d:\n got %v\nwant %v", c.table, i, g, c.want[i])
			}
		}
	}
	if got := sequence(t, db, "inbox"); got != inSeq {
		t.Errorf("inbox sequence %d, want %d", got, inSeq)
	}
	if got := sequence(t, db, "outbox"); got != outSeq {
		t.Errorf("outbox sequence %d, want %d", got, outSeq)
	}
	var id int64
	if err := db.QueryRow(`INSERT INTO outbox(channel, to_user, content, created_at) VALUES ('wecom', 'erin', 'new', 1) RETURNING id`).Scan(&id); err != nil || id != outSeq+1 {
		t.Errorf("next outbox id %d (%v), want %d", id, err, outSeq+1)
	}
	// Dedup keys are unique per channel.
	if _, err := db.Exec(`INSERT INTO inbox(channel, dedup_key, sender, msg_type, received_at) VALUES ('wecom', 'msg:1', 'x', 'text', 1)`); err == nil {
		t.Error("a second wecom row with dedup key msg:1 was stored")
	}
	mustExec(t, db.Exec, `INSERT INTO inbox(channel, dedup_key, sender, msg_type, received_at) VALUES ('voice', 'msg:1', 'x', 'text', 1)`)
	for _, idx := range []string{"inbox_pending", "outbox_pending", "outbox_tried"} {
		if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = ?`, idx).Scan(&n); err != nil || n != 1 {
			t.Errorf("index %s: %d (%v)", idx, n, err)
		}
	}
	if err := s.Check(ctx, true); err != nil {
		t.Fatal(err)
	}
}

// An empty WeCom queue (a channel never used) migrates to empty tables
// whose ids start at 1.
func TestMailboxMigrationEmpty(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	old, err := Open(ctx, path, nil, Options{Migrations: migrations[:mailboxStep(t)]})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	s, err := Open(ctx, path, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var id int64
	if err := s.DB().QueryRow(`INSERT INTO inbox(channel, dedup_key, sender, msg_type, received_at) VALUES ('wecom', 'k', 'x', 'text', 1) RETURNING id`).Scan(&id); err != nil || id != 1 {
		t.Fatalf("first inbox id %d (%v), want 1", id, err)
	}
	if err := s.DB().QueryRow(`INSERT INTO outbox(channel, to_user, content, created_at) VALUES ('wecom', 'x', 'y', 1) RETURNING id`).Scan(&id); err != nil || id != 1 {
		t.Fatalf("first outbox id %d (%v), want 1", id, err)
	}
}
