package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"agent/pkg/nativetest"
)

func write(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestPromptSystem(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write(t, filepath.Join(dir, "SOUL.md"), "I am the office assistant.", t0)
	write(t, filepath.Join(dir, "USER.md"), "The user likes tea.", t0)
	p := NewPrompt(dir, nil)
	p.SetSkills(func(_, user string) string {
		if user == "bob" {
			return ""
		}
		return "## Skills\n\n- notes: Keeps notes.\n"
	})
	loc := nativetest.Location(t, "Asia/Shanghai")
	now := time.Date(2026, 3, 2, 1, 30, 0, 0, time.UTC)
	got := p.System(now, loc, "alice prefers mornings")
	for _, want := range []string{
		"I am the office assistant.\n\nThe user likes tea.",
		"The user likes tea.\n\n## Skills\n\n- notes: Keeps notes.\n\n## Relevant memory",
		"## Relevant memory\n\nalice prefers mornings",
		"2026-03-02 09:30:00 Monday (Asia/Shanghai, UTC+08:00)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("system message lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(p.SystemFor(now, loc, "", "wecom", "bob"), "## Skills") {
		t.Error("the skills index is not the caller's")
	}
	if strings.Contains(p.System(now, loc, ""), "Relevant memory") {
		t.Error("empty memory block still has a heading")
	}
}

func TestPromptChangeDetectionAndReload(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	agentMD := filepath.Join(dir, "AGENT.md")
	write(t, agentMD, "rules v1", t0)
	p := NewPrompt(dir, nil)
	now := time.Date(2026, 3, 2, 1, 30, 0, 0, time.UTC)
	if s := p.System(now, nil, ""); !strings.Contains(s, "rules v1") {
		t.Fatalf("got %s", s)
	}
	write(t, agentMD, "rules v2", t0.Add(time.Minute))
	// Within a second of the last check the old text is served...
	if s := p.System(now.Add(500*time.Millisecond), nil, ""); !strings.Contains(s, "rules v1") {
		t.Errorf("checked too early: %s", s)
	}
	// ...after it, the edit is picked up without a reload.
	if s := p.System(now.Add(2*time.Second), nil, ""); !strings.Contains(s, "rules v2") {
		t.Errorf("edit not picked up: %s", s)
	}

	changed, err := p.Reload()
	if err != nil || len(changed) != 0 {
		t.Errorf("Reload with nothing new = %v, %v", changed, err)
	}
	write(t, filepath.Join(dir, "USER.md"), "new user file", t0)
	if err := os.Remove(agentMD); err != nil {
		t.Fatal(err)
	}
	changed, err = p.Reload()
	if err != nil || !slices.Equal(changed, []string{"AGENT.md", "USER.md"}) {
		t.Errorf("Reload = %v, %v", changed, err)
	}
	s := p.System(now.Add(3*time.Second), nil, "")
	if strings.Contains(s, "rules") || !strings.Contains(s, "new user file") {
		t.Errorf("after reload: %s", s)
	}
}

func TestPromptTruncatesHugeFile(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "SOUL.md"), strings.Repeat("é", 100<<10), time.Now())
	s := NewPrompt(dir, nil).System(time.Now(), nil, "")
	if len(s) > maxPromptFile+1024 || !strings.Contains(s, "[SOUL.md truncated") {
		t.Errorf("len %d, tail %q", len(s), s[len(s)-200:])
	}
}
