package skills

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"---\nname: a\ndescription: b\n---\nbody\n",
		"---\nmetadata: {\"openclaw\": {\"requires\": {\"bins\": [\"jq\"], \"anyBins\": [\"a\", \"b\"]}, \"os\": [\"linux\"]}}\n---\n",
		"---\nmetadata:\n  clawdbot:\n    requires:\n      env: [X]\n      config: [a.b]\nrequires: {bins: jq}\nos: [darwin]\n---\n",
		"---\nmetadata: '{\"agent\": {\"os\": \"windows\"}}'\n---\n",
		"---\na: &a [x, x]\nb: &b [*a, *a]\nrequires: {bins: *b}\n---\n",
		"# heading\n\nfirst line\n",
		"\uFEFF---\r\n---\r\n",
		"---\n!!binary x: y\n---\n",
		"---\nname: !!int 12\ndescription: !!float .inf\n---\n",
		"---\n? [a, b]\n: c\n---\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxSkillFile {
			data = data[:maxSkillFile]
		}
		p := parse(data, "folder")
		if p.Err == "" && !validName(p.Name) {
			t.Fatalf("name %q accepted", p.Name)
		}
		if len(p.Err) > maxErr+len("…") {
			t.Fatalf("Err of %d bytes", len(p.Err))
		}
		if len(p.Description) > maxDesc || !utf8.ValidString(p.Description) || strings.ContainsAny(p.Description, "\n\r") {
			t.Fatalf("description %q", p.Description)
		}
		if len(p.Name) > 100 || strings.ContainsAny(p.Name, "\n\r") {
			t.Fatalf("name %q", p.Name)
		}
		for _, l := range [][]string{p.Requires.Bins, p.Requires.AnyBins, p.Requires.Env, p.Requires.Config, p.Requires.OS} {
			if len(l) > len(metadataKeys)*maxReqItems+maxReqItems {
				t.Fatalf("requirement list of %d items", len(l))
			}
			for _, v := range l {
				if v == "" || len(v) > maxReqItem {
					t.Fatalf("requirement item %q", v)
				}
			}
		}
	})
}

func FuzzInstall(f *testing.F) {
	okMD := ent{name: "SKILL.md", body: md("fuzz", "d", "")}
	for _, seed := range [][]byte{
		tarball(f, false, okMD, ent{name: "scripts/a.sh", body: "echo", mode: 0o755}),
		tarball(f, true, dir("w/"), ent{name: "w/SKILL.md", body: "text"}, ent{name: "w/x/y", body: "z"}),
		tarball(f, false, okMD, ent{name: "../x", body: "x"}),
		tarball(f, false, okMD, ent{name: "l", typ: '2', link: "/etc/passwd"}),
		tarball(f, false, okMD, ent{name: "a", body: "1"}, ent{name: "a/b", body: "2"}),
		tarball(f, true, okMD, dir("./"), dir("./d/")),
		[]byte{0x1f, 0x8b},
		nil,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		installed := filepath.Join(parent, "installed")
		s := New(Config{Installed: installed})
		inst, err := s.Install(bytes.NewReader(data))
		if got := ls(t, parent); !reflect.DeepEqual(got, []string{"installed"}) {
			t.Fatalf("parent holds %v", got)
		}
		top := ls(t, installed)
		if err != nil {
			if len(top) != 0 {
				t.Fatalf("refused (%v) but left %v", err, top)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if !reflect.DeepEqual(top, []string{inst.Name}) || !validName(inst.Name) {
			t.Fatalf("installed %q, folder holds %v", inst.Name, top)
		}
		n := 0
		filepath.WalkDir(installed, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			if !d.Type().IsDir() && !d.Type().IsRegular() {
				t.Fatalf("%s: type %v written", p, d.Type())
			}
			if d.Type().IsRegular() {
				n++
			}
			return nil
		})
		if n != len(inst.Files) {
			t.Fatalf("%d files on disk, %d reported", n, len(inst.Files))
		}
		if _, err := os.Stat(filepath.Join(installed, inst.Name, "SKILL.md")); err != nil {
			t.Fatal(err)
		}
	})
}
