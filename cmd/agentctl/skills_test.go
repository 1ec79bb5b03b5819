package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/admin"
	"agent/pkg/skills"
)

// skillsBackend serves the admin API's skills part from a real skill set,
// as the daemon does.
type skillsBackend struct {
	memBackend
	set *skills.Set
}

func (b *skillsBackend) SkillsList(context.Context) ([]admin.SkillInfo, error) {
	var out []admin.SkillInfo
	for _, s := range b.set.List() {
		out = append(out, admin.SkillInfo{Name: s.Name, Source: s.Source.String(), Offered: s.Offered(), Disabled: s.Disabled, Missing: s.Missing, Shadows: s.Shadows})
	}
	return out, nil
}

func (b *skillsBackend) InstallSkill(_ context.Context, r io.Reader) (admin.SkillInstall, error) {
	in, err := b.set.Install(r)
	if errors.Is(err, skills.ErrInvalid) {
		return admin.SkillInstall{}, fmt.Errorf("%w: %v", admin.ErrBadArchive, err)
	}
	out := admin.SkillInstall{Name: in.Name, SHA256: in.SHA256, Replaced: in.Replaced}
	for _, f := range in.Files {
		out.Files = append(out.Files, admin.SkillFile{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
	}
	return out, err
}

func (b *skillsBackend) SetSkillEnabled(_ context.Context, name string, on bool) (admin.SkillInfo, error) {
	if err := b.set.SetEnabled(name, on); err != nil {
		return admin.SkillInfo{}, fmt.Errorf("%w: %v", admin.ErrNotFound, err)
	}
	s, _ := b.set.Get(name)
	return admin.SkillInfo{Name: s.Name, Source: s.Source.String(), Disabled: s.Disabled, Offered: s.Offered()}, nil
}

func TestSkillsCommands(t *testing.T) {
	dir := t.TempDir()
	installed := filepath.Join(dir, "installed")
	b := &skillsBackend{set: skills.New(skills.Config{Installed: installed, StateFile: filepath.Join(dir, "skills.json")})}
	path := serveAdmin(t, b)

	if code, out, _ := agentctl(t, "-config", path, "skills", "list"); code != 0 || !strings.HasPrefix(out, "no skills") {
		t.Fatalf("empty list: %d %q", code, out)
	}
	src := filepath.Join(dir, "src", "notes")
	os.MkdirAll(filepath.Join(src, "scripts"), 0o755)
	skillMD := "---\nname: notes\ndescription: Keeps notes.\n---\n# Notes\n"
	os.WriteFile(filepath.Join(src, "SKILL.md"), []byte(skillMD), 0o644)
	os.WriteFile(filepath.Join(src, "scripts", "add.sh"), []byte("echo added\n"), 0o755)
	code, out, errs := agentctl(t, "-config", path, "skills", "install", src)
	sum := sha256.Sum256([]byte(skillMD))
	if code != 0 || !strings.HasPrefix(out, "installed skill notes\nsha256 ") || !strings.Contains(out, hex.EncodeToString(sum[:])+"        "+fmt.Sprint(len(skillMD))+"  SKILL.md") ||
		!strings.Contains(out, "scripts/add.sh") {
		t.Fatalf("install a folder: %d %q\n%s", code, errs, out)
	}
	if fi, err := os.Stat(filepath.Join(installed, "notes", "scripts", "add.sh")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("installed script: %v %v", fi, err)
	}
	// A folder holding a link out of it is refused, and nothing changes.
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "passwd")); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := agentctl(t, "-config", path, "skills", "install", src); code != 1 || !strings.Contains(errs, "refused") {
		t.Fatalf("install with a symlink: %d %q", code, errs)
	}
	if _, err := os.Lstat(filepath.Join(installed, "notes", "passwd")); !os.IsNotExist(err) {
		t.Fatalf("the link was installed: %v", err)
	}
	if code, out, _ := agentctl(t, "-config", path, "skills", "disable", "notes"); code != 0 || out != "disabled: notes (disabled)\n" {
		t.Fatalf("disable: %d %q", code, out)
	}
	if code, out, _ := agentctl(t, "-config", path, "skills", "list"); code != 0 || !strings.Contains(out, "notes  installed  disabled") {
		t.Fatalf("list: %d %q", code, out)
	}
	if code, out, _ := agentctl(t, "-config", path, "skills", "enable", "notes"); code != 0 || out != "enabled: notes (offered)\n" {
		t.Fatalf("enable: %d %q", code, out)
	}
	if code, _, _ := agentctl(t, "-config", path, "skills", "install", filepath.Join(dir, "missing.tgz")); code != 1 {
		t.Fatalf("missing archive: exit %d", code)
	}
	for _, args := range [][]string{{"skills"}, {"skills", "install"}, {"skills", "frob", "x"}} {
		if code, _, _ := agentctl(t, append([]string{"-config", path}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
