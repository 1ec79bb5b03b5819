package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/store"
)

// TestPermissionsReportsLooseFiles: a 0755 state dir, a 0644 database and
// a world-readable workspace file are each named with their mode and the
// chmod that fixes them; a database readable by others fails the check.
func TestPermissionsReportsLooseFiles(t *testing.T) {
	e := baseEnv(t, "", nil)
	dir := e.Config.Agent.StateDir
	ws := e.Config.Agent.Workspace
	for _, d := range []string{dir, filepath.Join(ws, "files")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, store.FileName)
	note := filepath.Join(ws, "files", "notes.md")
	os.WriteFile(db, nil, 0o600)
	os.WriteFile(note, []byte("private"), 0o600)
	os.Chmod(dir, 0o755)
	os.Chmod(db, 0o644)
	os.Chmod(note, 0o644)
	os.Chmod(ws, 0o755) // as mkdir made it before per-user folders
	os.Chmod(filepath.Join(ws, "files"), 0o755)
	r := find(t, Run(context.Background(), Checks(e), time.Minute), "permissions")
	if r.Level != Fail {
		t.Fatalf("level %s; want fail for a world-readable database: %+v", r.Level, r)
	}
	for _, want := range []string{
		"state dir " + dir + " is 0755 (others r-x)", "chmod 750 " + dir,
		db + " is 0644 (group r--, others r--)", "chmod 600 " + db,
		"workspace " + ws + " is open to others", "2 file(s) or folder(s) in the workspace are open to others (first: " + filepath.Join(ws, "files"),
		"chmod -R o-rwx " + ws,
	} {
		if !strings.Contains(r.Detail+" fix: "+r.Fix, want) {
			t.Errorf("missing %q in\n%s\nfix: %s", want, r.Detail, r.Fix)
		}
	}

	// Fixed as told: ok.
	os.Chmod(dir, 0o750)
	os.Chmod(db, 0o600)
	for _, p := range []string{ws, filepath.Join(ws, "files")} {
		os.Chmod(p, 0o750)
	}
	os.Chmod(note, 0o640)
	if r := find(t, Run(context.Background(), Checks(e), time.Minute), "permissions"); r.Level != OK {
		t.Fatalf("after the fixes: %+v", r)
	}

	// Open to others but out of their reach: a world-readable file in a
	// folder they cannot enter is not reported; a world-readable database
	// in a 0700 state dir is a warning, not a failure.
	os.Chmod(filepath.Join(ws, "files"), 0o700)
	os.Chmod(note, 0o644) // in files/, which others cannot enter
	os.Chmod(dir, 0o700)
	os.Chmod(db, 0o644)
	if r := find(t, Run(context.Background(), Checks(e), time.Minute), "permissions"); r.Level != Warn || strings.Contains(r.Detail, note) {
		t.Fatalf("unreachable files: %+v", r)
	}
	os.Chmod(note, 0o640)
	os.Chmod(dir, 0o750)

	// Group access alone is a warning.
	os.Chmod(db, 0o640)
	if r := find(t, Run(context.Background(), Checks(e), time.Minute), "permissions"); r.Level != Warn || !strings.Contains(r.Fix, "chmod 600 "+db) {
		t.Fatalf("group-readable database: %+v", r)
	}
}

func TestPermissionsNothingYet(t *testing.T) {
	e := baseEnv(t, "", nil)
	if r := find(t, Run(context.Background(), Checks(e), time.Minute), "permissions"); r.Level != OK {
		t.Fatalf("fresh install: %+v", r)
	}
}
