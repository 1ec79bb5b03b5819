package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A user's folder moves to another box whole (folders, files, names in
// any script, times), without what is not a plain file (a link out of
// the folder stays behind); an import tried again gives the same folder;
// the old box's folder is gone after the purge, and other users' folders
// stay.
func TestFilesMove(t *testing.T) {
	from, to := newRig(t, 0), newRig(t, 0)
	dir, err := from.s.UserDir("wecom:bob")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "uploads", "deep", "er"), 0o700)
	os.MkdirAll(filepath.Join(dir, "empty"), 0o700)
	when := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	files := map[string]string{"notes.md": "# notes", "uploads/20260501-报告.pdf": "%PDF-1.4", "uploads/deep/er/x.bin": strings.Repeat("x", 70_000)}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, when, when)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("not bob's"), 0o600)
	if err := os.Symlink(secret, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	alice, _ := from.s.UserDir("wecom:alice")
	os.WriteFile(filepath.Join(alice, "a.txt"), []byte("alice's"), 0o600)

	var buf bytes.Buffer
	n, err := from.s.ExportFiles("wecom:bob", &buf)
	if err != nil || n != 3 {
		t.Fatalf("export: %d files, %v", n, err)
	}
	for range 2 {
		if n, err := to.s.ImportFiles("wecom:bob", bytes.NewReader(buf.Bytes())); err != nil || n != 3 {
			t.Fatalf("import: %d files, %v", n, err)
		}
	}
	got, _ := to.s.UserDir("wecom:bob")
	for name, body := range files {
		b, err := os.ReadFile(filepath.Join(got, name))
		if err != nil || string(b) != body {
			t.Fatalf("%s on the new box: %v", name, err)
		}
		if fi, _ := os.Stat(filepath.Join(got, name)); !fi.ModTime().Equal(when) || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: time %v mode %v", name, fi.ModTime(), fi.Mode())
		}
	}
	if fi, err := os.Stat(filepath.Join(got, "empty")); err != nil || !fi.IsDir() {
		t.Fatalf("the empty folder did not move: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(got, "link")); !os.IsNotExist(err) {
		t.Fatalf("a link moved: %v", err)
	}
	if err := from.s.PurgeFiles("wecom:bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the old folder stays: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(alice, "a.txt")); err != nil || string(b) != "alice's" {
		t.Fatalf("alice's folder was touched: %v", err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "not bob's" {
		t.Fatal("the purge followed the link")
	}
	// A user without a folder moves as an empty stream.
	buf.Reset()
	if n, err := from.s.ExportFiles("wecom:nobody", &buf); err != nil || n != 0 {
		t.Fatalf("export of no folder: %d, %v", n, err)
	}
	if n, err := to.s.ImportFiles("wecom:nobody", &buf); err != nil || n != 0 {
		t.Fatalf("import of an empty stream: %d, %v", n, err)
	}
}

// A stream that tries to leave the folder, plant a link or a device, or
// go past the quota is refused, and nothing lands outside the folder.
func TestFilesImportRefusesHostileStreams(t *testing.T) {
	entry := func(h tar.Header, body string) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		tw.WriteHeader(&h)
		tw.Write([]byte(body))
		tw.Close()
		return b.Bytes()
	}
	cases := map[string][]byte{
		"dotdot":   entry(tar.Header{Typeflag: tar.TypeReg, Name: "../../escaped.txt", Mode: 0o600}, "x"),
		"absolute": entry(tar.Header{Typeflag: tar.TypeReg, Name: "/tmp/escaped.txt", Mode: 0o600}, "x"),
		"unclean":  entry(tar.Header{Typeflag: tar.TypeReg, Name: "a/../../escaped.txt", Mode: 0o600}, "x"),
		"symlink":  entry(tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "/etc/passwd"}, ""),
		"hardlink": entry(tar.Header{Typeflag: tar.TypeLink, Name: "h", Linkname: "/etc/passwd"}, ""),
		"device":   entry(tar.Header{Typeflag: tar.TypeChar, Name: "d", Devmajor: 1, Devminor: 3}, ""),
		"too long": entry(tar.Header{Typeflag: tar.TypeReg, Name: strings.Repeat("d/", maxImportPath/2) + "f", Mode: 0o600}, "x"),
		"junk":     []byte(strings.Repeat("not a tar stream ", 100)),
	}
	for name, stream := range cases {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, 0)
			if _, err := r.s.ImportFiles("wecom:bob", bytes.NewReader(stream)); err == nil {
				t.Fatal("accepted")
			}
			filepath.Walk(filepath.Dir(r.dir), func(p string, fi os.FileInfo, err error) error {
				if err == nil && strings.Contains(p, "escaped") {
					t.Fatalf("%s was written", p)
				}
				return nil
			})
		})
	}
	// A link already in the target folder is not followed by a file of
	// the same name.
	r := newRig(t, 0)
	dir, _ := r.s.UserDir("wecom:bob")
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("keep"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "f"))
	if _, err := r.s.ImportFiles("wecom:bob", bytes.NewReader(entry(tar.Header{Typeflag: tar.TypeReg, Name: "f", Mode: 0o600}, "overwritten"))); err == nil {
		t.Log("the import replaced the link in the folder (allowed, as long as the target is untouched)")
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Fatalf("the import wrote through a link to %q", b)
	}
	// Past the quota: refused at the file that crosses it.
	q := newRig(t, 10_000)
	_, err := q.s.ImportFiles("wecom:bob", bytes.NewReader(entry(tar.Header{Typeflag: tar.TypeReg, Name: "big", Mode: 0o600}, strings.Repeat("x", 20_000))))
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("an import over the quota: %v", err)
	}
}
