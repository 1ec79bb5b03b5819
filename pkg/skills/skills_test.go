package skills

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"agent/pkg/clock"
)

// fixture is three skills directories, a state file and a fake clock.
type fixture struct {
	t                             *testing.T
	bundled, installed, workspace string
	state                         string
	clk                           *clock.Fake
	bins                          map[string]bool
	goos                          string
	hasEnv                        func(skill, name string) bool
	indexBytes                    int
}

func newFixture(t *testing.T) *fixture {
	d := t.TempDir()
	return &fixture{
		t: t, bundled: filepath.Join(d, "bundled"), installed: filepath.Join(d, "installed"),
		workspace: filepath.Join(d, "workspace"), state: filepath.Join(d, "state", "skills.json"),
		clk: clock.NewFake(time.Time{}), bins: map[string]bool{}, goos: "linux",
	}
}

func (f *fixture) config() Config {
	return Config{
		Bundled: f.bundled, Installed: f.installed, Workspace: f.workspace, StateFile: f.state,
		HasBin: func(n string) bool { return f.bins[n] }, HasEnv: f.hasEnv, GOOS: f.goos,
		IndexBytes: f.indexBytes, Clock: f.clk,
	}
}

func (f *fixture) set() *Set { return New(f.config()) }

// write puts content at dir/rel, creating folders.
func write(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func md(name, desc, extra string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n" + extra + "---\n# " + name + "\n\nInstructions.\n"
}

func names(list []Skill) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Name)
	}
	return out
}

