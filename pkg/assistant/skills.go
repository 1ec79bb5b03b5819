package assistant

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"agent/pkg/config"
	"agent/pkg/sandbox"
	"agent/pkg/shell"
	"agent/pkg/skills"
	"agent/pkg/tools"
)

// SkillsMount is where a skill's folder appears in its exec runs.
const SkillsMount = "/skills"

// newSkills builds the skill set of cfg (skills.FromConfig).
func (a *Assistant) newSkills(cfg *config.Config) *skills.Set {
	sc := skills.FromConfig(cfg)
	sc.Clock, sc.Logger = a.clock, a.logger.With("component", "skills")
	sc.Stripped = func(n int) { a.countStripped("skill", n) }
	return skills.New(sc)
}

// Skills is the skill set in force (nil when the pipeline is unavailable).
func (a *Assistant) Skills() *skills.Set {
	if a.skills == nil {
		return nil
	}
	return a.skills.Load()
}

// mayUseSkill says whether call's user may use the skill: everyone unless
// [skills.entries.NAME] users lists who (owners always may).
func (a *Assistant) mayUseSkill(call tools.Call, name string) bool {
	users := a.config().Skills.Entries[name].Users
	return len(users) == 0 || slices.Contains(users, call.Channel+":"+call.User) || a.callerIsOwner(call)
}

// mayReadSkillFolder says whether call may read the workspace's
// skills/FOLDER with the file tools: not a skill limited to other users.
func (a *Assistant) mayReadSkillFolder(call tools.Call, folder string) bool {
	set := a.Skills()
	if set == nil {
		return true
	}
	for _, sk := range set.List() {
		if sk.Source == skills.Workspace && filepath.Base(sk.Dir) == folder {
			return a.mayUseSkill(call, sk.Name)
		}
	}
	return true
}

// skill is the offered skill name may use, or an error for the model.
func (a *Assistant) skill(call tools.Call, name string) (skills.Skill, error) {
	set := a.Skills()
	sk, ok := set.Get(name)
	if !ok {
		return skills.Skill{}, fmt.Errorf("%w: no skill %q; the skills are: %s", tools.ErrBadArgs, name, a.offeredSkills(call))
	}
	if !sk.Offered() {
		return skills.Skill{}, fmt.Errorf("the skill %s cannot be used here: %s", name, skills.WhyNot(sk))
	}
	if !a.mayUseSkill(call, name) {
		return skills.Skill{}, fmt.Errorf("the skill %s is not available to you (the operator limited it to some users)", name)
	}
	return sk, nil
}

func (a *Assistant) offeredSkills(call tools.Call) string {
	var names []string
	for _, sk := range a.Skills().List() {
		if sk.Offered() && a.mayUseSkill(call, sk.Name) {
			names = append(names, sk.Name)
		}
	}
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

type skillArgs struct {
	Name string `json:"name" desc:"the skill's name, as in the Skills list"`
}

// getSkillTool is get_skill: a skill's instructions and files.
func (a *Assistant) getSkillTool() tools.Tool {
	return tools.Tool{
		Name:        "get_skill",
		Description: "Read a skill: its instructions (SKILL.md) and the files in its folder. Read it before doing what it describes; run its scripts with exec and \"skill\": NAME.",
		Schema:      tools.SchemaFor[skillArgs](),
		Handler: func(_ context.Context, call tools.Call) (string, error) {
			args, err := tools.Decode[skillArgs](call.Args)
			if err != nil {
				return "", err
			}
			sk, err := a.skill(call, strings.TrimSpace(args.Name))
			if err != nil {
				return "", err
			}
			text, files, err := a.Skills().Read(sk.Name)
			if err != nil {
				return "", err
			}
			dir := SkillsMount + "/" + sk.Name
			var b strings.Builder
			fmt.Fprintf(&b, "Skill %s (%s). In exec runs with \"skill\": %q its folder is %s (read-only); paths in SKILL.md are relative to it", sk.Name, sk.Source, sk.Name, dir)
			if _, err := a.Sandbox(); err != nil {
				b.WriteString(". exec is not available on this box now, so its scripts cannot run")
			}
			b.WriteString(".\nFiles:\n")
			for _, f := range files {
				fmt.Fprintf(&b, "- %s (%d bytes)\n", f.Path, f.Size)
			}
			// openclaw's SKILL.md files name their folder {baseDir}.
			text = strings.ReplaceAll(text, "{baseDir}", dir)
			fmt.Fprintf(&b, "--- SKILL.md ---\n%s", text)
			return b.String(), nil
		},
	}
}

// maxSkillFile bounds a credential file read for a skill's run.
const maxSkillFile = sandbox.MaxDataFile

// skillMount is exec's skill argument: the folder read-only at
// /skills/NAME, the skill's configured files (read by the daemon, given as
// bytes: the sandbox's account need not read them) and variables.
func (a *Assistant) skillMount(call tools.Call, name string) (shell.Mount, error) {
	sk, err := a.skill(call, name)
	if err != nil {
		return shell.Mount{}, err
	}
	entry := a.config().Skills.Entries[sk.Name]
	m := shell.Mount{Binds: []sandbox.Bind{{Src: sk.Dir, Dst: SkillsMount + "/" + sk.Name}}}
	for _, in := range slices.Sorted(maps.Keys(entry.Files)) {
		data, err := readSmall(entry.Files[in], maxSkillFile)
		if err != nil {
			a.logger.Error("skill credential file unreadable", "skill", sk.Name, "file", entry.Files[in], "err", err)
			return shell.Mount{}, fmt.Errorf("the skill %s is misconfigured on this box (a credential file is unreadable; the operator's log says which)", sk.Name)
		}
		m.Files = append(m.Files, sandbox.DataFile{Dst: in, Data: data})
	}
	for _, k := range slices.Sorted(maps.Keys(entry.Env)) {
		m.Env = append(m.Env, k+"="+entry.Env[k])
	}
	// What a skill's programs keep in $HOME (a CLI's token cache) stays in
	// the run's private /tmp, removed after it, not in the caller's folder
	// (a group chat's folder is its members').
	m.Env = append(m.Env, "HOME=/tmp")
	return m, nil
}

// readSmall reads a regular file of at most limit bytes. It opens without
// blocking: a FIFO put where the file should be cannot hang the turn.
func readSmall(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return data, nil
}
