package skills

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// ent is one archive entry for the tests.
type ent struct {
	name string
	body string
	typ  byte  // 0: regular file
	mode int64 // 0: 0644 (0755 for directories)
	link string
}

func dir(name string) ent { return ent{name: name, typ: tar.TypeDir} }

// tarball builds an archive of ents, gzip-compressed when gz.
func tarball(t testing.TB, gz bool, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Format: tar.FormatPAX}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("header %q: %v", e.name, err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// ls lists dir's entries.
func ls(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestInstallRootLayout(t *testing.T) {
	f := newFixture(t)
	s := f.set()
	skill := md("weather", "Weather by wttr.in", "")
	script := "#!/bin/sh\ncurl wttr.in\n"
	arc := tarball(t, false,
		ent{name: "SKILL.md", body: skill},
		dir("scripts/"),
		ent{name: "scripts/get.sh", body: script, mode: 0o700},
		ent{name: "references/deep/notes.md", body: "notes"},
	)
	arc = append(arc, "trailing bytes after the tar end"...)
	inst, err := s.Install(bytes.NewReader(arc))
	if err != nil {
		t.Fatal(err)
	}
	want := Installation{Name: "weather", SHA256: sha(arc), Files: []FileSum{
		{"SKILL.md", int64(len(skill)), sha([]byte(skill))},
		{"references/deep/notes.md", 5, sha([]byte("notes"))},
		{"scripts/get.sh", int64(len(script)), sha([]byte(script))},
	}}
	if !reflect.DeepEqual(inst, want) {
		t.Errorf("Install =\n%+v\nwant\n%+v", inst, want)
	}
	if got := ls(t, f.installed); !reflect.DeepEqual(got, []string{"weather"}) {
		t.Errorf("installed dir holds %v", got)
	}
	for rel, perm := range map[string]os.FileMode{"": 0o755, "SKILL.md": 0o644, "scripts": 0o755, "scripts/get.sh": 0o755, "references/deep": 0o755} {
		st, err := os.Stat(filepath.Join(f.installed, "weather", rel))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != perm {
			t.Errorf("%s: mode %v, want %v", rel, st.Mode().Perm(), perm)
		}
	}
	sk, ok := s.Get("weather")
	if !ok || sk.Source != Installed || !sk.Offered() {
		t.Errorf("Get(weather) after Install = %+v, %v", sk, ok)
	}
}

func TestInstallTopFolderGzip(t *testing.T) {
	f := newFixture(t)
	s := f.set()
	for _, prefix := range []string{"todo/", "./todo/"} {
		arc := tarball(t, true,
			dir(prefix),
			ent{name: prefix + "SKILL.md", body: "Keep a todo list.\n"},
			ent{name: prefix + "assets/t.txt", body: "x"},
		)
		inst, err := s.Install(bytes.NewReader(arc))
		if err != nil {
			t.Fatal(err)
		}
		if inst.Name != "todo" || inst.SHA256 != sha(arc) || len(inst.Files) != 2 || inst.Files[1].Path != "assets/t.txt" {
			t.Errorf("Install = %+v", inst)
		}
		if got := ls(t, f.installed); !reflect.DeepEqual(got, []string{"todo"}) {
			t.Errorf("installed dir holds %v", got)
		}
	}
	// A folder name that differs from the declared name: the name wins.
	arc := tarball(t, true, ent{name: "pkg-1.2/SKILL.md", body: md("renamed", "d", "")})
	if inst, err := s.Install(bytes.NewReader(arc)); err != nil || inst.Name != "renamed" {
		t.Fatalf("Install = %+v, %v", inst, err)
	}
	if got := ls(t, f.installed); !reflect.DeepEqual(got, []string{"renamed", "todo"}) {
		t.Errorf("installed dir holds %v", got)
	}
}

func TestInstallReplace(t *testing.T) {
	f := newFixture(t)
	s := f.set()
	v1 := tarball(t, false, ent{name: "SKILL.md", body: md("x", "v1", "")}, ent{name: "old.txt", body: "old"})
	v2 := tarball(t, false, ent{name: "SKILL.md", body: md("x", "v2", "")}, ent{name: "new.txt", body: "new"})
	if inst, err := s.Install(bytes.NewReader(v1)); err != nil || inst.Replaced {
		t.Fatalf("v1: %+v, %v", inst, err)
	}
	if sk, _ := s.Get("x"); sk.Description != "v1" {
		t.Fatalf("v1 not seen: %+v", sk)
	}
	inst, err := s.Install(bytes.NewReader(v2))
	if err != nil || !inst.Replaced {
		t.Fatalf("v2: %+v, %v", inst, err)
	}
	if got := ls(t, filepath.Join(f.installed, "x")); !reflect.DeepEqual(got, []string{"SKILL.md", "new.txt"}) {
		t.Errorf("after replace: %v", got)
	}
	if got := ls(t, f.installed); !reflect.DeepEqual(got, []string{"x"}) {
		t.Errorf("installed dir holds %v", got)
	}
	// Install forces a rescan: no clock movement needed.
	if sk, _ := s.Get("x"); sk.Description != "v2" {
		t.Errorf("v2 not seen: %+v", sk)
	}
}

func TestInstallRefusals(t *testing.T) {
	okMD := ent{name: "SKILL.md", body: md("fine", "d", "")}
	many := []ent{okMD}
	for i := range 1000 {
		many = append(many, dir(fmt.Sprintf("d%04d/", i)))
	}
	deep := strings.Repeat("d/", 16) + "f"
	for _, tc := range []struct {
		name string
		arc  func(t *testing.T) []byte
		want string // in the message
	}{
		{"traversal", arcOf(okMD, ent{name: "../x", body: "x"}), `".." in the path`},
		{"traversal inside", arcOf(okMD, ent{name: "a/../../x", body: "x"}), `".." in the path`},
		{"absolute", arcOf(okMD, ent{name: "/tmp/x", body: "x"}), "absolute path"},
		{"symlink", arcOf(okMD, ent{name: "passwd", typ: tar.TypeSymlink, link: "/etc/passwd"}), "symlinks are not allowed"},
		{"hardlink", arcOf(okMD, ent{name: "passwd", typ: tar.TypeLink, link: "SKILL.md"}), "hard links are not allowed"},
		{"device", arcOf(okMD, ent{name: "null", typ: tar.TypeChar}), "devices are not allowed"},
		{"fifo", arcOf(okMD, ent{name: "p", typ: tar.TypeFifo}), "FIFOs are not allowed"},
		{"1001 entries", arcOf(many...), "more than 1000 entries"},
		{"no SKILL.md", arcOf(ent{name: "README.md", body: "x"}), "no SKILL.md"},
		{"SKILL.md too deep", arcOf(ent{name: "a/b/SKILL.md", body: "x"}), "no SKILL.md"},
		{"two top folders", arcOf(ent{name: "a/SKILL.md", body: "x"}, ent{name: "b/SKILL.md", body: "x"}), "no SKILL.md"},
		{"top folder and a loose file", arcOf(ent{name: "a/SKILL.md", body: "x"}, ent{name: "README", body: "x"}), "no SKILL.md"},
		{"bad name", arcOf(ent{name: "SKILL.md", body: md("bad name", "d", "")}), "invalid name"},
		{"bad folder name", arcOf(ent{name: "has space/SKILL.md", body: "text"}), "invalid name"},
		{"no name at all", arcOf(ent{name: "SKILL.md", body: "text"}), "gives no name"},
		{"bad front matter", arcOf(ent{name: "SKILL.md", body: "---\nname: [x\n---\n"}), "front matter"},
		{"duplicate path", arcOf(okMD, ent{name: "a", body: "1"}, ent{name: "./a", body: "2"}), "duplicate path"},
		{"file then folder", arcOf(okMD, ent{name: "a", body: "1"}, ent{name: "a/b", body: "2"}), "parent folder is a file"},
		{"too deep", arcOf(okMD, ent{name: deep, body: "x"}), "deeper than 16"},
		{"path too long", arcOf(okMD, ent{name: strings.Repeat("a", 256), body: "x"}), "longer than 255"},
		{"not UTF-8", arcOf(okMD, ent{name: "caf\xe9", body: "x"}), "not UTF-8"},
		{"newline in name", arcOf(okMD, ent{name: "a\nb", body: "x"}), "control character"},
		{"not an archive", func(*testing.T) []byte { return []byte(strings.Repeat("not a tar ", 100)) }, "not a valid tar"},
		{"bad gzip", func(*testing.T) []byte { return []byte{0x1f, 0x8b, 1, 2, 3} }, "gzip"},
		{"empty", func(*testing.T) []byte { return nil }, "no SKILL.md"},
		{"truncated", func(t *testing.T) []byte {
			b := tarball(t, false, okMD, ent{name: "big", body: strings.Repeat("x", 5000)})
			return b[:1500]
		}, "archive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			write(t, f.installed, "keep/SKILL.md", md("keep", "d", ""))
			s := f.set()
			for _, gz := range []bool{false, true} {
				arc := tc.arc(t)
				if gz && len(arc) > 2 && arc[0] != 0x1f {
					arc = gzipped(t, arc)
				}
				_, err := s.Install(bytes.NewReader(arc))
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("gzip %v: err = %v, want ErrInvalid saying %q", gz, err, tc.want)
				}
				if got := ls(t, f.installed); !reflect.DeepEqual(got, []string{"keep"}) {
					t.Fatalf("installed dir holds %v after a refusal", got)
				}
			}
			if names := names(s.List()); !reflect.DeepEqual(names, []string{"keep"}) {
				t.Errorf("skills after refusals: %v", names)
			}
		})
	}
}