func TestPrecedence(t *testing.T) {
	f := newFixture(t)
	for _, n := range []string{"a", "b", "c"} {
		write(t, f.bundled, n+"/SKILL.md", md(n, "bundled "+n, ""))
	}
	for _, n := range []string{"b", "c"} {
		write(t, f.installed, n+"/SKILL.md", md(n, "installed "+n, ""))
	}
	for _, n := range []string{"c", "d"} {
		write(t, f.workspace, n+"/SKILL.md", md(n, "workspace "+n, ""))
	}
	// A folder whose SKILL.md names another skill of the same directory,
	// a folder without SKILL.md, a dot-folder, and a symlinked folder.
	write(t, f.workspace, "zz-copy/SKILL.md", md("d", "impostor", ""))
	write(t, f.workspace, "empty/README.md", "nothing")
	write(t, f.workspace, ".hidden/SKILL.md", md("hidden", "x", ""))
	outside := t.TempDir()
	write(t, outside, "SKILL.md", md("outside", "x", ""))
	if err := os.Symlink(outside, filepath.Join(f.workspace, "outside")); err != nil {
		t.Fatal(err)
	}

	s := f.set()
	list := s.List()
	if got, want := names(list), []string{"a", "b", "c", "d", "d", "outside"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("List names = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		name    string
		src     Source
		desc    string
		shadows []string
	}{
		{"a", Bundled, "bundled a", nil},
		{"b", Installed, "installed b", []string{"bundled"}},
		{"c", Workspace, "workspace c", []string{"bundled", "installed"}},
		{"d", Workspace, "workspace d", nil},
	} {
		sk, ok := s.Get(tc.name)
		if !ok {
			t.Fatalf("Get(%s) not found", tc.name)
		}
		if sk.Source != tc.src || sk.Description != tc.desc || !reflect.DeepEqual(sk.Shadows, tc.shadows) || !sk.Offered() {
			t.Errorf("Get(%s) = source %v desc %q shadows %v offered %v; want %v %q %v true", tc.name, sk.Source, sk.Description, sk.Shadows, sk.Offered(), tc.src, tc.desc, tc.shadows)
		}
		if !filepath.IsAbs(sk.Dir) || filepath.Base(sk.Dir) != tc.name {
			t.Errorf("Get(%s).Dir = %s", tc.name, sk.Dir)
		}
	}
	if list[4].Err == "" || !strings.Contains(list[4].Err, "duplicate") || filepath.Base(list[4].Dir) != "zz-copy" {
		t.Errorf("duplicate entry = %+v, want an Err about the duplicate in zz-copy", list[4])
	}
	if sk, _ := s.Get("outside"); sk.Offered() || !strings.Contains(sk.Err, "symlink") || sk.Description != "" {
		t.Errorf("a symlinked skill folder was followed: %+v", sk)
	}
	if _, _, err := s.Read("outside"); err == nil {
		t.Error("Read followed a symlinked skill folder")
	}
	if _, ok := s.Get("hidden"); ok {
		t.Error("a dot-folder was taken for a skill")
	}
	if Source(7).String() != "Source(7)" || Workspace.String() != "workspace" {
		t.Error("Source.String")
	}
}

func TestErroredSkillsListedNotOffered(t *testing.T) {
	f := newFixture(t)
	write(t, f.workspace, "bad/SKILL.md", "---\nname: [oops\n---\n")
	write(t, f.workspace, "badname/SKILL.md", "---\nname: \"bad name\"\n---\n")
	write(t, f.workspace, "ok/SKILL.md", md("ok", "fine", ""))
	write(t, f.installed, "bad/SKILL.md", md("bad", "would be fine", ""))
	if err := os.MkdirAll(filepath.Join(f.workspace, "link"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(f.workspace, "link", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.workspace, "fifo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(f.workspace, "fifo", "SKILL.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := f.set()
	byName := map[string]Skill{}
	for _, sk := range s.List() {
		byName[sk.Name] = sk
	}
	for _, n := range []string{"bad", "bad name", "link", "fifo"} {
		sk, ok := byName[n]
		if !ok || sk.Err == "" || sk.Offered() {
			t.Errorf("%s: %+v, want listed with an Err", n, sk)
		}
	}
	if sk := byName["bad"]; sk.Source != Workspace || !reflect.DeepEqual(sk.Shadows, []string{"installed"}) {
		t.Errorf("a broken workspace skill must still hide the installed one: %+v", sk)
	}
	if got := s.Index(); strings.Contains(got, "bad") || !strings.Contains(got, "- ok: fine") {
		t.Errorf("Index = %q", got)
	}
	if _, _, err := s.Read("bad"); err == nil || !strings.Contains(err.Error(), "unusable") {
		t.Errorf("Read(bad) err = %v", err)
	}
}

func TestRequirements(t *testing.T) {
	f := newFixture(t)
	f.bins["jq"] = true
	f.hasEnv = func(skill, name string) bool { return skill == "env-ok" && name == "KEY" }
	for name, extra := range map[string]string{
		"plain":     "",
		"jq":        "requires: {bins: [jq]}\n",
		"rg":        "requires: {bins: [jq, rg]}\n",
		"any":       "metadata: {openclaw: {requires: {anyBins: [docker, podman]}}}\n",
		"any-ok":    "metadata: {openclaw: {requires: {anyBins: [podman, jq]}}}\n",
		"env":       "metadata:\n  clawdbot:\n    requires:\n      env: [KEY]\n",
		"env-ok":    "requires: {env: [KEY]}\n",
		"mac":       "metadata: {\"openclaw\": {\"os\": [\"darwin\"]}}\n",
		"linux":     "os: [darwin, linux]\n",
		"config":    "metadata: {openclaw: {requires: {config: [browser.enabled]}}}\n",
		"win":       "os: [win32]\n",
		"slash-bin": "requires: {bins: [/bin/sh]}\n",
	} {
		write(t, f.workspace, name+"/SKILL.md", md(name, "d", extra))
	}
	s := f.set()
	want := map[string][]string{
		"plain":     nil,
		"jq":        nil,
		"rg":        {"binary rg"},
		"any":       {"one of binaries docker, podman"},
		"any-ok":    nil,
		"env":       {"environment variable KEY"},
		"env-ok":    nil,
		"mac":       {"os darwin (this is linux)"},
		"linux":     nil,
		"config":    {"config key browser.enabled (not supported here)"},
		"win":       {"os win32 (this is linux)"},
		"slash-bin": {"binary /bin/sh"},
	}
	for name, miss := range want {
		sk, ok := s.Get(name)
		if !ok {
			t.Fatalf("%s not found", name)
		}
		if !reflect.DeepEqual(sk.Missing, miss) || sk.Offered() != (miss == nil) {
			t.Errorf("%s: Missing = %q offered %v, want %q", name, sk.Missing, sk.Offered(), miss)
		}
	}
	idx := s.Index()
	for name, miss := range want {
		if got := strings.Contains(idx, "- "+name+":"); got != (miss == nil) {
			t.Errorf("Index lists %s: %v, want %v\n%s", name, got, miss == nil, idx)
		}
	}
	if _, _, err := s.Read("rg"); err == nil || !strings.Contains(err.Error(), "missing binary rg") {
		t.Errorf("Read(rg) err = %v", err)
	}

	// Windows is spelled win32 in skills.
	f.goos = "windows"
	if sk, _ := f.set().Get("win"); !sk.Offered() {
		t.Errorf("win on windows: %+v", sk)
	}
	// The default HasBin never looks at a path.
	if sandboxHasBin("/bin/sh") || sandboxHasBin("../sh") || sandboxHasBin("") {
		t.Error("sandboxHasBin accepted a path")
	}

	// A binary installed later is noticed within a minute, without a
	// change to any SKILL.md.
	f.goos = "linux"
	s = f.set()
	if sk, _ := s.Get("rg"); sk.Offered() {
		t.Fatal("rg offered before installing it")
	}
	f.bins["rg"] = true
	f.clk.Advance(2 * time.Second)
	if sk, _ := s.Get("rg"); sk.Offered() {
		t.Fatal("requirements re-evaluated too often")
	}
	f.clk.Advance(time.Minute)
	if sk, _ := s.Get("rg"); !sk.Offered() {
		t.Errorf("rg not offered a minute after installing it: %+v", sk)
	}
}

func TestSetEnabled(t *testing.T) {
	f := newFixture(t)
	write(t, f.bundled, "a/SKILL.md", md("a", "alpha", ""))
	write(t, f.bundled, "b/SKILL.md", md("b", "beta", ""))
	s := f.set()
	if err := s.SetEnabled("a", false); err != nil {
		t.Fatal(err)
	}
	if sk, _ := s.Get("a"); !sk.Disabled || sk.Offered() {
		t.Errorf("a after disabling: %+v", sk)
	}
	if idx := s.Index(); strings.Contains(idx, "- a:") || !strings.Contains(idx, "- b: beta") {
		t.Errorf("Index = %q", idx)
	}
	if _, _, err := s.Read("a"); err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("Read(a) err = %v", err)
	}

	// A new Set (a restart) reads the state file.
	s2 := f.set()
	if sk, _ := s2.Get("a"); !sk.Disabled {
		t.Error("disabled state not persisted")
	}
	if err := s2.SetEnabled("a", true); err != nil {
		t.Fatal(err)
	}
	if sk, _ := s2.Get("a"); sk.Disabled || !sk.Offered() {
		t.Errorf("a after enabling: %+v", sk)
	}
	// The first Set notices the file changed, once its clock moves.
	f.clk.Advance(time.Second)
	if sk, _ := s.Get("a"); sk.Disabled {
		t.Error("first Set did not reread the state file")
	}
	if err := s.SetEnabled("nope", false); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetEnabled(nope) = %v, want ErrNotFound", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(f.state))
	if len(entries) != 1 {
		t.Errorf("state folder holds %d entries, want only the state file", len(entries))
	}

	cfg := f.config()
	cfg.StateFile = ""
	if err := New(cfg).SetEnabled("a", false); err == nil {
		t.Error("SetEnabled without a state file succeeded")
	}

	// A corrupt state file is reported, and SetEnabled rewrites it.
	write(t, filepath.Dir(f.state), filepath.Base(f.state), "{not json")
	s3 := f.set()
	if err := s3.SetEnabled("b", false); err != nil {
		t.Fatal(err)
	}
	if sk, _ := f.set().Get("b"); !sk.Disabled {
		t.Error("b not disabled after rewriting a corrupt state file")
	}
}

func TestHotReload(t *testing.T) {
	f := newFixture(t)
	write(t, f.workspace, "a/SKILL.md", md("a", "first", ""))
	s := f.set()
	if sk, _ := s.Get("a"); sk.Description != "first" {
		t.Fatalf("a = %+v", sk)
	}
	write(t, f.workspace, "a/SKILL.md", md("a", "second version", ""))
	write(t, f.workspace, "b/SKILL.md", md("b", "new", ""))
	if got := names(s.List()); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("rescanned before a second passed: %v", got)
	}
	f.clk.Advance(time.Second)
	if sk, _ := s.Get("a"); sk.Description != "second version" {
		t.Errorf("change not noticed: %+v", sk)
	}
	if got := names(s.List()); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("added skill not noticed: %v", got)
	}
	if err := os.RemoveAll(filepath.Join(f.workspace, "a")); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(1500 * time.Millisecond)
	if got := names(s.List()); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("removed skill still listed: %v", got)
	}
	if !strings.Contains(s.Index(), "- b: new") {
		t.Errorf("Index = %q", s.Index())
	}
	// Same size, new mtime: still noticed.
	write(t, f.workspace, "b/SKILL.md", md("b", "NEW", ""))
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(f.workspace, "b/SKILL.md"), later, later); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Second)
	if sk, _ := s.Get("b"); sk.Description != "NEW" {
		t.Errorf("same-size change not noticed: %+v", sk)
	}
}

