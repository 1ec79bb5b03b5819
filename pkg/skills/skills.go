package skills

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"agent/pkg/clip"
	"agent/pkg/clock"
	"agent/pkg/invisible"
)

// Source is where a skill was found; a higher one hides a lower one of the
// same name.
type Source int

// The sources, lowest precedence first.
const (
	Bundled Source = iota
	Installed
	Workspace
)

var sources = [...]Source{Bundled, Installed, Workspace}

func (s Source) String() string {
	switch s {
	case Bundled:
		return "bundled"
	case Installed:
		return "installed"
	case Workspace:
		return "workspace"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// Requirements are what a skill says it needs (openclaw's
// metadata.openclaw.requires and os, or our top-level requires and os).
type Requirements struct {
	Bins    []string // every one must be on the sandbox's PATH
	AnyBins []string // at least one must be
	Env     []string // environment variables the skill's configuration must provide
	Config  []string // openclaw config keys: never available here
	OS      []string // linux, darwin, win32; empty: any
}

// Skill is one skill found on disk.
type Skill struct {
	Name        string
	Description string
	Source      Source
	Dir         string // absolute host path of the skill folder
	Requires    Requirements
	Missing     []string // unmet requirements, as text for people
	Disabled    bool     // switched off by the operator (SetEnabled)
	Shadows     []string // sources of lower-precedence skills of the same name it hides
	Err         string   // why it cannot be used at all
}

// Offered reports whether the model may be told about and read the skill.
func (s Skill) Offered() bool { return !s.Disabled && s.Err == "" && len(s.Missing) == 0 }

// File is one regular file of a skill folder.
type File struct {
	Path string // relative to the skill folder, slash-separated
	Size int64
}

// Config says where skills live and how to judge their requirements.
type Config struct {
	Bundled, Installed, Workspace string // directories holding one folder per skill ("" or missing: none)
	StateFile                     string // JSON file keeping the disabled set ("": SetEnabled refused)
	// HasBin reports whether a binary is on the sandbox's PATH; nil: a
	// lookup in /usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin.
	HasBin func(name string) bool
	// HasEnv reports whether the skill's configured environment provides
	// name; nil: never.
	HasEnv     func(skill, name string) bool
	GOOS       string // "": runtime.GOOS
	IndexBytes int    // budget of Index(); 0: 4096
	// Stripped counts the invisible characters (pkg/invisible) taken
	// out of the skills' descriptions and SKILL.md text before the model
	// reads them; nil: not counted.
	Stripped func(n int)
	Clock    clock.Clock
	Logger   *slog.Logger
}

// Sentinel errors.
var (
	ErrNotFound = errors.New("no such skill")
	ErrInvalid  = errors.New("invalid skill archive")
)

const (
	maxSkillsPerDir = 200
	maxDirEntries   = 4096 // entries of a skills directory looked at
	maxFiles        = 200  // files listed by Read
	maxWalkEntries  = 4096 // entries looked at by Read's walk
	maxDepth        = 8    // folder depth walked by Read
	maxStateFile    = 1 << 20
	checkEvery      = time.Second // signature check interval
	recheckEvery    = time.Minute // requirements re-evaluated (a binary installed since)
	defaultIndex    = 4096
)

// sandboxPath is what the sandbox's PATH holds.
var sandboxPath = []string{"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"}

// Set is the skills of the three directories, rescanned when they change.
// Safe for concurrent use.
type Set struct {
	cfg    Config
	clock  clock.Clock
	log    *slog.Logger
	hasBin func(string) bool
	hasEnv func(string, string) bool
	goos   string
	lim    limits

	installMu sync.Mutex // one Install at a time

	mu        sync.Mutex
	scanned   bool
	checked   time.Time // last signature check
	evaluated time.Time // last requirements evaluation
	sig       string
	all       []Skill        // List: winners and errored duplicates, sorted
	byName    map[string]int // winner index into all
	disabled  map[string]bool
}

// New returns the skills of cfg's directories; it reads nothing yet.
func New(cfg Config) *Set {
	s := &Set{
		cfg:    cfg,
		clock:  clock.Or(cfg.Clock),
		log:    cfg.Logger,
		hasBin: cfg.HasBin,
		hasEnv: cfg.HasEnv,
		goos:   normOS(cfg.GOOS),
		lim:    defaultLimits(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("component", "skills")
	if s.hasBin == nil {
		s.hasBin = sandboxHasBin
	}
	if s.hasEnv == nil {
		s.hasEnv = func(string, string) bool { return false }
	}
	if s.goos == "" {
		s.goos = normOS(runtime.GOOS)
	}
	if s.cfg.IndexBytes <= 0 {
		s.cfg.IndexBytes = defaultIndex
	}
	return s
}

// sandboxHasBin looks name up in the sandbox's PATH only. A name with a
// path separator is never found (a skill must not probe host paths).
func sandboxHasBin(name string) bool {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return false
	}
	for _, dir := range sandboxPath {
		st, err := os.Stat(filepath.Join(dir, name))
		if err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return true
		}
	}
	return false
}

// List returns every skill found — the winner of each name and those that
// cannot be used — sorted by name; shadowed copies are left out.
func (s *Set) List() []Skill {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh(false)
	out := make([]Skill, len(s.all))
	for i, sk := range s.all {
		out[i] = cloneSkill(sk)
	}
	return out
}

// Get returns the winning skill called name, offered or not.
func (s *Set) Get(name string) (Skill, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh(false)
	i, ok := s.byName[name]
	if !ok {
		return Skill{}, false
	}
	return cloneSkill(s.all[i]), true
}

func cloneSkill(sk Skill) Skill {
	sk.Requires = Requirements{
		Bins:    slices.Clone(sk.Requires.Bins),
		AnyBins: slices.Clone(sk.Requires.AnyBins),
		Env:     slices.Clone(sk.Requires.Env),
		Config:  slices.Clone(sk.Requires.Config),
		OS:      slices.Clone(sk.Requires.OS),
	}
	sk.Missing = slices.Clone(sk.Missing)
	sk.Shadows = slices.Clone(sk.Shadows)
	return sk
}

const (
	indexHead = "## Skills\n\nSkills are instructions for tasks; call get_skill with a name to read one before using it.\n\n"
	indexDesc = 80 // description bytes in the shortened index
)

// Index is the prompt's list of offered skills, at most cfg.IndexBytes
// long; "" when none is offered (or not even the heading fits).
func (s *Set) Index() string { return s.IndexFor(nil) }

// IndexFor is Index of the offered skills allow accepts (nil: all), for a
// caller who may use only some (a skill limited to some users).
func (s *Set) IndexFor(allow func(name string) bool) string {
	s.mu.Lock()
	s.refresh(false)
	var offered []Skill
	for _, sk := range s.all {
		if sk.Offered() { // duplicates left out of byName carry an Err
			offered = append(offered, sk)
		}
	}
	budget := s.cfg.IndexBytes
	s.mu.Unlock()
	if allow != nil {
		offered = slices.DeleteFunc(offered, func(sk Skill) bool { return !allow(sk.Name) })
	}
	return index(offered, budget)
}

// index renders skills (sorted) within budget bytes: full descriptions,
// else descriptions cut to indexDesc bytes, else names only, else as many
// names as fit and a line counting the rest.
func index(skills []Skill, budget int) string {
	if len(skills) == 0 {
		return ""
	}
	line := func(sk Skill, desc int) string {
		d := sk.Description
		if desc == 0 || d == "" {
			return "- " + sk.Name + "\n"
		}
		if desc > 0 && len(d) > desc {
			d = clip.Bytes(d, desc-3) + "..."
		}
		return "- " + sk.Name + ": " + d + "\n"
	}
	for _, desc := range []int{-1, indexDesc, 0} {
		var b strings.Builder
		b.WriteString(indexHead)
		for _, sk := range skills {
			b.WriteString(line(sk, desc))
		}
		if b.Len() <= budget {
			return b.String()
		}
	}
	more := func(n int) string { return fmt.Sprintf("- ... and %d more (get_skill lists them)\n", n) }
	best, size := -1, len(indexHead)
	for k := 0; k <= len(skills); k++ {
		if size+len(more(len(skills)-k)) <= budget {
			best = k
		}
		if k == len(skills) {
			break
		}
		size += len(line(skills[k], 0))
		if size > budget {
			break
		}
	}
	if best < 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(indexHead)
	for _, sk := range skills[:best] {
		b.WriteString(line(sk, 0))
	}
	b.WriteString(more(len(skills) - best))
	return b.String()
}

// Read returns the winning skill's SKILL.md (cut at 64 KiB with a notice)
// and its regular files. An unknown name is ErrNotFound; a skill that is
// not offered is an error saying why.
func (s *Set) Read(name string) (string, []File, error) {
	s.mu.Lock()
	s.refresh(false)
	i, ok := s.byName[name]
	var sk Skill
	if ok {
		sk = cloneSkill(s.all[i])
	}
	s.mu.Unlock()
	if !ok {
		return "", nil, fmt.Errorf("skills: read %q: %w", clip.String(name, 80), ErrNotFound)
	}
	if !sk.Offered() {
		return "", nil, fmt.Errorf("skills: read %s: %s", name, WhyNot(sk))
	}
	root, err := openSkillRoot(s.dir(sk.Source), filepath.Base(sk.Dir))
	if err != nil {
		return "", nil, fmt.Errorf("skills: read %s: %w", name, err)
	}
	defer root.Close()
	data, truncated, err := readSkillFile(root, "SKILL.md")
	if err != nil {
		return "", nil, fmt.Errorf("skills: read %s: %w", name, err)
	}
	// What a reader of SKILL.md does not see does not reach the model.
	text, n := invisible.Strip(string(data))
	s.stripped(n)
	if truncated {
		text = clip.Bytes(text, maxSkillFile) + fmt.Sprintf("\n\n[SKILL.md truncated: larger than %d KiB]", maxSkillFile>>10)
	}
	files, err := walkFiles(root)
	if err != nil {
		s.log.Warn("skill files not all listed", "skill", name, "err", err)
	}
	return text, files, nil
}

// stripped counts n invisible characters taken out.
func (s *Set) stripped(n int) {
	if n > 0 && s.cfg.Stripped != nil {
		s.cfg.Stripped(n)
	}
}

// WhyNot says why a skill is not offered ("available" when it is).
func WhyNot(sk Skill) string {
	switch {
	case sk.Err != "":
		return "unusable: " + sk.Err
	case sk.Disabled:
		return "disabled by the operator"
	case len(sk.Missing) > 0:
		return "missing " + strings.Join(sk.Missing, ", ")
	}
	return "available"
}

func (s *Set) dir(src Source) string {
	switch src {
	case Bundled:
		return s.cfg.Bundled
	case Installed:
		return s.cfg.Installed
	case Workspace:
		return s.cfg.Workspace
	}
	return ""
}

// openSkillRoot opens folder of the skills directory dir as a root, without
// following a symlink out of dir.
func openSkillRoot(dir, folder string) (*os.Root, error) {
	parent, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	return parent.OpenRoot(folder)
}

// readSkillFile reads at most maxSkillFile bytes of a regular file of root
// (opened non-blocking: a FIFO must not hang the caller) and reports
// whether there was more.
func readSkillFile(root *os.Root, name string) ([]byte, bool, error) {
	st, err := root.Lstat(name)
	if err != nil {
		return nil, false, err
	}
	if !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("%s: not a regular file", name)
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, false, fmt.Errorf("%s: not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSkillFile+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > maxSkillFile {
		return data[:maxSkillFile], true, nil
	}
	return data, false, nil
}

// walkFiles lists the regular files of root: no symlinks, no dot-folders,
// at most maxDepth deep, at most maxFiles, sorted.
func walkFiles(root *os.Root) ([]File, error) {
	var files []File
	seen := 0
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		f, err := root.Open(dir)
		if err != nil {
			return err
		}
		var entries []fs.DirEntry
		for seen < maxWalkEntries {
			batch, err := f.ReadDir(256)
			seen += len(batch)
			entries = append(entries, batch...)
			if err != nil {
				break
			}
		}
		f.Close()
		slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, e := range entries {
			if len(files) >= maxFiles {
				return nil
			}
			p := path.Join(dir, e.Name())
			switch t := e.Type(); {
			case t.IsDir():
				if strings.HasPrefix(e.Name(), ".") || depth >= maxDepth {
					continue
				}
				if err := walk(p, depth+1); err != nil {
					return err
				}
			case t.IsRegular():
				info, err := e.Info()
				if err != nil || !info.Mode().IsRegular() {
					continue
				}
				files = append(files, File{Path: p, Size: info.Size()})
			}
		}
		return nil
	}
	err := walk(".", 1)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, err
}
