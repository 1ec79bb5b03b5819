package skills

import (
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/invisible"
)

func TestSkillWithZeroWidthAndBidiCharactersIsStripped(t *testing.T) {
	f := newFixture(t)
	body := "---\nname: notes\ndescription: Keeps\u200b notes\u202e.\n---\n# Notes\n\nWrite notes\u2066 to notes.md.\u2069\u200d\nNever\u00ad share them.\r\n"
	write(t, f.workspace, filepath.Join("notes", "SKILL.md"), body)
	counted := 0
	cfg := f.config()
	cfg.Stripped = func(n int) { counted += n }
	s := New(cfg)

	idx := s.Index()
	if !strings.Contains(idx, "notes: Keeps notes.") {
		t.Errorf("index: %q", idx)
	}
	if _, hidden := invisible.Find(idx); hidden {
		t.Errorf("index holds invisible characters: %q", idx)
	}
	text, _, err := s.Read("notes")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "Write notes to notes.md.\nNever share them.\n") {
		t.Errorf("SKILL.md read as %q", text)
	}
	if f, hidden := invisible.Find(text); hidden {
		t.Errorf("SKILL.md read with %v", f)
	}
	if want := 2 + 6; counted != want { // description: 2; body: the same 2 and 4 more
		t.Errorf("counted %d invisible characters, want %d", counted, want)
	}
}
