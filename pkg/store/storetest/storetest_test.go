package storetest_test

import (
	"context"
	"path/filepath"
	"testing"

	"agent/pkg/store"
	"agent/pkg/store/storetest"
)

// Open gives a database at the current schema version, in the test's
// temporary directory, and closes it when the test ends.
func TestOpenIsMigratedAndClosedAfterTheTest(t *testing.T) {
	var st *store.Store
	t.Run("open", func(t *testing.T) {
		st = storetest.Open(t)
		v, err := st.Version(context.Background())
		if err != nil || v != store.SchemaVersion() {
			t.Fatalf("version %d, %v; want %d", v, err, store.SchemaVersion())
		}
		if filepath.Base(st.Path()) != store.FileName {
			t.Errorf("path %s, want a file named %s", st.Path(), store.FileName)
		}
	})
	if err := st.DB().Ping(); err == nil {
		t.Fatal("the database is still open after its test ended")
	}
}

// OpenAt reopens a database a test closed: what was written stays.
func TestOpenAtReopensTheSameFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), store.FileName)
	st := storetest.OpenAt(t, path)
	if _, err := st.DB().Exec(`INSERT INTO error_log(at, level, component, msg, attrs) VALUES (1, 'ERROR', 'x', 'kept', '{}')`); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var msg string
	if err := storetest.OpenAt(t, path).DB().QueryRow(`SELECT msg FROM error_log`).Scan(&msg); err != nil || msg != "kept" {
		t.Fatalf("after reopening: %q, %v", msg, err)
	}
}

func TestDBIsUsable(t *testing.T) {
	var n int
	if err := storetest.DB(t).QueryRow(`SELECT count(*) FROM error_log`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a new database: %d rows, %v", n, err)
	}
}
