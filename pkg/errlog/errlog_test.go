package errlog

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"agent/pkg/logging"
	"agent/pkg/store/storetest"
)

func openDB(t *testing.T) *sql.DB {
	t.Helper()
	return storetest.DB(t)
}

func count(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM error_log").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func TestRecordsWarningsAndErrors(t *testing.T) {
	db := openDB(t)
	r := New(db, Options{Now: func() time.Time { return t0 }, Scrub: func(s string) string { return strings.ReplaceAll(s, "sk-secret", "***") }})
	defer r.Close(context.Background())
	var journal strings.Builder
	log := slog.New(r.Handler(slog.NewTextHandler(&journal, nil)))
	log.Info("turn", "key", "p2p:wecom:alice")
	log.With("component", "conversation").Warn("turn failed", "key", "p2p:wecom:alice",
		"err", errors.New("llm: openai: server error (HTTP 503) key sk-secret"))
	log.With("component", "runner").WithGroup("job").Error("job panicked", "panic", "nil map", "stack", strings.Repeat("x", 10000))
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(journal.String(), "turn failed") || !strings.Contains(journal.String(), "msg=turn ") {
		t.Fatalf("the wrapped handler did not get every record:\n%s", journal.String())
	}
	got, err := Since(context.Background(), db, t0.Add(-time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("kept %d records; want 2 (info is not kept): %+v", len(got), got)
	}
	w := got[0]
	if w.Level != "WARN" || w.Component != "conversation" || w.Attrs["key"] != "p2p:wecom:alice" ||
		!strings.Contains(w.Attrs["err"], "HTTP 503") || strings.Contains(w.Attrs["err"], "sk-secret") || w.Panic() || w.Error() {
		t.Fatalf("warning row: %+v", w)
	}
	p := got[1]
	if !p.Panic() || !p.Error() || p.Component != "runner" || p.Attrs["job.panic"] != "nil map" || len(p.Attrs["job.stack"]) > maxValue+10 {
		t.Fatalf("panic row: level %s component %q panic %v attrs %d bytes of stack", p.Level, p.Component, p.Panic(), len(p.Attrs["job.stack"]))
	}
	byKey, err := ForKey(context.Background(), db, "p2p:wecom:alice", t0.Add(-time.Minute), t0.Add(time.Minute), 10)
	if err != nil || len(byKey) != 1 || byKey[0].Msg != "turn failed" {
		t.Fatalf("ForKey: %+v %v", byKey, err)
	}
}

func TestBoundedRows(t *testing.T) {
	db := openDB(t)
	r := New(db, Options{MaxRows: 10, Burst: 1000, Rate: 1000, Now: func() time.Time { return t0 }})
	defer r.Close(context.Background())
	log := slog.New(r.Handler(slog.DiscardHandler))
	for i := 0; i < 50; i++ {
		log.Error("boom", "i", i)
		if i%7 == 0 {
			r.Flush(context.Background())
		}
	}
	r.Flush(context.Background())
	if n := count(t, db); n > 10 {
		t.Fatalf("%d rows; want at most 10", n)
	}
	got, _ := Since(context.Background(), db, time.Time{}, 100)
	if last := got[len(got)-1]; last.Attrs["i"] != "49" {
		t.Fatalf("the newest row is %+v; want i=49 kept", last)
	}
}

func TestRateLimitKeepsASummary(t *testing.T) {
	db := openDB(t)
	now := t0
	r := New(db, Options{Burst: 5, Rate: 0.001, Now: func() time.Time { return now }})
	defer r.Close(context.Background())
	log := slog.New(r.Handler(slog.DiscardHandler))
	for i := 0; i < 100; i++ {
		log.Error("flood")
	}
	r.Flush(context.Background())
	got, _ := Since(context.Background(), db, time.Time{}, 1000)
	flood, summarised := 0, 0
	for _, e := range got {
		if e.Msg == "flood" {
			flood++
			continue
		}
		var n int
		if _, err := fmt.Sscanf(e.Msg, "%d log records not kept", &n); err != nil {
			t.Fatalf("unexpected row %q", e.Msg)
		}
		summarised += n // the writer may have summed up part of the drops earlier
	}
	if flood != 5 || summarised != 95 || r.Dropped() != 95 {
		t.Fatalf("kept %d floods, summarised %d drops, dropped %d", flood, summarised, r.Dropped())
	}
}

// A writer stuck on a locked database must not hold up the logger.
func TestNeverBlocksTheLogger(t *testing.T) {
	db := openDB(t)
	r := New(db, Options{Queue: 4, Burst: 10000, Rate: 10000})
	defer r.Close(context.Background())
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(context.Background(), nil) // _txlock=immediate: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(r.Handler(slog.DiscardHandler))
	for i := 0; i < 2000; i++ {
		log.Warn("while locked", "i", i)
	}
	if r.Dropped() == 0 {
		t.Fatal("nothing dropped with a 4-record queue and a locked database")
	}
	tx.Rollback()
	conn.Close()
	r.Flush(context.Background())
	r.Flush(context.Background()) // the summary row of drops during the first flush
	got, _ := Since(context.Background(), db, time.Time{}, 10000)
	if len(got) == 0 || !strings.Contains(got[len(got)-1].Msg, "not kept") {
		t.Fatalf("no summary row of the drops: %d rows", len(got))
	}
}

// TestSecretsNeverReachTheFile: a configured secret and a WeCom
// access_token in a logged error are scrubbed before the row is written:
// neither is anywhere in the database file or its WAL, while the scrubbed
// row is (so the bytes read are the ones written).
func TestSecretsNeverReachTheFile(t *testing.T) {
	st := storetest.Open(t)
	path := st.Path()
	const secret, token = "corp-Secret-7f3a9c", "WeComTok3n0123456789"
	sc := &logging.Scrubber{}
	sc.Set([]string{secret})
	r := New(st.DB(), Options{Now: func() time.Time { return t0 }, Scrub: sc.Scrub})
	log := slog.New(r.Handler(slog.DiscardHandler))
	sendErr := &url.Error{Op: "Post", URL: "https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token=" + token, Err: errors.New("EOF")}
	log.Error("send failed with "+secret, "err", fmt.Errorf("wecom: %w", sendErr),
		"body", `{"errcode":0,"access_token":"`+token+`"}`, "corpsecret", "gettoken?corpsecret="+secret)
	unscrubbed := New(st.DB(), Options{Now: func() time.Time { return t0 }}) // the default still removes shapes
	slog.New(unscrubbed.Handler(slog.DiscardHandler)).Warn("retry", "url", "https://x/cgi-bin/gettoken?access_token="+token)
	for _, rec := range []*Recorder{r, unscrubbed} {
		if err := rec.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Since(context.Background(), st.DB(), time.Time{}, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("rows: %+v %v", got, err)
	}
	var raw []byte
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		raw = append(raw, b...)
	}
	for _, leak := range []string{secret, token} {
		if bytes.Contains(raw, []byte(leak)) {
			t.Errorf("%q is in the database files", leak)
		}
	}
	if !bytes.Contains(raw, []byte("access_token=***")) || !bytes.Contains(raw, []byte("send failed with ***")) {
		t.Fatalf("the scrubbed rows are not in the files read; the check proves nothing")
	}
}

// TestOldRowsRescrubbed: rows an older release stored with a secret in
// them are scrubbed when the recorder starts, and after a checkpoint the
// old text is gone from the file (secure_delete).
func TestOldRowsRescrubbed(t *testing.T) {
	st := storetest.Open(t)
	path := st.Path()
	const secret, token = "corp-Secret-7f3a9c", "WeComTok3n0123456789"
	if _, err := st.DB().Exec(`INSERT INTO error_log(at, level, component, msg, attrs) VALUES (1, 'ERROR', 'wecom', ?, ?), (2, 'WARN', 'x', 'clean', '{"n":"1"}')`,
		"send failed with "+secret, `{"err":"Post \"https://x/send?access_token=`+token+`\": EOF"}`); err != nil {
		t.Fatal(err)
	}
	sc := &logging.Scrubber{}
	sc.Set([]string{secret})
	r := New(st.DB(), Options{Scrub: sc.Scrub})
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.Close(context.Background())
	got, err := Since(context.Background(), st.DB(), time.Time{}, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("rows %+v %v", got, err)
	}
	if got[0].Msg != "send failed with ***" || got[0].Attrs["err"] != `Post "https://x/send?access_token=***": EOF` || got[1].Attrs["n"] != "1" {
		t.Fatalf("rows after start: %+v", got)
	}
	if _, err := st.DB().Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(secret)) || bytes.Contains(raw, []byte(token)) {
		t.Fatal("the old text is still in the database file")
	}
}