func TestIndexBudget(t *testing.T) {
	if got := New(Config{Clock: clock.NewFake(time.Time{})}).Index(); got != "" {
		t.Errorf("Index with no skills = %q", got)
	}
	for _, n := range []int{20, 200} {
		f := newFixture(t)
		for i := range n {
			name := fmt.Sprintf("skill-%03d", i)
			write(t, f.workspace, name+"/SKILL.md", md(name, strings.Repeat("word ", 50)+name, ""))
		}
		for _, budget := range []int{0, 100000, 4096, 2000, 1000, 500, 200, 150, 100, 20} {
			f.indexBytes = budget
			idx := f.set().Index()
			limit := budget
			if budget == 0 {
				limit = defaultIndex
			}
			if len(idx) > limit {
				t.Errorf("%d skills, budget %d: index is %d bytes", n, budget, len(idx))
			}
			if idx == "" {
				if limit >= len(indexHead)+60 {
					t.Errorf("%d skills, budget %d: empty index", n, budget)
				}
				continue
			}
			if !strings.HasPrefix(idx, indexHead) {
				t.Errorf("index does not start with the heading: %q", idx)
			}
			listed := strings.Count(idx, "\n- skill-")
			more := 0
			if _, tail, ok := strings.Cut(idx, "- ... and "); ok {
				fmt.Sscanf(tail, "%d more", &more)
			}
			if listed+more != n {
				t.Errorf("%d skills, budget %d: %d listed + %d more", n, budget, listed, more)
			}
			for i := 1; i < listed; i++ { // sorted, the first ones kept
				if !strings.Contains(idx, fmt.Sprintf("- skill-%03d", i)) {
					t.Errorf("budget %d: skill-%03d missing before the cut", budget, i)
				}
			}
			t.Logf("%d skills, budget %d: %d bytes, %d listed, %d more", n, budget, len(idx), listed, more)
		}
	}
	// Shortened descriptions are tried before dropping them.
	f := newFixture(t)
	for i := range 5 {
		name := fmt.Sprintf("s%d", i)
		write(t, f.workspace, name+"/SKILL.md", md(name, strings.Repeat("x", 250), ""))
	}
	f.indexBytes = len(indexHead) + 5*(len("- s0: \n")+80)
	idx := f.set().Index()
	if !strings.Contains(idx, "- s4: xxx") || !strings.Contains(idx, "...\n") || len(idx) > f.indexBytes {
		t.Errorf("shortened index = %q", idx)
	}
}

