package store

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestFilesCreated0600UnderUmask0: with no umask at all, the database, its
// WAL and its shared-memory file are still 0600 (SQLite alone would make
// them 0644).
func TestFilesCreated0600UnderUmask0(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(context.Background(), path, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A write, so the WAL has frames and both files exist.
	if _, err := s.DB().Exec(`INSERT INTO meta(key, value) VALUES ('perm-test', 'x')`); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if m := modeOf(t, p); m != FileMode {
			t.Errorf("%s is %04o; want %04o", filepath.Base(p), m, FileMode)
		}
	}
}

// TestExistingLooseFilesTightened: a database (and WAL) left 0644 by an
// older release, or 0666 by a copy, is 0600 after Open.
func TestExistingLooseFilesTightened(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), FileName)
	// Made by SQLite alone, as before this release: 0644 under umask 0.
	raw, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE t(x)`); err != nil {
		t.Fatal(err)
	}
	if m := modeOf(t, path); m&0o044 == 0 {
		t.Fatalf("setup: SQLite created the file %04o; the test needs a loose one", m)
	}
	raw.Close()
	if err := os.WriteFile(path+"-wal", nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path+"-wal", 0o666)
	s, err := Open(context.Background(), path, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if m := modeOf(t, p); m != FileMode {
			t.Errorf("%s is %04o after Open; want %04o", filepath.Base(p), m, FileMode)
		}
	}
}

// TestReadOnlyOpenChangesNothing: doctor's read-only open leaves modes as
// they are (it reports them instead).
func TestReadOnlyOpenChangesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(context.Background(), path, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	os.Chmod(path, 0o644)
	r, err := Open(context.Background(), path, nil, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if m := modeOf(t, path); m != 0o644 {
		t.Fatalf("read-only open changed the mode to %04o", m)
	}
}
