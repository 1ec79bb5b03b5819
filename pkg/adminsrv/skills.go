package adminsrv

import (
	"context"
	"errors"
	"fmt"
	"io"

	"agent/pkg/admin"
	"agent/pkg/skills"
)

// agentctl skills: list, install, enable and disable (pkg/skills).

func (b *Backend) adminSkill(sk skills.Skill) admin.SkillInfo {
	return admin.SkillInfo{Name: sk.Name, Description: sk.Description, Source: sk.Source.String(), Dir: sk.Dir,
		Offered: sk.Offered(), Disabled: sk.Disabled, Missing: sk.Missing, Error: sk.Err, Shadows: sk.Shadows,
		Users: b.Host.Config().Skills.Entries[sk.Name].Users}
}

// SkillsList implements admin.SkillsBackend.
func (b *Backend) SkillsList(context.Context) ([]admin.SkillInfo, error) {
	if err := b.ready(); err != nil {
		return nil, err
	}
	var out []admin.SkillInfo
	for _, sk := range b.Assistant.Skills().List() {
		out = append(out, b.adminSkill(sk))
	}
	return out, nil
}

// InstallSkill implements admin.SkillsBackend: the operator's archive
// goes into the installed skills (the workspace's skills/ still wins).
func (b *Backend) InstallSkill(_ context.Context, r io.Reader) (admin.SkillInstall, error) {
	if err := b.ready(); err != nil {
		return admin.SkillInstall{}, err
	}
	in, err := b.Assistant.Skills().Install(r)
	if errors.Is(err, skills.ErrInvalid) {
		return admin.SkillInstall{}, fmt.Errorf("%w: %v", admin.ErrBadArchive, err)
	}
	if err != nil {
		return admin.SkillInstall{}, err
	}
	out := admin.SkillInstall{Name: in.Name, SHA256: in.SHA256, Replaced: in.Replaced}
	for _, f := range in.Files {
		out.Files = append(out.Files, admin.SkillFile{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
	}
	b.logger().Info("skill installed by the operator", "skill", in.Name, "sha256", in.SHA256, "files", len(in.Files), "replaced", in.Replaced)
	return out, nil
}

// SetSkillEnabled implements admin.SkillsBackend.
func (b *Backend) SetSkillEnabled(_ context.Context, name string, on bool) (admin.SkillInfo, error) {
	if err := b.ready(); err != nil {
		return admin.SkillInfo{}, err
	}
	set := b.Assistant.Skills()
	err := set.SetEnabled(name, on)
	if errors.Is(err, skills.ErrNotFound) {
		return admin.SkillInfo{}, fmt.Errorf("%w: no skill %q", admin.ErrNotFound, name)
	}
	if err != nil {
		return admin.SkillInfo{}, err
	}
	sk, _ := set.Get(name)
	b.logger().Info("skill switched by the operator", "skill", name, "enabled", on)
	return b.adminSkill(sk), nil
}
