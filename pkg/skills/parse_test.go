package skills

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParse(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes of 2-byte characters
	for _, tc := range []struct {
		name    string
		in      string
		folder  string
		want    parsed
		wantErr string // substring of Err
	}{
		{
			name:   "plain front matter",
			in:     "---\nname: weather\ndescription: Get the weather.\n---\n# Weather\n\nUse curl.\n",
			folder: "x",
			want:   parsed{Name: "weather", Description: "Get the weather."},
		},
		{
			name:   "openclaw block metadata",
			folder: "todo",
			in: `---
name: todoist
description: "Manage tasks"
metadata:
  openclaw:
    emoji: "✅"
    requires:
      bins: [curl, jq]
      anyBins: [docker, podman]
      env:
        - TODOIST_API_KEY
      config: [browser.enabled]
    os: [linux, darwin]
    install: [{kind: brew}]
---
body`,
			want: parsed{Name: "todoist", Description: "Manage tasks", Requires: Requirements{
				Bins: []string{"curl", "jq"}, AnyBins: []string{"docker", "podman"},
				Env: []string{"TODOIST_API_KEY"}, Config: []string{"browser.enabled"}, OS: []string{"linux", "darwin"},
			}},
		},
		{
			name:   "openclaw flow (JSON) metadata",
			folder: "gh",
			in:     "---\nname: github\ndescription: GitHub via gh\nmetadata: {\"openclaw\": {\"emoji\": \"🐙\", \"requires\": {\"bins\": [\"gh\"]}, \"os\": [\"linux\"]}}\n---\n",
			want:   parsed{Name: "github", Description: "GitHub via gh", Requires: Requirements{Bins: []string{"gh"}, OS: []string{"linux"}}},
		},
		{
			name:   "metadata as a quoted JSON string",
			folder: "gh",
			in:     "---\nname: github\nmetadata: '{\"clawdbot\": {\"requires\": {\"env\": [\"GH_TOKEN\"]}}}'\n---\nUse gh.\n",
			want:   parsed{Name: "github", Description: "Use gh.", Requires: Requirements{Env: []string{"GH_TOKEN"}}},
		},
		{
			name:   "aliases merge",
			folder: "m",
			in: `---
metadata:
  clawdbot: {requires: {bins: [a]}}
  clawdis: {requires: {bins: [b, a]}}
  picoclaw: {requires: {env: [E]}}
  agent: {os: [Windows]}
---
`,
			want: parsed{Name: "m", Requires: Requirements{Bins: []string{"a", "b"}, Env: []string{"E"}, OS: []string{"win32"}}},
		},
		{
			name:   "top-level requires and os, scalar lists",
			folder: "t",
			in:     "---\nname: t\nrequires:\n  bins: jq\n  anyBins: [rg, grep]\n  env: [A]\nos: linux\nunknown: {deep: [1, 2]}\n---\n",
			want:   parsed{Name: "t", Requires: Requirements{Bins: []string{"jq"}, AnyBins: []string{"rg", "grep"}, Env: []string{"A"}, OS: []string{"linux"}}},
		},
		{
			name:   "no front matter: heading name, first line description",
			folder: "folder",
			in:     "\n# notes\n\n## Usage\nTake notes in notes.md.\nSecond line.\n",
			want:   parsed{Name: "notes", Description: "Take notes in notes.md."},
		},
		{
			name:   "heading that is not a name falls back to the folder",
			folder: "weather",
			in:     "# Weather Lookup\n\nAsk wttr.in.\n",
			want:   parsed{Name: "weather", Description: "Ask wttr.in."},
		},
		{
			name:   "front matter name wins over heading",
			folder: "f",
			in:     "---\nname: real\n---\n# heading\ntext\n",
			want:   parsed{Name: "real", Description: "text"},
		},
		{
			name:   "empty front matter, CRLF, BOM",
			folder: "f",
			in:     "\uFEFF---\r\n---\r\nHello.\r\n",
			want:   parsed{Name: "f", Description: "Hello."},
		},
		{
			name:   "multi-line description collapsed",
			folder: "f",
			in:     "---\ndescription: |\n  line one\n  line two\n---\n",
			want:   parsed{Name: "f", Description: "line one line two"},
		},
		{
			name:    "bad YAML",
			folder:  "bad",
			in:      "---\nname: [unclosed\n---\nbody\n",
			want:    parsed{Name: "bad", Description: "body"},
			wantErr: "front matter: yaml",
		},
		{
			name:    "front matter not closed",
			folder:  "open",
			in:      "---\nname: open\ndescription: x\n",
			want:    parsed{Name: "open"},
			wantErr: "no closing",
		},
		{
			name:    "front matter too long",
			folder:  "big",
			in:      "---\n" + strings.Repeat("# comment line\n", 1200) + "---\n",
			want:    parsed{Name: "big"},
			wantErr: "longer than 16 KiB",
		},
		{
			name:    "front matter not a mapping",
			folder:  "seq",
			in:      "---\n- a\n- b\n---\n",
			want:    parsed{Name: "seq"},
			wantErr: "not a mapping",
		},
		{
			name:    "bins of the wrong shape",
			folder:  "w",
			in:      "---\nrequires: {bins: {a: b}}\n---\n",
			want:    parsed{Name: "w"},
			wantErr: "requires.bins: want a list",
		},
		{
			name:    "invalid name",
			folder:  "f",
			in:      "---\nname: \"../../etc\"\n---\n",
			want:    parsed{Name: "../../etc"},
			wantErr: "invalid name",
		},
		{
			name:    "invalid folder name and no other",
			folder:  "has space",
			in:      "just text",
			want:    parsed{Name: "has space", Description: "just text"},
			wantErr: "invalid name",
		},
		{
			name:   "alias used as a scalar",
			folder: "a",
			in:     "---\nx: &b jq\nrequires: {bins: [*b, *b]}\n---\n",
			want:   parsed{Name: "a", Requires: Requirements{Bins: []string{"jq"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parse([]byte(tc.in), tc.folder)
			if tc.wantErr == "" && got.Err != "" || !strings.Contains(got.Err, tc.wantErr) {
				t.Fatalf("Err = %q, want it to contain %q", got.Err, tc.wantErr)
			}
			got.Err = ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parse =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}

	t.Run("long description clipped", func(t *testing.T) {
		got := parse([]byte("---\nname: l\ndescription: "+long+"\n---\n"), "l")
		if len(got.Description) > maxDesc || !strings.HasSuffix(got.Description, "...") || !utf8.ValidString(got.Description) {
			t.Errorf("description %d bytes, valid %v: %q", len(got.Description), utf8.ValidString(got.Description), got.Description)
		}
		got = parse([]byte(long), "l")
		if len(got.Description) > maxDesc || !strings.HasSuffix(got.Description, "...") {
			t.Errorf("body description %d bytes", len(got.Description))
		}
	})
	t.Run("alias bomb", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
		for i := 1; i < 30; i++ {
			b.WriteString("a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " [")
			for j := 0; j < 10; j++ {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString("*a" + strconv.Itoa(i-1))
			}
			b.WriteString("]\n")
		}
		b.WriteString("requires: {bins: *a29}\nmetadata: {openclaw: {requires: {env: *a29}}}\n---\n")
		got := parse([]byte(b.String()), "bomb")
		if got.Err == "" {
			t.Errorf("alias bomb parsed without error: %+v", got.Requires)
		}
	})
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "weather": true, "Todo_list.v2-x": true, "0": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "-x": false, ".x": false, "_x": false, "a b": false,
		"a/b": false, "..": false, "é": false, "a\n": false,
	} {
		if got := validName(name); got != want {
			t.Errorf("validName(%q) = %v, want %v", name, got, want)
		}
	}
}

// Front matter that is not valid YAML but plainly says a name and a
// description (an unquoted colon) is read; one that also gates the skill
// is not, since its requirements cannot be read.
func TestParseLenientFrontMatter(t *testing.T) {
	p := parse([]byte("---\nname: gh-issues\ndescription: Triage GitHub issues with the gh CLI: labels, owners.\n  More on a second line.\nlicense: MIT\n---\n# body\n"), "folder")
	if p.Err != "" || p.Name != "gh-issues" || p.Description != "Triage GitHub issues with the gh CLI: labels, owners. More on a second line." {
		t.Fatalf("lenient: %+v", p)
	}
	p = parse([]byte("---\nname: gh\ndescription: Do x: y\nmetadata:\n  openclaw: {requires: {bins: [gh]}}\n---\n"), "folder")
	if p.Err == "" {
		t.Fatalf("gated skill with broken YAML offered: %+v", p)
	}
}
