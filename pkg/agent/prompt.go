package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"agent/pkg/clip"
	"agent/pkg/invisible"
)

// Prompt files read from the workspace, in the order they enter the system
// message.
var promptFiles = []string{"SOUL.md", "AGENT.md", "USER.md"}

const (
	// maxPromptFile bounds each prompt file.
	maxPromptFile = 64 << 10
	// checkEvery is how often System stats the files for changes.
	checkEvery = time.Second
)

// Prompt builds the system message from the workspace's SOUL.md, AGENT.md and
// USER.md, the skills index (SetSkills), a memory block and the current
// time. Files are re-read on Reload (SIGHUP) and, cheaply, when System
// notices a changed mtime or size (stat at most once a second). Missing files
// are fine (logged once); a file over 64 KiB is truncated with a notice.
// Prompt is safe for concurrent use.
type Prompt struct {
	dir    string
	logger *slog.Logger

	mu        sync.Mutex
	files     map[string]*promptFile
	skills    func(channel, user string) string // the skills index for a caller; nil: none
	static    string                            // SOUL + AGENT + USER
	built     bool
	lastCheck time.Time // the now of the last stat pass
	// stripped counts the invisible characters taken out of the files;
	// uncounted are those taken out before it was set.
	stripped  func(source string, n int)
	uncounted int
}

type promptFile struct {
	exists  bool
	mtime   time.Time
	size    int64
	content string
	warned  bool // missing or unreadable, logged
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

// SetSkills sets where the skills index comes from (pkg/skills: it follows
// changes itself), given the caller (a skill may be limited to some
// users). Call it before the first System.
func (p *Prompt) SetSkills(index func(channel, user string) string) {
	p.mu.Lock()
	p.skills = index
	p.mu.Unlock()
}

// CountStripped sets where the invisible characters (pkg/invisible)
// taken out of the prompt files are counted, as source "workspace_file";
// those taken out already (by NewPrompt) are counted at once.
func (p *Prompt) CountStripped(fn func(source string, n int)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stripped = fn
	if p.uncounted > 0 && fn != nil {
		fn("workspace_file", p.uncounted)
		p.uncounted = 0
	}
}

// Reload re-reads every file and returns the names of those whose content
// changed, logging them.
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
	return p.SystemFor(now, loc, memoryBlock, "", "")
}

// SystemFor is System for a turn of user on channel: the skills index
// lists what they may use.
func (p *Prompt) SystemFor(now time.Time, loc *time.Location, memoryBlock, channel, user string) string {
	p.mu.Lock()
	if now.Sub(p.lastCheck) >= checkEvery || now.Before(p.lastCheck) {
		p.lastCheck = now
		if changed, _ := p.refresh(false); len(changed) > 0 {
			p.logger.Info("prompt files changed", "changed", changed)
		}
	}
	static, skills := p.static, p.skills
	p.mu.Unlock()
	var index string
	if skills != nil {
		if index = strings.TrimSpace(skills(channel, user)); index != "" {
			index += "\n\n"
		}
	}

	if loc == nil {
		loc = time.UTC
	}
	var b strings.Builder
	b.Grow(len(static) + len(index) + len(memoryBlock) + 128)
	b.WriteString(static)
	b.WriteString(index)
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
	// A reader of the file does not see these; the model would.
	content, n := invisible.Strip(content)
	if n > 0 {
		p.logger.Warn("prompt file: invisible characters removed", "file", path, "count", n)
		if p.stripped != nil {
			p.stripped("workspace_file", n)
		} else {
			p.uncounted += n
		}
	}
	old := f.content
	*f = promptFile{exists: true, mtime: st.ModTime(), size: st.Size(), content: content}
	return old != content, nil
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