func arcOf(ents ...ent) func(t *testing.T) []byte {
	return func(t *testing.T) []byte { return tarball(t, false, ents...) }
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// generator serves a tar header claiming size bytes, then zeros, counting
// what was read; the test never holds the file.
type generator struct {
	head []byte
	left int64
	read int64
}

func newGenerator(t *testing.T, name string, size int64) *generator {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "SKILL.md", Mode: 0o644, Size: 8}); err != nil {
		t.Fatal(err)
	}
	io.WriteString(tw, "# big\nx\n")
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: size}); err != nil {
		t.Fatal(err)
	}
	tw.Flush() // the header only: the data is the generator's
	return &generator{head: buf.Bytes(), left: size}
}

func (g *generator) Read(p []byte) (int, error) {
	n := 0
	if len(g.head) > 0 {
		n = copy(p, g.head)
		g.head = g.head[n:]
	} else {
		if g.left == 0 {
			return 0, io.EOF
		}
		k := int64(len(p))
		k = min(k, g.left)
		clear(p[:k])
		g.left -= k
		n = int(k)
	}
	g.read += int64(n)
	return n, nil
}

func TestInstallHugeFileRefusedFromHeader(t *testing.T) {
	f := newFixture(t)
	s := f.set()
	g := newGenerator(t, "big.bin", 1<<30)
	_, err := s.Install(g)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "over the 16 MiB limit") {
		t.Fatalf("err = %v", err)
	}
	if g.read > 1<<20 {
		t.Errorf("read %d bytes of a refused 1 GiB file", g.read)
	}
	if got := ls(t, f.installed); len(got) != 0 {
		t.Errorf("installed dir holds %v", got)
	}
}

