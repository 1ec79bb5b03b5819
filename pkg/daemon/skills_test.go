package daemon

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/llm/llmtest"
	"agent/pkg/sandbox/sandboxtest"
)

// skillLLM is a scripted model: "GET NAME" calls get_skill, "RUN NAME CMD"
// calls exec with the skill (NAME "-": none), "READ PATH" calls read_file,
// "INDEX" answers with the skills part of its system message; a tool's
// answer is repeated.
func skillLLM(t *testing.T) *llmtest.Server {
	t.Helper()
	return llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		if last.Role != "user" {
			return llmtest.Text("RESULT: " + last.Content)
		}
		f := strings.SplitN(last.Content, " ", 3)
		switch {
		case f[0] == "INDEX":
			sys := r.Messages[0].Content
			i := strings.Index(sys, "## Skills")
			if i < 0 {
				return llmtest.Text("NO INDEX")
			}
			j := strings.Index(sys[i+1:], "\n## ")
			return llmtest.Text(sys[i : i+1+j])
		case f[0] == "READ" && len(f) == 2:
			b, _ := json.Marshal(map[string]string{"path": f[1]})
			return llmtest.Calls(llmtest.Call("read_file", string(b)))
		case f[0] == "GET" && len(f) == 2:
			return llmtest.Calls(llmtest.Call("get_skill", `{"name":"`+f[1]+`"}`))
		case f[0] == "RUN" && len(f) == 3:
			args := map[string]string{"command": f[2]}
			if f[1] != "-" {
				args["skill"] = f[1]
			}
			b, _ := json.Marshal(args)
			return llmtest.Calls(llmtest.Call("exec", string(b)))
		}
		return llmtest.Text("?")
	})
}

