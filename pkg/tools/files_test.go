package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

const secret = "TOPSECRET-do-not-leak"

// fixture lays out
//
//	parent/secret.txt            (outside the workspace)
//	parent/ws/                   (the workspace)
//	parent/ws/hello.txt
//	parent/ws/sub/deep/note.md
//	parent/ws/link_out    -> ../secret.txt
//	parent/ws/link_dir    -> ..
//	parent/ws/link_abs    -> /etc/passwd
//	parent/ws/link_parent -> <abs parent>
//	parent/ws/link_in     -> hello.txt
//
// and returns the workspace, a registry holding its tools, and parent.
func fixture(t testing.TB, limits Limits) (*Workspace, *Registry, string) {
	t.Helper()
	parent := t.TempDir()
	ws := filepath.Join(parent, "ws")
	must(t, os.MkdirAll(filepath.Join(ws, "sub", "deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(parent, "secret.txt"), []byte(secret), 0o600))
	must(t, os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello\nworld\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "sub", "deep", "note.md"), []byte("# note\n"), 0o644))
	for name, target := range map[string]string{
		"link_out":    "../secret.txt",
		"link_dir":    "..",
		"link_abs":    "/etc/passwd",
		"link_parent": parent,
		"link_proc":   "/proc/self/environ",
		"link_in":     "hello.txt",
	} {
		must(t, os.Symlink(target, filepath.Join(ws, name)))
	}
	w, err := OpenWorkspace(ws, limits)
	must(t, err)
	t.Cleanup(func() { w.Close() })
	r := NewRegistry()
	for _, tool := range w.Tools() {
		must(t, r.Register(tool))
	}
	return w, r, parent
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func run(r *Registry, tool string, args any) (string, error) {
	b, _ := json.Marshal(args)
	return r.Run(context.Background(), tool, Call{Args: b, Profile: "admin"})
}

type m = map[string]any

type fileCase struct {
	name    string
	tool    string
	args    m
	want    string // substring of the result
	wantErr string // substring of the error
}

func runCases(t *testing.T, r *Registry, tests []fileCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := run(r, tt.tool, tt.args)
			if strings.Contains(got, secret) || (err != nil && strings.Contains(err.Error(), secret)) {
				t.Fatalf("secret leaked: %q %v", got, err)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("%s(%v) = %q, %v; want error containing %q", tt.tool, tt.args, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(got, tt.want) {
				t.Fatalf("%s(%v) = %q, %v; want result containing %q", tt.tool, tt.args, got, err, tt.want)
			}
		})
	}
}

func TestTraversalRefused(t *testing.T) {
	w, r, parent := fixture(t, Limits{})
	ws := w.dirs[0]
	const outside = "outside the workspace"
	const escapes = "leads outside the workspace"
	var tests []fileCase
	for _, tool := range []string{"read_file", "edit_file", "write_file", "list_files"} {
		args := func(p string) m {
			switch tool {
			case "edit_file":
				return m{"path": p, "old_text": "T", "new_text": "x"}
			case "write_file":
				return m{"path": p, "content": "pwned"}
			}
			return m{"path": p}
		}
		for _, c := range []struct{ path, wantErr string }{
			{"../secret.txt", outside},
			{"..", outside},
			{"sub/../../secret.txt", outside},
			{"./../ws/../secret.txt", outside},
			{filepath.Join(parent, "secret.txt"), outside},
			{"/etc/passwd", outside},
			{"/proc/self/environ", outside},
			{"/proc/self/root/etc/passwd", outside},
			{"link_out", escapes},
			{"link_dir/secret.txt", escapes},
			{"link_parent/secret.txt", escapes},
			{"link_abs", escapes},
			{"link_proc", escapes},
			{"link_dir/ws/hello.txt", escapes},
			{"sub/\x00x", "invalid characters"},
		} {
			tests = append(tests, fileCase{name: tool + " " + c.path, tool: tool, args: args(c.path), wantErr: c.wantErr})
		}
	}
	// Absolute paths inside the workspace are accepted.
	tests = append(tests,
		fileCase{name: "absolute inside", tool: "read_file", args: m{"path": filepath.Join(ws, "hello.txt")}, want: "hello\nworld\n"},
		fileCase{name: "symlink inside", tool: "read_file", args: m{"path": "link_in"}, want: "hello"},
		fileCase{name: "dotdot inside", tool: "read_file", args: m{"path": "sub/../hello.txt"}, want: "hello"},
		fileCase{name: "absolute workspace list", tool: "list_files", args: m{"path": ws}, want: "hello.txt"},
	)
	runCases(t, r, tests)
	// Nothing was written outside.
	got, err := os.ReadFile(filepath.Join(parent, "secret.txt"))
	if err != nil || string(got) != secret {
		t.Fatalf("secret changed: %q %v", got, err)
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 2 {
		t.Fatalf("parent has %d entries, want 2 (secret.txt, ws)", len(ents))
	}
}

func TestReadFile(t *testing.T) {
	w, r, _ := fixture(t, Limits{ReadBytes: 1000, ReadLines: 10})
	ws := w.dirs[0]
	var lines []string
	for i := 1; i <= 25; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	must(t, os.WriteFile(filepath.Join(ws, "long.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "wide.txt"), []byte(strings.Repeat("é", 3000)+"\nnext\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "wide2.txt"), []byte("short\n"+strings.Repeat("é", 3000)+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "bin.dat"), []byte("ELF\x00\x01\x02"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "latin1.txt"), []byte("caf\xe9\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "empty.txt"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "nonl.txt"), []byte("a\nb"), 0o644))
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644))

	runCases(t, r, []fileCase{
		{name: "small", tool: "read_file", args: m{"path": "hello.txt"}, want: "hello\nworld\n"},
		{name: "truncated by lines", tool: "read_file", args: m{"path": "long.txt"}, want: "line 10\n[truncated: showed lines 1-10 of a longer file (191 bytes). Call read_file with offset=11 to read more]"},
		{name: "offset", tool: "read_file", args: m{"path": "long.txt", "offset": 11, "limit": 3}, want: "line 11\nline 12\nline 13\n[truncated: showed lines 11-13"},
		{name: "cut inside a later line", tool: "read_file", args: m{"path": "wide2.txt"}, want: "short\n" + strings.Repeat("é", 497) + "\n[truncated at 1000 bytes inside line 2; the file continues. Call read_file with offset=2 to read more]"},
		{name: "offset to end", tool: "read_file", args: m{"path": "long.txt", "offset": 21}, want: "line 21\nline 22\nline 23\nline 24\nline 25\n"},
		{name: "offset past end", tool: "read_file", args: m{"path": "long.txt", "offset": 30}, wantErr: "past the end of the file"},
		{name: "negative", tool: "read_file", args: m{"path": "long.txt", "offset": -1}, wantErr: "must not be negative"},
		{name: "truncated by bytes", tool: "read_file", args: m{"path": "wide.txt"}, want: "[truncated: line 1 is longer than 1000 bytes and only its start is shown. Call read_file with offset=2 to continue after it]"},
		{name: "binary", tool: "read_file", args: m{"path": "bin.dat"}, wantErr: "binary file (6 bytes)"},
		{name: "not utf8", tool: "read_file", args: m{"path": "latin1.txt"}, wantErr: "binary file"},
		{name: "empty", tool: "read_file", args: m{"path": "empty.txt"}, want: "(empty file)"},
		{name: "no final newline", tool: "read_file", args: m{"path": "nonl.txt"}, want: "a\nb"},
		{name: "directory", tool: "read_file", args: m{"path": "sub"}, wantErr: "is a directory; use list_files"},
		{name: "missing", tool: "read_file", args: m{"path": "nope.txt"}, wantErr: "no such file or directory"},
		{name: "file as dir", tool: "read_file", args: m{"path": "hello.txt/x"}, wantErr: "hello.txt/x"},
		{name: "fifo", tool: "read_file", args: m{"path": "fifo"}, wantErr: "not a regular file"},
		{name: "no path", tool: "read_file", args: m{}, wantErr: "missing required argument(s): path"},
		{name: "empty path", tool: "read_file", args: m{"path": " "}, wantErr: "path is empty"},
		{name: "workspace itself", tool: "read_file", args: m{"path": "."}, wantErr: "is the workspace directory"},
		{name: "unknown arg", tool: "read_file", args: m{"path": "hello.txt", "lines": 3}, wantErr: `unknown argument "lines"`},
	})

	// The byte-truncated result stays valid UTF-8 and within the limit.
	got, err := run(r, "read_file", m{"path": "wide.txt"})
	must(t, err)
	body, _, _ := strings.Cut(got, "\n[truncated")
	if len(body) > 1000 || !json.Valid([]byte(fmt.Sprintf("%q", body))) || strings.ContainsRune(body, '\uFFFD') {
		t.Fatalf("byte truncation: %d bytes, %q", len(body), body[len(body)-10:])
	}
}

func TestReadHugeFileDefaultLimits(t *testing.T) {
	w, r, _ := fixture(t, Limits{})
	line := strings.Repeat("x", 99) + "\n"
	must(t, os.WriteFile(filepath.Join(w.dirs[0], "huge.log"), []byte(strings.Repeat(line, 50000)), 0o644)) // 5 MB
	got, err := run(r, "read_file", m{"path": "huge.log"})
	must(t, err)
	if len(got) > 64<<10+300 || !strings.Contains(got, "[truncated at 64 KiB inside line 656") {
		t.Fatalf("huge file: %d bytes, tail %q", len(got), got[len(got)-200:])
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	must(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFile(t *testing.T) {
	w, r, _ := fixture(t, Limits{WriteBytes: 100})
	ws := w.dirs[0]
	must(t, os.WriteFile(filepath.Join(ws, "exec.sh"), []byte("old"), 0o755))
	runCases(t, r, []fileCase{
		{name: "new", tool: "write_file", args: m{"path": "new.txt", "content": "abc"}, want: "wrote 3 bytes to new.txt"},
		{name: "parents", tool: "write_file", args: m{"path": "a/b/c.txt", "content": "deep"}, want: "wrote 4 bytes to a/b/c.txt"},
		{name: "overwrite", tool: "write_file", args: m{"path": "hello.txt", "content": "bye"}, want: "wrote 3 bytes"},
		{name: "keeps mode", tool: "write_file", args: m{"path": "exec.sh", "content": "#!/bin/sh"}, want: "wrote 9 bytes"},
		{name: "empty content", tool: "write_file", args: m{"path": "empty.txt", "content": ""}, want: "wrote 0 bytes"},
		{name: "too big", tool: "write_file", args: m{"path": "big.txt", "content": strings.Repeat("x", 101)}, wantErr: "more than the 100 byte limit"},
		{name: "dir", tool: "write_file", args: m{"path": "sub", "content": "x"}, wantErr: "is a directory"},
		{name: "parent is file", tool: "write_file", args: m{"path": "hello.txt/x", "content": "x"}, wantErr: "hello.txt"},
		{name: "missing content", tool: "write_file", args: m{"path": "x.txt"}, wantErr: "missing required argument(s): content"},
	})
	for file, want := range map[string]string{"new.txt": "abc", "a/b/c.txt": "deep", "hello.txt": "bye", "empty.txt": ""} {
		got, err := os.ReadFile(filepath.Join(ws, file))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", file, got, err, want)
		}
	}
	// The mode is kept, less what other users had.
	if fi, err := os.Stat(filepath.Join(ws, "exec.sh")); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("exec.sh mode = %v, %v; want 0750 (0755 without others)", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(ws, "big.txt")); !os.IsNotExist(err) {
		t.Errorf("big.txt exists after refused write")
	}
	// Atomic: no temporary files left anywhere.
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
	// A symlink inside the workspace is not replaced by a write.
	_, err := run(r, "write_file", m{"path": "link_in", "content": "via link"})
	if err == nil || !strings.Contains(err.Error(), "is a symbolic link (to hello.txt); write to the file it points to instead") {
		t.Errorf("write through link: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "link_in")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link_in replaced: %v %v", fi, err)
	}
}

func TestEditFile(t *testing.T) {
	w, r, _ := fixture(t, Limits{WriteBytes: 200})
	ws := w.dirs[0]
	must(t, os.WriteFile(filepath.Join(ws, "code.go"), []byte("package x\n\nfunc A() {\n\treturn 1\n}\n\nfunc B() {\n\treturn 1\n}\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(ws, "bin.dat"), []byte("a\x00b"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("y", 201)), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "grow.txt"), []byte("z"), 0o644))
	runCases(t, r, []fileCase{
		{name: "not unique", tool: "edit_file", args: m{"path": "code.go", "old_text": "\treturn 1\n", "new_text": "\treturn 2\n"}, wantErr: "old_text matches 2 times; include more surrounding lines"},
		{name: "missing", tool: "edit_file", args: m{"path": "code.go", "old_text": "func C()", "new_text": ""}, wantErr: "old_text not found; read the file"},
		{name: "whitespace hint", tool: "edit_file", args: m{"path": "code.go", "old_text": "func A() {\n    return 1", "new_text": ""}, wantErr: "matches when whitespace is ignored"},
		{name: "unique", tool: "edit_file", args: m{"path": "code.go", "old_text": "func B() {\n\treturn 1", "new_text": "func B() {\n\treturn 2"}, want: "replaced 1 occurrence at line 7"},
		{name: "empty old", tool: "edit_file", args: m{"path": "code.go", "old_text": "", "new_text": "x"}, wantErr: "old_text is empty"},
		{name: "missing file", tool: "edit_file", args: m{"path": "nope.go", "old_text": "a", "new_text": "b"}, wantErr: "no such file"},
		{name: "binary", tool: "edit_file", args: m{"path": "bin.dat", "old_text": "a", "new_text": "b"}, wantErr: "binary file"},
		{name: "too big", tool: "edit_file", args: m{"path": "big.txt", "old_text": "y", "new_text": "b"}, wantErr: "larger than the 200 byte limit"},
		{name: "result too big", tool: "edit_file", args: m{"path": "grow.txt", "old_text": "z", "new_text": strings.Repeat("z", 201)}, wantErr: "would be 201 bytes"},
		{name: "missing new_text", tool: "edit_file", args: m{"path": "code.go", "old_text": "x"}, wantErr: "missing required argument(s): new_text"},
	})
	got, _ := os.ReadFile(filepath.Join(ws, "code.go"))
	if want := "package x\n\nfunc A() {\n\treturn 1\n}\n\nfunc B() {\n\treturn 2\n}\n"; string(got) != want {
		t.Fatalf("code.go = %q, want %q", got, want)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "code.go")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode changed to %v", fi.Mode())
	}
	if names := listDir(t, ws); slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, ".tmp-") }) {
		t.Errorf("temporary files left: %v", names)
	}
}

func TestListFiles(t *testing.T) {
	w, r, _ := fixture(t, Limits{ListItems: 5})
	ws := w.dirs[0]
	must(t, os.MkdirAll(filepath.Join(ws, "many"), 0o755))
	for i := range 20 {
		must(t, os.WriteFile(filepath.Join(ws, "many", fmt.Sprintf("f%02d", i)), nil, 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(ws, "emptydir"), 0o755))
	runCases(t, r, []fileCase{
		{name: "subdir", tool: "list_files", args: m{"path": "sub"}, want: "sub/ (paths below are relative to it):\ndeep/"},
		{name: "recursive", tool: "list_files", args: m{"path": "sub", "recursive": true}, want: "deep/\ndeep/note.md"},
		{name: "bounded", tool: "list_files", args: m{"path": "many"}, want: "f00\nf01\nf02\nf03\nf04\n[truncated at 5 entries"},
		{name: "bounded recursive", tool: "list_files", args: m{"recursive": true}, want: "[truncated at 5 entries"},
		{name: "empty", tool: "list_files", args: m{"path": "emptydir"}, want: "(empty directory)"},
		{name: "file", tool: "list_files", args: m{"path": "hello.txt"}, wantErr: "not a directory; use read_file"},
		{name: "missing", tool: "list_files", args: m{"path": "nope"}, wantErr: "no such file or directory"},
	})
	// The recursive walk does not follow symlinked directories out.
	_, r2, _ := fixture(t, Limits{})
	got, err := run(r2, "list_files", m{"recursive": true})
	must(t, err)
	want := "hello.txt\nlink_abs\nlink_dir\nlink_in\nlink_out\nlink_parent\nlink_proc\nsub/\nsub/deep/\nsub/deep/note.md"
	if got != want {
		t.Fatalf("recursive root listing:\n%s\nwant:\n%s", got, want)
	}
	got, err = run(r2, "list_files", m{})
	must(t, err)
	if want := "hello.txt\nlink_abs\nlink_dir\nlink_in\nlink_out\nlink_parent\nlink_proc\nsub/"; got != want {
		t.Fatalf("root listing:\n%s\nwant:\n%s", got, want)
	}
}

func TestFileToolsConstructor(t *testing.T) {
	dir := t.TempDir()
	tools, w, err := FileTools(dir)
	must(t, err)
	defer w.Close()
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); got != "read_file,write_file,edit_file,list_files,delete_file" {
		t.Fatalf("tools = %s", got)
	}
	if _, _, err := FileTools(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("FileTools on a missing dir: want error")
	}
}

// FuzzFilePath feeds arbitrary paths to every file tool and checks that none
// panics, reads the secret beside the workspace, or writes outside it.
func FuzzFilePath(f *testing.F) {
	for _, s := range []string{
		"hello.txt", "../secret.txt", "..", "/", "", ".", "link_out", "link_dir/secret.txt",
		"link_parent/secret.txt", "sub/../../secret.txt", "/proc/self/root/etc/passwd",
		"/proc/self/cwd/../secret.txt", "link_dir/ws/link_dir/secret.txt", "a\x00b", "\xff",
		"sub//deep/./note.md", "~/secret.txt", "..\\secret.txt", "sub/deep/../../../secret.txt",
	} {
		f.Add(s)
	}
	f.Add("/tmp/x/../../etc/passwd")
	f.Fuzz(func(t *testing.T, p string) {
		// A fresh fixture each time: write_file may replace a symlink.
		w, r, parent := fixture(t, Limits{})
		for _, q := range []string{p, filepath.Join(parent, p), filepath.Join(w.dirs[0], p)} {
			fuzzOnePath(t, r, parent, q)
		}
	})
}

func fuzzOnePath(t *testing.T, r *Registry, parent, p string) {
	{
		for _, c := range []struct {
			tool string
			args m
		}{
			{"read_file", m{"path": p}},
			{"list_files", m{"path": p, "recursive": true}},
			{"edit_file", m{"path": p, "old_text": "TOPSECRET", "new_text": "x"}},
			{"write_file", m{"path": p, "content": "pwned"}},
		} {
			got, err := run(r, c.tool, c.args)
			if strings.Contains(got, secret) || (err != nil && strings.Contains(err.Error(), secret)) {
				t.Fatalf("%s(%q) leaked the secret", c.tool, p)
			}
			if c.tool == "edit_file" && err == nil {
				t.Fatalf("edit_file(%q) found TOPSECRET: %q", p, got)
			}
		}
		if got, err := os.ReadFile(filepath.Join(parent, "secret.txt")); err != nil || string(got) != secret {
			t.Fatalf("path %q changed the secret: %q %v", p, got, err)
		}
		if names := listDir(t, parent); len(names) != 2 {
			t.Fatalf("path %q created %v beside the workspace", p, names)
		}
	}
}

// delete_file removes a file, a link (never what it points to) or a
// folder with its contents, and nothing outside the workspace.
func TestDeleteFile(t *testing.T) {
	_, r, parent := fixture(t, Limits{})
	ws := filepath.Join(parent, "ws")
	for _, c := range []struct {
		path string
		gone string
	}{
		{"hello.txt", "hello.txt"},
		{"link_out", "link_out"},
		{"link_dir", "link_dir"},
		{"sub", "sub"},
	} {
		if _, err := run(r, "delete_file", m{"path": c.path}); err != nil {
			t.Fatalf("delete %s: %v", c.path, err)
		}
		if _, err := os.Lstat(filepath.Join(ws, c.gone)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", c.gone, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(parent, "secret.txt")); err != nil || string(b) != secret {
		t.Fatalf("a link's target outside was touched: %v", err)
	}
	for _, p := range []string{"", ".", "..", "../secret.txt", "/etc/passwd", "link_parent/secret.txt", "missing"} {
		if _, err := run(r, "delete_file", m{"path": p}); err == nil {
			t.Errorf("delete_file %q: no error", p)
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "secret.txt")); err != nil {
		t.Fatalf("secret.txt outside the workspace deleted: %v", err)
	}
	if _, err := os.Stat(ws); err != nil {
		t.Fatalf("the workspace itself deleted: %v", err)
	}
}
