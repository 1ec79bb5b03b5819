package config

import (
	"errors"
	"strings"
	"testing"
)

func TestErrorFormat(t *testing.T) {
	e := &Error{File: "config.toml", Problems: []Problem{
		{Key: "llm.timeout", Reason: `invalid duration "abc"`, Line: 12},
		{Key: "voice.token", Reason: "required"},
		{Reason: "invalid TOML: bare keys cannot contain '!'", Line: 3},
	}}
	want := "config.toml:12: llm.timeout: invalid duration \"abc\"\n" +
		"config.toml: voice.token: required\n" +
		"config.toml:3: invalid TOML: bare keys cannot contain '!'"
	if got := e.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	if got := (&Error{File: "c.toml"}).Error(); got != "c.toml: invalid configuration" {
		t.Errorf("empty Error() = %q", got)
	}
	w := Warning{File: "config.toml", Key: "llm.api_kye", Message: "unknown key", Line: 7}
	if got := w.String(); got != "config.toml:7: llm.api_kye: unknown key" {
		t.Errorf("Warning.String() = %q", got)
	}
	if got := (Warning{Key: "k", Message: "m", Line: 2}).String(); got != "line 2: k: m" {
		t.Errorf("Warning without file = %q", got)
	}
}

// The example from the brief, end to end.
func TestErrorMessageExample(t *testing.T) {
	text := strings.Repeat("\n", 10) + "[llm]\ntimeout = \"abc\"\n"
	_, _, err := Parse("config.toml", []byte(text), t.TempDir(), nil)
	if err == nil || err.Error() != `config.toml:12: llm.timeout: invalid duration "abc"` {
		t.Errorf("error = %v", err)
	}
}

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		name string
		toml string
		line int
	}{
		{"unclosed string", "[agent]\nname = \"agent\nworkspace = \"w\"", 2},
		{"missing value", "[agent]\n\n\nname =\n", 4},
		{"bad table header", "[agent\nname = \"x\"", 2},
		{"duplicate key", "[llm]\nmodel = \"a\"\nmodel = \"b\"", 3},
		{"duplicate table", "[llm]\n[agent]\n[llm]", 3},
		{"invalid escape", "[agent]\nname = \"\\q\"", 2},
		{"text after value", "[agent]\nname = \"a\" extra", 2},
		{"bare key character", "[agent]\nna!me = 1", 2},
		{"invalid UTF-8", "[agent]\nname = \"\xff\"", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := problems(t, tt.toml, nil)
			if len(ps) != 1 {
				t.Fatalf("problems = %+v, want one", ps)
			}
			if ps[0].Line != tt.line || !strings.HasPrefix(ps[0].Reason, "invalid TOML: ") {
				t.Errorf("problem = %+v, want line %d and an \"invalid TOML\" reason", ps[0], tt.line)
			}
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	text := `top = 1
name = "x"
[agent]
nmae = "x"
Name = "y"
max-tool-iterations = 5
api_key = "sk-wrong-place"
[llm]
api_kye = "k"
apikey_file = "f"
[llms]
x = 1
[mcp_servers.a]
command = "x"
comand = "y"
`
	_, warns, _ := mustParse(t, text, nil)
	want := []struct {
		key  string
		line int
		msg  string
	}{
		{"top", 1, "unknown key, ignored"},
		{"name", 2, `did you mean "agent.name"?`},
		{"agent.nmae", 4, `did you mean "agent.name"?`},
		{"agent.Name", 5, `did you mean "agent.name"?`},
		{"agent.max-tool-iterations", 6, `did you mean "agent.max_tool_iterations"?`},
		{"agent.api_key", 7, `did you mean "llm.api_key"?`},
		{"llm.api_kye", 9, `did you mean "llm.api_key"?`},
		{"llm.apikey_file", 10, `did you mean "llm.api_key_file"?`},
		{"llms", 11, `did you mean "llm"?`},
		{"mcp_servers.a.comand", 15, `did you mean "mcp_servers.a.command"?`},
	}
	var got []Warning
	for _, w := range warns {
		if w.Key != "llm.api_key" { // openai without a key
			got = append(got, w)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("warnings:\n%swant %d", warningsString(got), len(want))
	}
	for i, w := range want {
		if got[i].Key != w.key || got[i].Line != w.line || !strings.Contains(got[i].Message, w.msg) || got[i].File != "config.toml" {
			t.Errorf("warning %d = %v, want %s at line %d: ...%s", i, got[i], w.key, w.line, w.msg)
		}
	}
}

func TestUnknownKeysCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("[agent]\n")
	for i := range maxUnknownWarnings + 30 {
		b.WriteString("zz")
		b.WriteString(strings.Repeat("q", i+1))
		b.WriteString(" = 1\n")
	}
	_, warns, _ := mustParse(t, b.String(), map[string]string{})
	if len(warns) != maxUnknownWarnings+2 { // + the summary + llm.api_key
		t.Errorf("got %d warnings, want %d", len(warns), maxUnknownWarnings+2)
	}
	if w, ok := findWarning(warns, ""); !ok || !strings.Contains(w.Message, "30 more unknown keys") {
		t.Errorf("no summary warning: %v", w)
	}
}

// TestRenames exercises the deprecation machinery with a made-up rename;
// the real table is empty.
func TestRenames(t *testing.T) {
	renames := []rename{{Old: "llm.key", New: "llm.api_key"}, {Old: "agent.tz", New: "agent.timezone"}}
	parseR := func(text string) (*Config, []Warning, error) {
		return parse("config.toml", []byte(text), t.TempDir(), nil, renames)
	}

	cfg, warns, err := parseR("[llm]\nkey = \"sk-old\"\n[agent]\ntz = \"Asia/Shanghai\"")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.APIKey != "sk-old" || cfg.Agent.Timezone != "Asia/Shanghai" {
		t.Errorf("old keys not honoured: api_key %q timezone %q", cfg.LLM.APIKey, cfg.Agent.Timezone)
	}
	if w, ok := findWarning(warns, "llm.key"); !ok || w.Line != 2 || !strings.Contains(w.Message, "renamed to llm.api_key") {
		t.Errorf("deprecation warning: %s", warningsString(warns))
	}

	// Problems with the value point at the old key's line.
	_, _, err = parseR("[agent]\n\ntz = \"Nowhere/Else\"")
	if err == nil || !strings.Contains(err.Error(), "config.toml:3: agent.timezone: unknown time zone") {
		t.Errorf("problem under an old name: %v", err)
	}

	// Both names set.
	_, _, err = parseR("[llm]\nkey = \"a\"\napi_key = \"b\"")
	if err == nil || !strings.Contains(err.Error(), "config.toml:2: llm.key: deprecated name of llm.api_key, and both are set") {
		t.Errorf("both names: %v", err)
	}

	// The new section does not exist yet, or is not a table.
	renames = []rename{{Old: "agent.listen", New: "server.listen"}}
	cfg, _, err = parseR("[agent]\nlisten = \"127.0.0.1:9\"")
	if err != nil || cfg.Server.Listen != "127.0.0.1:9" {
		t.Errorf("rename into a missing section: %v %v", cfg, err)
	}
	_, _, err = parseR("server = 1\n[agent]\nlisten = \"127.0.0.1:9\"")
	if err == nil || !strings.Contains(err.Error(), "server is not a table") {
		t.Errorf("rename into a non-table: %v", err)
	}
}

func TestErrorsAs(t *testing.T) {
	_, _, err := Parse("c.toml", []byte("[agent]\nmax_tool_iterations = 0"), t.TempDir(), nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.File != "c.toml" || ce.Problems[0].Line != 2 {
		t.Errorf("errors.As: %#v", err)
	}
}

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"kitten", "sitting", 3}, {"api_kye", "api_key", 2}, {"name", "nmae", 2}, {"abc", "abc", 0},
		{"abcdefgh", "a", 3},
	}
	for _, tt := range tests {
		if got := levenshtein(tt.a, tt.b, 3); got != tt.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestLineFinder(t *testing.T) {
	text := "# c\n[agent]\nname = \"x\"\n\n[mcp_servers.\"a,b\"]\ncommand = \"x\"\n[mcp_servers.ok]\nenv = { K = \"v\" }\n"
	lf := newLineFinder(text)
	tests := []struct {
		path []string
		want int
	}{
		{[]string{"agent", "name"}, 3},
		{[]string{"agent"}, 2},
		{[]string{"agent", "missing"}, 2},              // falls back to the table
		{[]string{"mcp_servers", "a,b", "command"}, 0}, // cannot be probed; no ancestor line either
		{[]string{"mcp_servers", "ok", "env", "K"}, 8},
		{[]string{"nothing"}, 0},
	}
	for _, tt := range tests {
		if got := lf.line(tt.path); got != tt.want {
			t.Errorf("line(%q) = %d, want %d", tt.path, got, tt.want)
		}
	}
}
