package store

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sqlitevec "github.com/asg017/sqlite-vec-go-bindings/cgo"
)

func openTemp(t *testing.T, opts Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(context.Background(), path, nil, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestOpenVerifiesExtensionsAndMigrates(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ctx := context.Background()
	if v, err := s.VecVersion(ctx); err != nil || !strings.HasPrefix(v, "v0.") {
		t.Fatalf("VecVersion = %q, %v; want v0.x", v, err)
	}
	if v, err := s.Version(ctx); err != nil || v != SchemaVersion() {
		t.Fatalf("Version = %d, %v; want %d", v, err, SchemaVersion())
	}
	var mode string
	if err := s.DB().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	if err := s.Check(ctx, true); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func TestTrigramFTSAndVectorKNN(t *testing.T) {
	s, _ := openTemp(t, Options{})
	db := s.DB()
	mustExec(t, db.Exec, `CREATE VIRTUAL TABLE notes USING fts5(body, tokenize='trigram')`)
	for _, b := range []string{"明天下午三点开会", "buy milk tomorrow", "会议纪要已发送"} {
		mustExec(t, db.Exec, `INSERT INTO notes(body) VALUES (?)`, b)
	}
	var got string
	if err := db.QueryRow(`SELECT body FROM notes WHERE notes MATCH ?`, `"下午三点"`).Scan(&got); err != nil || got != "明天下午三点开会" {
		t.Fatalf("trigram match = %q, %v", got, err)
	}

	mustExec(t, db.Exec, `CREATE VIRTUAL TABLE vecs USING vec0(user TEXT partition key, embedding float[3] distance_metric=cosine)`)
	rows := []struct {
		user string
		v    string
	}{{"a", "[1,0,0]"}, {"a", "[0,1,0]"}, {"b", "[1,0,0]"}}
	for _, r := range rows {
		mustExec(t, db.Exec, `INSERT INTO vecs(user, embedding) VALUES (?, ?)`, r.user, r.v)
	}
	var rowid int64
	var dist float64
	err := db.QueryRow(`SELECT rowid, distance FROM vecs WHERE embedding MATCH ? AND k = 1 AND user = 'a'`, "[0.9,0.1,0]").Scan(&rowid, &dist)
	if err != nil || rowid != 1 {
		t.Fatalf("KNN = rowid %d (dist %v), %v; want 1", rowid, dist, err)
	}
}

func mustExec(t *testing.T, exec func(string, ...any) (sql.Result, error), q string, args ...any) {
	t.Helper()
	if _, err := exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func TestReopenIsIdempotent(t *testing.T) {
	s, path := openTemp(t, Options{})
	s.Close()
	s2, err := Open(context.Background(), path, nil, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	if v, _ := s2.Version(context.Background()); v != SchemaVersion() {
		t.Fatalf("version after reopen = %d", v)
	}
}

func TestCorruptFileIsReportedNotRecreated(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][]byte{
		"garbage":   []byte("this is not a database at all, just some text that is long enough"),
		"short":     []byte("SQLite"),
		"bad-pages": append([]byte("SQLite format 3\x00"), make([]byte, 200)...),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(context.Background(), path, nil, Options{})
			if err == nil {
				t.Fatal("Open succeeded on a corrupt file")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v; want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), "mv "+path) {
				t.Errorf("error does not name the fix: %v", err)
			}
			after, _ := os.ReadFile(path)
			if string(after) != string(content) {
				t.Fatal("corrupt file was modified")
			}
		})
	}
}

func TestCorruptPagesFoundByCheck(t *testing.T) {
	s, path := openTemp(t, Options{})
	db := s.DB()
	mustExec(t, db.Exec, `CREATE TABLE big(x TEXT)`)
	for i := 0; i < 200; i++ {
		mustExec(t, db.Exec, `INSERT INTO big VALUES (?)`, strings.Repeat("x", 500))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Smash a page in the middle of the table's b-tree.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("\xff", 4096)), 4096*3); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s2, err := Open(context.Background(), path, nil, Options{})
	if err == nil {
		defer s2.Close()
		err = s2.Check(context.Background(), true)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v; want ErrCorrupt", err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	_, path := openTemp(t, Options{Migrations: append(append([]Migration{}, migrations...), Migration{Name: "future", SQL: "CREATE TABLE future(x)"})})
	_, err := Open(context.Background(), path, nil, Options{})
	if !errors.Is(err, ErrTooNew) {
		t.Fatalf("err = %v; want ErrTooNew", err)
	}
}

func TestFailedMigrationRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	bad := append(append([]Migration{}, migrations...), Migration{Name: "broken", SQL: "CREATE TABLE ok(x); CREATE TABLE ok(x);"})
	if _, err := Open(context.Background(), path, nil, Options{Migrations: bad}); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("err = %v; want migration error naming the step", err)
	}
	s, err := Open(context.Background(), path, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	s.DB().QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'ok'`).Scan(&n)
	if n != 0 {
		t.Fatal("half-applied migration left table behind")
	}
	if v, _ := s.Version(context.Background()); v != SchemaVersion() {
		t.Fatalf("version = %d", v)
	}
}

func TestMissingStateDir(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "nope", FileName), nil, Options{})
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("err = %v", err)
	}
}

func TestReadOnlyDoesNotCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if _, err := Open(context.Background(), path, nil, Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only open of a missing file succeeded")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("read-only open created the file")
	}
}

// TestVecDistancesMatchGo holds sqlite-vec's distance kernels (SIMD ones in
// the arm64 build) to a plain float64 computation.
func TestVecDistancesMatchGo(t *testing.T) {
	s, _ := openTemp(t, Options{})
	r := rand.New(rand.NewPCG(7, 9))
	for i := 0; i < 50; i++ {
		a, b := randomUnit(r), randomUnit(r)
		ba, _ := sqlitevec.SerializeFloat32(a)
		bb, _ := sqlitevec.SerializeFloat32(b)
		var l2, cos float64
		if err := s.DB().QueryRow(`SELECT vec_distance_l2(?, ?), vec_distance_cosine(?, ?)`, ba, bb, ba, bb).Scan(&l2, &cos); err != nil {
			t.Fatal(err)
		}
		var sq, dot float64
		for j := range a {
			d := float64(a[j]) - float64(b[j])
			sq += d * d
			dot += float64(a[j]) * float64(b[j])
		}
		if math.Abs(l2-math.Sqrt(sq)) > 1e-4 || math.Abs(cos-(1-dot)) > 1e-4 {
			t.Fatalf("vector %d: l2 %v want %v, cosine %v want %v", i, l2, math.Sqrt(sq), cos, 1-dot)
		}
	}
}