func TestRead(t *testing.T) {
	f := newFixture(t)
	dir := filepath.Join(f.workspace, "tool")
	write(t, dir, "SKILL.md", md("tool", "a tool", ""))
	write(t, dir, "scripts/run.sh", "#!/bin/sh\necho hi\n")
	write(t, dir, "references/api.md", "api")
	write(t, dir, ".git/config", "secret")
	deep := "d1/d2/d3/d4/d5/d6/d7/d8/d9/deep.txt"
	write(t, dir, deep, "too deep")
	write(t, dir, "d1/d2/d3/d4/d5/d6/d7/ok.txt", "depth 8")
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "passwd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "references", "etc")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := f.set()
	text, files, err := s.Read("tool")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "Instructions.") {
		t.Errorf("text = %q", text)
	}
	var paths []string
	for _, fl := range files {
		paths = append(paths, fl.Path)
	}
	want := []string{"SKILL.md", "d1/d2/d3/d4/d5/d6/d7/ok.txt", "references/api.md", "scripts/run.sh"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("files = %v, want %v", paths, want)
	}
	if files[3].Size != int64(len("#!/bin/sh\necho hi\n")) {
		t.Errorf("size = %d", files[3].Size)
	}
	if _, _, err := s.Read("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read(nope) = %v, want ErrNotFound", err)
	}

	// A big SKILL.md is cut with a notice; more than 200 files are cut too.
	big := filepath.Join(f.workspace, "big")
	write(t, big, "SKILL.md", md("big", "big", "")+strings.Repeat("x", 70<<10))
	for i := range 250 {
		write(t, big, fmt.Sprintf("assets/f%03d", i), "x")
	}
	f.clk.Advance(time.Second)
	text, files, err = s.Read("big")
	if err != nil {
		t.Fatal(err)
	}
	if len(text) > maxSkillFile+100 || !strings.HasSuffix(text, "[SKILL.md truncated: larger than 64 KiB]") {
		t.Errorf("big text: %d bytes, ends %q", len(text), text[len(text)-60:])
	}
	if len(files) != maxFiles {
		t.Errorf("big: %d files listed, want %d", len(files), maxFiles)
	}
}

func TestManySkillsBounded(t *testing.T) {
	f := newFixture(t)
	for i := range maxSkillsPerDir + 5 {
		name := fmt.Sprintf("s%03d", i)
		write(t, f.bundled, name+"/SKILL.md", "# "+name+"\n")
	}
	if got := len(f.set().List()); got != maxSkillsPerDir {
		t.Errorf("%d skills listed, want %d", got, maxSkillsPerDir)
	}
}