func TestInstallBombs(t *testing.T) {
	zeros := func(w io.Writer, n int64) {
		buf := make([]byte, 64<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			w.Write(buf[:k])
			n -= k
		}
	}
	// bomb builds a gzip'd tar of files of size bytes of zeros each.
	bomb := func(files int, size int64) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		tw := tar.NewWriter(zw)
		tw.WriteHeader(&tar.Header{Name: "SKILL.md", Mode: 0o644, Size: 8})
		io.WriteString(tw, "# bomb\nx")
		for i := range files {
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("z%d", i), Mode: 0o644, Size: size})
			zeros(tw, size)
		}
		tw.Close()
		zw.Close()
		return buf.Bytes()
	}
	for _, tc := range []struct {
		name string
		lim  limits
		arc  []byte
		want string
	}{
		{"total from headers", limits{entries: 1000, file: 1 << 20, total: 3 << 20, stream: 64 << 20, depth: 16, pathLen: 255}, bomb(8, 1<<20), "more than 3 MiB of files"},
		{"decompressed stream", limits{entries: 1000, file: 16 << 20, total: 64 << 20, stream: 2 << 20, depth: 16, pathLen: 255}, bomb(1, 8<<20), "larger than 2 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := f.set()
			s.lim = tc.lim
			_, err := s.Install(bytes.NewReader(tc.arc))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if got := ls(t, f.installed); len(got) != 0 {
				t.Errorf("installed dir holds %v", got)
			}
			t.Logf("%d compressed bytes refused: %v", len(tc.arc), err)
		})
	}
	// With the real limits: 70 MiB of zeros in 5 files under 16 MiB each.
	t.Run("default limits", func(t *testing.T) {
		f := newFixture(t)
		arc := bomb(5, 14<<20)
		_, err := f.set().Install(bytes.NewReader(arc))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "more than 64 MiB of files") {
			t.Fatalf("err = %v", err)
		}
		if got := ls(t, f.installed); len(got) != 0 {
			t.Errorf("installed dir holds %v", got)
		}
	})
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("connection reset")
	}
	k := min(len(p), r.n)
	clear(p[:k])
	r.n -= k
	return k, nil
}

