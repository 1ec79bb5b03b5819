package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"agent/pkg/config"
	"agent/pkg/customtool"
)

func writeSkill(t *testing.T, dir, name, front string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte("---\nname: "+name+"\ndescription: Does "+name+".\n"+front+"---\n# "+name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSkillsCheck(t *testing.T) {
	e := baseEnv(t, "", nil)
	e.Config.Skills.BundledDir = filepath.Join(t.TempDir(), "none")
	if r := e.checkSkills(context.Background()); r.Level != OK || !strings.Contains(r.Detail, "no skills") {
		t.Fatalf("no skills: %+v", r)
	}
	ws := filepath.Join(e.Config.Agent.Workspace, "skills")
	writeSkill(t, ws, "notes", "")
	writeSkill(t, ws, "weather", "metadata:\n  openclaw:\n    requires:\n      bins: [no-such-binary-here]\n      env: [WEATHER_KEY]\n")
	writeSkill(t, e.Config.Skills.InstalledDir, "notes", "")
	fifo := filepath.Join(t.TempDir(), "fifo.key")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Config.Skills.Entries = map[string]config.SkillEntry{"notes": {Files: map[string]string{"/secrets/n.key": "/nonexistent/n.key", "/secrets/f.key": fifo}}}
	r := e.checkSkills(context.Background())
	for _, want := range []string{"1 offered: notes", "weather (missing binary no-such-binary-here, environment variable WEATHER_KEY)", "notes: credential file unreadable", "fifo.key is not a regular file", "index "} {
		if !strings.Contains(r.Detail, want) {
			t.Errorf("detail lacks %q: %s", want, r.Detail)
		}
	}
	if r.Level != Warn || !strings.Contains(r.Fix, "[skills.entries.weather] env") || !strings.Contains(r.Fix, "install the program") {
		t.Fatalf("check: %+v", r)
	}
}

func TestCustomToolsCheck(t *testing.T) {
	e := baseEnv(t, "", nil)
	if r := e.checkCustomTools(context.Background()); r.Level != OK || r.Detail != "none created" {
		t.Fatalf("none: %+v", r)
	}
	st, err := customtool.OpenStore(filepath.Join(e.Config.Agent.Workspace, "custom_tools"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ver := customtool.Version{Description: "d", Parameters: []byte(`{"type":"object"}`), Code: "print(1)", Language: "python"}
	if _, _, err := st.Save("live_one", "wecom:boss", ver, func(m *customtool.Meta) error { m.Live = m.Latest; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Save("waiting", "wecom:alice", ver, func(m *customtool.Meta) error { m.Pending = m.Latest; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(e.Config.Agent.Workspace, "custom_tools", "broken"), 0o750); err != nil {
		t.Fatal(err)
	}
	r := e.checkCustomTools(context.Background())
	if r.Level != Warn || !strings.Contains(r.Detail, "1 live; waiting for approval: waiting v1 by wecom:alice") || !strings.Contains(r.Fix, "agentctl tools approve") ||
		!strings.Contains(r.Detail, "custom_tools/broken is damaged") {
		t.Fatalf("check: %+v", r)
	}
}