func putSkill(t *testing.T, dir, name, front, body string, files map[string]string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Join(p, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "SKILL.md"), []byte("---\nname: "+name+"\ndescription: "+front+"\n---\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(p, n), []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func tarOf(t *testing.T, files map[string]string, links map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, c := range files {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg})
		tw.Write([]byte(c))
	}
	for n, target := range links {
		tw.WriteHeader(&tar.Header{Name: n, Linkname: target, Typeflag: tar.TypeSymlink, Mode: 0o777})
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Skills through the real daemon: precedence bundled < installed <
// workspace, requirement gating (and a reload meeting one), a script run
// through exec with the skill's folder and credentials, hot reload of the
// workspace's skills, and an install that refuses a malicious archive.
func TestSkillsThroughDaemon(t *testing.T) {
	sandboxtest.New(t, nil) // bwrap required
	llmSrv := skillLLM(t)
	dir := sandboxtest.Dir(t)
	bundled := filepath.Join(dir, "bundled")
	putSkill(t, bundled, "weather", "Bundled weather.", "# Weather\nbundled copy\n", nil)
	putSkill(t, bundled, "greet", "Greets people.", "Run {baseDir}/scripts/hi.sh\n", map[string]string{"scripts/hi.sh": "echo hi from greet"})
	putSkill(t, bundled, "needs_bin", "Needs a program.\nmetadata:\n  openclaw:\n    requires:\n      bins: [no-such-program-xyz]", "x\n", nil)
	putSkill(t, bundled, "needs_key", "Needs a key.\nmetadata: {\"openclaw\": {\"requires\": {\"env\": [\"NEEDS_KEY_TOKEN\"]}}}", "x\n", nil)
	// The credential: readable by root only on the host.
	key := filepath.Join(dir, "weather.key")
	if err := os.WriteFile(key, []byte("wk-0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := func(extra string) string {
		return fmt.Sprintf("[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = %q\n[sandbox]\ntimeout = \"20s\"\n[skills]\nbundled_dir = %q\n[skills.entries.weather]\nenv = { UNITS = \"metric\" }\nfiles = { \"/secrets/weather.key\" = %q }\n%s", llmSrv.BaseURL(), bundled, key, extra)
	}
	addr, stop := startDaemonIn(t, dir, conf(""))
	defer stop()
	waitSandbox(t, addr)
	ctx := context.Background()
	c := admin.NewClient(filepath.Join(dir, "var", "agent.sock"))
	ask := func(user, text string) string {
		t.Helper()
		res, err := c.Send(ctx, admin.SendRequest{To: user, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(res.Replies, "\n")
	}

	idx := ask("ops", "INDEX")
	if !strings.Contains(idx, "- greet: Greets people.") || !strings.Contains(idx, "- weather: Bundled weather.") || strings.Contains(idx, "needs_") {
		t.Fatalf("index: %q", idx)
	}
	if got := ask("ops", "GET greet"); !strings.Contains(got, "Skill greet (bundled)") || !strings.Contains(got, "- scripts/hi.sh (18 bytes)") || !strings.Contains(got, "Run /skills/greet/scripts/hi.sh") {
		t.Fatalf("get_skill greet: %q", got)
	}
	if got := ask("ops", "GET needs_bin"); !strings.Contains(got, "cannot be used here: missing binary no-such-program-xyz") {
		t.Fatalf("get_skill of a skill missing a binary: %q", got)
	}

	// Installed beats bundled; a malicious archive changes nothing.
	arc := tarOf(t, map[string]string{"weather/SKILL.md": "---\nname: weather\ndescription: Installed weather.\n---\ninstalled copy\n"}, nil)
	in, err := c.InstallSkill(ctx, bytes.NewReader(arc))
	if err != nil || in.Name != "weather" || len(in.Files) != 1 || len(in.SHA256) != 64 {
		t.Fatalf("install: %+v, %v", in, err)
	}
	for name, bad := range map[string][]byte{
		"traversal": tarOf(t, map[string]string{"evil/SKILL.md": "---\nname: evil\n---\n", "evil/../../escaped.txt": "x"}, nil),
		"symlink":   tarOf(t, map[string]string{"evil/SKILL.md": "---\nname: evil\n---\n"}, map[string]string{"evil/passwd": "/etc/passwd"}),
	} {
		if _, err := c.InstallSkill(ctx, bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s archive: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "var", "skills", "evil")); !os.IsNotExist(err) {
		t.Fatalf("a refused archive left the skill behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "var", "escaped.txt")); !os.IsNotExist(err) {
		t.Fatalf("traversal wrote outside: %v", err)
	}
	if got := ask("ops", "GET weather"); !strings.Contains(got, "(installed)") || !strings.Contains(got, "installed copy") {
		t.Fatalf("installed over bundled: %q", got)
	}

	// The workspace beats both, and is picked up without a restart.
	ws := filepath.Join(dir, "ws", "skills")
	putSkill(t, ws, "weather", "Workspace weather.", "Run scripts/forecast.sh\n", map[string]string{
		"scripts/forecast.sh": "echo \"key=$(cat /secrets/weather.key) units=$UNITS\"; touch /skills/weather/x 2>/dev/null && echo WROTE-SKILL",
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(ask("ops", "INDEX"), "Workspace weather.") {
		if time.Now().After(deadline) {
			t.Fatal("a new workspace skill was not picked up")
		}
		time.Sleep(200 * time.Millisecond)
	}
	got := ask("alice", "RUN weather sh /skills/weather/scripts/forecast.sh")
	if !strings.Contains(got, "key=wk-0123 units=metric") || strings.Contains(got, "WROTE-SKILL") {
		t.Fatalf("skill script: %q", got)
	}
	if got := ask("alice", "RUN weather echo home=$HOME"); !strings.HasSuffix(got, "stdout:\nhome=/tmp") {
		t.Fatalf("a skill run's HOME: %q", got)
	}
	// Without the skill argument nothing of it (or its key) is there.
	if got := ask("alice", "RUN - cat /secrets/weather.key /skills/weather/SKILL.md; echo UNITS=$UNITS"); strings.Contains(got, "wk-0123") || strings.Contains(got, "Workspace weather") || !strings.Contains(got, "UNITS=\n") {
		t.Fatalf("exec without the skill: %q", got)
	}

	// Disabled by the operator: gone from the index, refused.
	if _, err := c.SetSkillEnabled(ctx, "greet", false); err != nil {
		t.Fatal(err)
	}
	if got := ask("ops", "GET greet"); !strings.Contains(got, "cannot be used here: disabled by the operator") {
		t.Fatalf("disabled skill: %q", got)
	}
	list, err := c.SkillsList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, s := range list {
		states[s.Name] = fmt.Sprintf("%s offered=%v disabled=%v missing=%v shadows=%v", s.Source, s.Offered, s.Disabled, s.Missing, s.Shadows)
	}
	if states["weather"] != "workspace offered=true disabled=false missing=[] shadows=[bundled installed]" ||
		states["greet"] != "bundled offered=false disabled=true missing=[] shadows=[]" ||
		!strings.Contains(states["needs_key"], "missing=[environment variable NEEDS_KEY_TOKEN]") {
		t.Fatalf("skills list: %v", states)
	}

	// A reload that gives the skill its variable makes it offered.
	path := filepath.Join(dir, "config.toml")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append(b, []byte("[skills.entries.needs_key]\nenv = { NEEDS_KEY_TOKEN = \"t\" }\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ask("ops", "INDEX"); !strings.Contains(got, "- needs_key: Needs a key.") {
		t.Fatalf("after the reload: %q", got)
	}
}
