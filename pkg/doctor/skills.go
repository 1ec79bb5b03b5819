package doctor

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"agent/pkg/customtool"
	"agent/pkg/skills"
)

// checkSkills lists the skills the daemon finds (bundled < installed <
// workspace) and says what keeps each one that is not offered: a missing
// binary, variable or OS, a broken SKILL.md, the operator's switch; and
// whether each [skills.entries] credential file can be read.
func (e Env) checkSkills(context.Context) Result {
	set := skills.New(skills.FromConfig(e.Config))
	list := set.List()
	var offered, off []string
	level := OK
	var fixes []string
	for _, sk := range list {
		switch {
		case sk.Offered():
			offered = append(offered, sk.Name)
		case sk.Disabled:
			off = append(off, sk.Name+" (disabled)")
		case sk.Err != "":
			level = Warn
			off = append(off, fmt.Sprintf("%s (%s: %s)", sk.Name, sk.Source, sk.Err))
		default:
			level = Warn
			off = append(off, fmt.Sprintf("%s (missing %s)", sk.Name, strings.Join(sk.Missing, ", ")))
			fixes = append(fixes, skillFix(sk))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.Config.Skills.Entries)) {
		for _, host := range e.Config.Skills.Entries[name].Files {
			if err := readableFile(host); err != nil {
				level = Warn
				off = append(off, fmt.Sprintf("%s: credential file unreadable: %v", name, err))
			}
		}
	}
	if len(list) == 0 && len(off) == 0 {
		return Result{Level: OK, Detail: "no skills (workspace skills/, " + e.Config.Skills.InstalledDir + ", " + e.Config.Skills.BundledDir + ")"}
	}
	d := fmt.Sprintf("%d offered", len(offered))
	if len(offered) > 0 {
		d += ": " + strings.Join(offered, ", ")
	}
	if len(off) > 0 {
		d += "; not offered: " + strings.Join(off, "; ")
	}
	d += fmt.Sprintf("; index %d of %d bytes", len(set.Index()), e.Config.Skills.IndexBytes)
	return Result{Level: level, Detail: d, Fix: strings.Join(slices.Compact(fixes), "; ")}
}

// readableFile opens path without blocking (a FIFO would hang doctor) and
// checks that it is a regular file.
func readableFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	return nil
}

// skillFix says how to meet a skill's missing requirements.
func skillFix(sk skills.Skill) string {
	var parts []string
	for _, m := range sk.Missing {
		switch {
		case strings.HasPrefix(m, "environment variable "):
			parts = append(parts, fmt.Sprintf("give it in [skills.entries.%s] env", sk.Name))
		case strings.HasPrefix(m, "binary ") || strings.HasPrefix(m, "one of binaries "):
			parts = append(parts, "install the program (apt install ...) in /usr/bin")
		}
	}
	if len(parts) == 0 {
		return "agentctl skills disable " + sk.Name + " to silence this"
	}
	return sk.Name + ": " + strings.Join(slices.Compact(parts), ", ")
}

// checkCustomTools counts the tools made with create_tool and names those
// waiting for an owner.
func (e Env) checkCustomTools(context.Context) Result {
	dir := filepath.Join(e.Config.Agent.Workspace, "custom_tools")
	if _, err := os.Stat(dir); err != nil {
		return Result{Level: OK, Detail: "none created"}
	}
	st, err := customtool.OpenStore(dir, nil, nil)
	if err != nil {
		return Result{Level: Warn, Detail: err.Error()}
	}
	var live int
	var pending, failing []string
	for _, name := range slices.Sorted(maps.Keys(st.Damaged())) {
		failing = append(failing, fmt.Sprintf("custom_tools/%s is damaged (%s): remove or mend it", name, st.Damaged()[name]))
	}
	for _, m := range st.List() {
		if m.Live > 0 {
			live++
		}
		if m.Pending > 0 {
			pending = append(pending, fmt.Sprintf("%s v%d by %s", m.Name, m.Pending, m.Creator))
		}
		if m.LastError != "" && strings.HasPrefix(m.LastError, "not offered") {
			failing = append(failing, m.Name+": "+m.LastError)
		}
	}
	d := fmt.Sprintf("%d live", live)
	if len(pending) == 0 && len(failing) == 0 {
		return Result{Level: OK, Detail: d}
	}
	if len(pending) > 0 {
		d += "; waiting for approval: " + strings.Join(pending, ", ")
	}
	if len(failing) > 0 {
		d += "; " + strings.Join(failing, "; ")
	}
	return Result{Level: Warn, Detail: d, Fix: "agentctl tools show NAME, then agentctl tools approve NAME or reject NAME"}
}
