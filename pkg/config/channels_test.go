package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeExec makes an executable file (or a plain one) under dir.
func writeExec(t *testing.T, dir, name string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// A [channels.NAME] section: its command resolved to the executable's
// absolute path (absolute, relative to the config file, or found on PATH),
// args and env kept, env values secrets.
func TestChannelPluginSection(t *testing.T) {
	bin := t.TempDir()
	onPath := writeExec(t, bin, "chat-bridge", 0o755)
	dir := t.TempDir()
	rel := writeExec(t, dir, "plugins/relay.py", 0o700)
	abs := writeExec(t, t.TempDir(), "abs-plugin", 0o755)
	text := `
[channels.matrix]
command = "chat-bridge"
args = ["--room", "ops"]
env = { MATRIX_TOKEN = "${TOKEN}" }

[channels.relay]
command = "plugins/relay.py"

[channels.abs_1]
command = "` + abs + `"
`
	cfg, warns, err := Parse("config.toml", []byte(text), dir, mapEnv(map[string]string{"PATH": "relative/dir:" + bin, "TOKEN": "s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warns {
		if strings.HasPrefix(w.Key, "channels") {
			t.Errorf("warning: %v", w)
		}
	}
	m := cfg.Channels["matrix"]
	if m.Command != onPath || strings.Join(m.Args, " ") != "--room ops" || m.Env["MATRIX_TOKEN"] != "s3cret" {
		t.Errorf("matrix: %+v", m)
	}
	if got := cfg.Channels["relay"].Command; got != rel {
		t.Errorf("relay command %q, want %q", got, rel)
	}
	if got := cfg.Channels["abs_1"].Command; got != abs {
		t.Errorf("abs_1 command %q, want %q", got, abs)
	}
	if red := cfg.Redacted(); strings.Contains(red, "s3cret") {
		t.Errorf("the env value shows in the dump:\n%s", red)
	}
}

// Every mistake in a [channels.NAME] section is a problem naming the key
// and its line: a bad or reserved name, a missing command, one that is not
// an executable, bad env names.
func TestChannelPluginProblems(t *testing.T) {
	dir := t.TempDir()
	plain := writeExec(t, dir, "not-exec", 0o644)
	good := writeExec(t, dir, "good", 0o755)
	cases := []struct {
		name, text, key, want string
	}{
		{"upper-case name", "[channels.Matrix]\ncommand = \"" + good + "\"\n", "channels.Matrix", "invalid channel name"},
		{"long name", "[channels." + strings.Repeat("a", 33) + "]\ncommand = \"" + good + "\"\n", "channels." + strings.Repeat("a", 33), "invalid channel name"},
		{"dash", "[channels.my-chat]\ncommand = \"" + good + "\"\n", "channels.my-chat", "invalid channel name"},
		{"built-in name", "[channels.wecom]\ncommand = \"" + good + "\"\n", "channels.wecom", "built-in"},
		{"group word", "[channels.group]\ncommand = \"" + good + "\"\n", "channels.group", "reserved"},
		{"no command", "[channels.chat]\nargs = [\"x\"]\n", "channels.chat.command", "required"},
		{"missing file", "[channels.chat]\ncommand = \"/nonexistent/plugin\"\n", "channels.chat.command", "no such file"},
		{"not executable", "[channels.chat]\ncommand = \"" + plain + "\"\n", "channels.chat.command", "not executable"},
		{"directory", "[channels.chat]\ncommand = \"" + dir + "/\"\n", "channels.chat.command", "directory"},
		{"not on PATH", "[channels.chat]\ncommand = \"no-such-plugin-here\"\n", "channels.chat.command", "not an executable found on PATH"},
		{"bad env name", "[channels.chat]\ncommand = \"" + good + "\"\nenv = { \"A=B\" = \"x\" }\n", "channels.chat.env", "invalid variable name"},
		{"args type", "[channels.chat]\ncommand = \"" + good + "\"\nargs = \"--x\"\n", "channels.chat.args", "array of strings"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := problems(t, c.text, map[string]string{"PATH": dir})
			for _, p := range ps {
				if p.Key == c.key && strings.Contains(p.Reason, c.want) {
					if p.Line == 0 {
						t.Errorf("%s: no line: %+v", c.key, p)
					}
					return
				}
			}
			t.Errorf("want %s: %q; got %+v", c.key, c.want, ps)
		})
	}
}

// A change to [channels] takes a restart.
func TestChannelPluginChangeNeedsRestart(t *testing.T) {
	a, b := Default(), Default()
	a.Channels = map[string]ChannelPlugin{"chat": {Command: "/bin/true", Env: map[string]string{"K": "1"}}}
	b.Channels = map[string]ChannelPlugin{"chat": {Command: "/bin/true", Env: map[string]string{"K": "2"}}}
	if got := strings.Join(RestartKeys(a, b), ","); got != "channels" {
		t.Errorf("RestartKeys = %q", got)
	}
	b.Channels["chat"] = a.Channels["chat"]
	if got := RestartKeys(a, b); len(got) != 0 {
		t.Errorf("same sections: %v", got)
	}
}