func TestInstallReadErrorIsNotARefusal(t *testing.T) {
	f := newFixture(t)
	_, err := f.set().Install(&failingReader{n: 100})
	if err == nil || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("err = %v, want the reader's error, not ErrInvalid", err)
	}
	cfg := f.config()
	cfg.Installed = ""
	if _, err := New(cfg).Install(bytes.NewReader(nil)); err == nil {
		t.Error("Install without an installed directory succeeded")
	}
}

func TestInstallConcurrent(t *testing.T) {
	f := newFixture(t)
	s := f.set()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		name := []string{"same", fmt.Sprintf("other%d", i)}[i%2]
		arc := tarball(t, i%3 == 0,
			ent{name: "SKILL.md", body: md(name, fmt.Sprintf("version %d", i), "")},
			ent{name: fmt.Sprintf("v%d.txt", i), body: strings.Repeat("x", 10000*i)},
		)
		wg.Go(func() {
			if _, err := s.Install(bytes.NewReader(arc)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := ls(t, f.installed)
	if want := []string{"other1", "other3", "other5", "other7", "same"}; !reflect.DeepEqual(got, want) {
		t.Errorf("installed dir holds %v, want %v", got, want)
	}
	files := ls(t, filepath.Join(f.installed, "same"))
	if len(files) != 2 || !slices.Contains(files, "SKILL.md") {
		t.Errorf("same/ holds %v: a mix of versions", files)
	}
}

func TestInstallSweepsLeftovers(t *testing.T) {
	f := newFixture(t)
	write(t, f.installed, ".install-crashed/x", "x")
	write(t, f.installed, ".old-crashed/x", "x")
	arc := tarball(t, false, ent{name: "SKILL.md", body: md("a", "d", "")})
	if _, err := f.set().Install(bytes.NewReader(arc)); err != nil {
		t.Fatal(err)
	}
	if got := ls(t, f.installed); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("installed dir holds %v", got)
	}
}
