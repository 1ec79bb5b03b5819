package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"agent/pkg/clip"
)

// Prompt files read from the workspace, in the order they enter the system
// message.
var promptFiles = []string{"SOUL.md", "AGENT.md", "USER.md"}

const (
	// maxPromptFile bounds each prompt file and each SKILL.md read.
	maxPromptFile = 64 << 10
	// maxSkillDesc bounds one skill's description in the index.
	maxSkillDesc = 300
	// maxSkills bounds the skills index.
	maxSkills = 200
	// checkEvery is how often System stats the files for changes.
	checkEvery = time.Second
	// skillsName is how the skills index is named in Reload's change list.
	skillsName = "skills"
)

// Prompt builds the system message from the workspace's SOUL.md, AGENT.md and
// USER.md, an index of workspace/skills/*/SKILL.md, a memory block and the
// current time. Files are re-read on Reload (SIGHUP) and, cheaply, when System
// notices a changed mtime or size (stat at most once a second). Missing files
// are fine (logged once); a file over 64 KiB is truncated with a notice.
// Prompt is safe for concurrent use.
type Prompt struct {
	dir    string
	logger *slog.Logger

	mu        sync.Mutex
	files     map[string]*promptFile
	skills    []skill
	skillsSig string
	static    string // SOUL + AGENT + USER + skills index
	built     bool
	lastCheck time.Time // the now of the last stat pass
}

type promptFile struct {
	exists  bool
	mtime   time.Time
	size    int64
	content string
	warned  bool // missing or unreadable, logged
}

type skill struct {
	Name, Desc, Path string
}

// NewPrompt loads the prompt files of workspace. logger nil discards.
func NewPrompt(workspace string, logger *slog.Logger) *Prompt {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Prompt{dir: workspace, logger: logger, files: make(map[string]*promptFile)}
	for _, name := range promptFiles {
		p.files[name] = &promptFile{}
	}
	p.mu.Lock()
	p.refresh(true)
	p.mu.Unlock()
	return p
}

// Reload re-reads every file and the skills index and returns the names of
// those whose content changed ("skills" for the index), logging them.
// The error joins the files that could not be read (other than missing ones).
func (p *Prompt) Reload() (changed []string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed, err = p.refresh(true)
	if len(changed) > 0 {
		p.logger.Info("prompt reloaded", "changed", changed)
	} else {
		p.logger.Debug("prompt reloaded, nothing changed")
	}
	return changed, err
}

// System returns the system message for a turn at now: the prompt files,
// the skills index, memoryBlock under "Relevant memory" when not empty, and
// now in loc (UTC when nil). Changed files are picked up when the last check
// is at least a second older than now.
func (p *Prompt) System(now time.Time, loc *time.Location, memoryBlock string) string {
	p.mu.Lock()
	if now.Sub(p.lastCheck) >= checkEvery || now.Before(p.lastCheck) {
		p.lastCheck = now
		if changed, _ := p.refresh(false); len(changed) > 0 {
			p.logger.Info("prompt files changed", "changed", changed)
		}
	}
	static := p.static
	p.mu.Unlock()

	if loc == nil {
		loc = time.UTC
	}
	var b strings.Builder
	b.Grow(len(static) + len(memoryBlock) + 128)
	b.WriteString(static)
	if m := strings.TrimSpace(memoryBlock); m != "" {
		b.WriteString("## Relevant memory\n\n")
		b.WriteString(m)
		b.WriteString("\n\n")
	}
	t := now.In(loc)
	fmt.Fprintf(&b, "## Current time\n\n%s (%s, %s)\n", t.Format("2006-01-02 15:04:05 Monday"), loc.String(), t.Format("UTC-07:00"))
	return b.String()
}

// refresh re-reads what changed (everything when force) and rebuilds the
// static part. p.mu is held.
func (p *Prompt) refresh(force bool) (changed []string, err error) {
	var errs []error
	for _, name := range promptFiles {
		f := p.files[name]
		ch, e := p.loadFile(name, f, force)
		if ch {
			changed = append(changed, name)
		}
		if e != nil {
			errs = append(errs, e)
		}
	}
	if p.loadSkills(force) {
		changed = append(changed, skillsName)
	}
	if len(changed) > 0 || !p.built {
		p.rebuild()
	}
	return changed, errors.Join(errs...)
}

