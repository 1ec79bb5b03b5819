package workspace

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// tree lists every regular file under dir with its content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

// A workspace of the shared layout moves on first start: uploads to each
// user's folder, the rest to shared/ (read-only for users), nothing lost,
// once.
func TestMigrateKeepsEverything(t *testing.T) {
	dir, markers := t.TempDir(), t.TempDir()
	old := map[string]string{
		"SOUL.md":                "soul",
		"USER.md":                "user",
		"skills/report/SKILL.md": "# report",
		"notes/todo.txt":         "buy milk",
		"budget.xlsx":            "numbers",
		"uploads/zhangsan/a.jpg": "jpeg-a",
		"uploads/zhangsan/b.amr": "amr-b",
		"uploads/li.si/c.pdf":    "pdf-c",
		"uploads/stray.txt":      "stray",
		"shared/already.txt":     "was shared",
		"shared/budget.xlsx":     "a name clash",
		".git/HEAD":              "ref",
	}
	for rel, content := range old {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(Config{Dir: dir, MarkerDir: markers}); err != nil {
		t.Fatal(err)
	}
	got := tree(t, dir)
	want := map[string]string{
		"SOUL.md":                              "soul",
		"USER.md":                              "user",
		"skills/report/SKILL.md":               "# report",
		"shared/notes/todo.txt":                "buy milk",
		"shared/budget.xlsx":                   "a name clash",
		"shared/budget.xlsx.migrated-1":        "numbers",
		"files/wecom%3Azhangsan/uploads/a.jpg": "jpeg-a",
		"files/wecom%3Azhangsan/uploads/b.amr": "amr-b",
		"files/wecom%3Ali.si/uploads/c.pdf":    "pdf-c",
		"shared/uploads-stray.txt":             "stray",
		"shared/already.txt":                   "was shared",
		".git/HEAD":                            "ref",
	}
	if len(got) != len(want) {
		t.Errorf("%d files after migration, want %d", len(got), len(want))
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s = %q, want %q", k, got[k], want[k])
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "uploads")); err == nil {
		t.Error("uploads/ still there")
	}
	// The old layout wrote 0644 files: nothing stays open to other users.
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s is %v after the migration", p, fi.Mode().Perm())
		}
		return nil
	})
	// Once: a file put at the top later is left where it is.
	if err := os.WriteFile(filepath.Join(dir, "later.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Dir: dir, MarkerDir: markers}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "later.txt")); err != nil {
		t.Errorf("second start moved later.txt: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(markers, "workspace.layout")); strings.TrimSpace(string(b)) != layoutV2+" "+dir {
		t.Errorf("marker %q", b)
	}
}

// What a user could plant before the upgrade (any user could write
// anywhere then): a files/ tree to seed a colleague's future folder, a
// file named shared, a marker saying "already migrated". None of it takes
// effect, and nothing is lost.
func TestMigratePlanted(t *testing.T) {
	dir, markers := t.TempDir(), t.TempDir()
	for rel, content := range map[string]string{
		"files/wecom%3Aboss/invoice.txt": "pay mallory",
		"shared":                         "a file, not a folder",
		".layout":                        "2\n",
		"notes.txt":                      "x",
	} {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(Config{Dir: dir, MarkerDir: markers})
	if err != nil {
		t.Fatal(err)
	}
	boss, _ := s.UserDir("wecom:boss")
	if _, err := os.Stat(filepath.Join(boss, "invoice.txt")); err == nil {
		t.Fatal("a planted file is in boss's folder")
	}
	got := tree(t, dir)
	for rel, want := range map[string]string{
		"shared/files.old/wecom%3Aboss/invoice.txt": "pay mallory",
		"shared/shared.old":                         "a file, not a folder",
		"shared/notes.txt":                          "x",
	} {
		if got[rel] != want {
			t.Errorf("%s = %q, want %q; tree %v", rel, got[rel], want, got)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "shared")); err != nil || !fi.IsDir() {
		t.Fatalf("shared: %v %v", fi, err)
	}
}