// loadFile re-reads one prompt file when its stat changed (or force) and
// reports whether its content changed.
func (p *Prompt) loadFile(name string, f *promptFile, force bool) (bool, error) {
	path := filepath.Join(p.dir, name)
	st, err := os.Stat(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			if !f.warned {
				p.logger.Warn("prompt file unreadable", "file", path, "err", err)
				f.warned = true
			}
			return false, fmt.Errorf("prompt: stat %s: %w", name, err)
		}
		was := f.exists
		if !f.warned {
			p.logger.Info("prompt file missing, skipped", "file", path)
			f.warned = true
		}
		old := f.content
		*f = promptFile{warned: true}
		return was && old != "", nil
	}
	if !force && f.exists && st.ModTime().Equal(f.mtime) && st.Size() == f.size {
		return false, nil
	}
	content, err := readBounded(path, maxPromptFile)
	if err != nil {
		if !f.warned {
			p.logger.Warn("prompt file unreadable", "file", path, "err", err)
			f.warned = true
		}
		return false, fmt.Errorf("prompt: read %s: %w", name, err)
	}
	if len(content) > maxPromptFile {
		content = clip.Bytes(content, maxPromptFile) + fmt.Sprintf("\n\n[%s truncated: larger than %d KiB]", name, maxPromptFile>>10)
		p.logger.Warn("prompt file truncated", "file", path, "size", st.Size(), "limit", maxPromptFile)
	}
	old := f.content
	*f = promptFile{exists: true, mtime: st.ModTime(), size: st.Size(), content: content}
	return old != content, nil
}

// loadSkills rescans skills/*/SKILL.md when their stats changed (or force)
// and reports whether the index changed.
func (p *Prompt) loadSkills(force bool) bool {
	paths, _ := filepath.Glob(filepath.Join(p.dir, "skills", "*", "SKILL.md"))
	sort.Strings(paths)
	if len(paths) > maxSkills {
		paths = paths[:maxSkills]
	}
	var sig strings.Builder
	for _, path := range paths {
		if st, err := os.Stat(path); err == nil {
			fmt.Fprintf(&sig, "%s\x00%d\x00%d\n", path, st.ModTime().UnixNano(), st.Size())
		}
	}
	if !force && sig.String() == p.skillsSig {
		return false
	}
	p.skillsSig = sig.String()
	var skills []skill
	for _, path := range paths {
		content, err := readBounded(path, maxPromptFile)
		if err != nil {
			p.logger.Warn("skill unreadable", "file", path, "err", err)
			continue
		}
		rel, _ := filepath.Rel(p.dir, path)
		s := parseSkill(content, filepath.Base(filepath.Dir(path)))
		s.Path = filepath.ToSlash(rel)
		skills = append(skills, s)
	}
	same := len(skills) == len(p.skills)
	for i := 0; same && i < len(skills); i++ {
		same = skills[i] == p.skills[i]
	}
	p.skills = skills
	return !same
}

// parseSkill takes the first heading as the name (dir when none) and the
// first line of the first paragraph as the description. YAML front matter
// with name: and description: is honoured.
func parseSkill(content, dir string) skill {
	s := skill{Name: dir}
	sc := bufio.NewScanner(strings.NewReader(content))
	sc.Buffer(make([]byte, 0, 4096), maxPromptFile+1)
	first, inFront, gotHeading := true, false, false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if first && line == "---" {
			first, inFront = false, true
			continue
		}
		first = false
		if inFront {
			if line == "---" {
				inFront = false
				continue
			}
			if v, ok := strings.CutPrefix(line, "name:"); ok && strings.TrimSpace(v) != "" {
				s.Name, gotHeading = strings.Trim(strings.TrimSpace(v), `"'`), true
			}
			if v, ok := strings.CutPrefix(line, "description:"); ok && strings.TrimSpace(v) != "" {
				s.Desc = strings.Trim(strings.TrimSpace(v), `"'`)
			}
			continue
		}
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			if !gotHeading {
				s.Name, gotHeading = strings.TrimSpace(strings.TrimLeft(line, "#")), true
			}
			continue
		}
		if s.Desc == "" {
			s.Desc = line
		}
		break
	}
	if s.Name == "" {
		s.Name = dir
	}
	if len(s.Desc) > maxSkillDesc {
		s.Desc = clip.Bytes(s.Desc, maxSkillDesc) + "..."
	}
	return s
}

// rebuild assembles the static part of the system message. p.mu is held.
func (p *Prompt) rebuild() {
	var b strings.Builder
	for _, name := range promptFiles {
		if c := strings.TrimSpace(p.files[name].content); c != "" {
			b.WriteString(c)
			b.WriteString("\n\n")
		}
	}
	if len(p.skills) > 0 {
		b.WriteString("## Skills\n\nRead a skill's SKILL.md with read_file before using it.\n\n")
		for _, s := range p.skills {
			fmt.Fprintf(&b, "- %s (%s)", s.Name, s.Path)
			if s.Desc != "" {
				b.WriteString(": ")
				b.WriteString(s.Desc)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	p.static = b.String()
	p.built = true
}

// readBounded reads at most limit+1 bytes of path, so a caller can tell an
// over-long file.
func readBounded(path string, limit int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(f, limit+1)); err != nil {
		return "", err
	}
	return buf.String(), nil
}
