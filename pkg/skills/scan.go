package skills

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"agent/pkg/clip"
)

// found is a skill folder seen by survey.
type found struct {
	src    Source
	dir    string // the skills directory
	folder string // the skill folder's name in it
	link   bool   // the folder is a symlink
}

// refresh rescans when the signature changed (looked at no more than once
// per checkEvery) or when force; it re-evaluates requirements every
// recheckEvery even when nothing changed. s.mu is held.
func (s *Set) refresh(force bool) {
	now := s.clock.Now()
	if !force && s.scanned && now.Sub(s.checked) < checkEvery && !now.Before(s.checked) {
		return
	}
	s.checked = now
	list, sig := s.survey()
	if force || !s.scanned || sig != s.sig {
		s.scan(list)
		s.sig, s.scanned, s.evaluated = sig, true, now
		return
	}
	if now.Sub(s.evaluated) >= recheckEvery || now.Before(s.evaluated) {
		for i := range s.all {
			s.evaluate(&s.all[i])
		}
		s.evaluated = now
	}
}

// survey lists the skill folders of the three directories (at most
// maxSkillsPerDir each: real directories, not dot-named, holding a
// SKILL.md) and a signature of them and of the state file.
func (s *Set) survey() ([]found, string) {
	var list []found
	var sig strings.Builder
	for _, src := range sources {
		dir := s.dir(src)
		if dir == "" {
			continue
		}
		entries, err := folders(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(&sig, "%s\x00error %v\n", src, err)
		}
		n := 0
		for _, e := range entries {
			skillMD := filepath.Join(dir, e.name, "SKILL.md")
			st, err := os.Lstat(skillMD)
			if e.link {
				// Listed as unusable, so the operator sees why; only
				// looked at, never read.
				if _, err = os.Stat(skillMD); err == nil {
					st, err = os.Lstat(filepath.Join(dir, e.name))
				}
			}
			if err != nil {
				continue
			}
			if n++; n > maxSkillsPerDir {
				s.log.Warn("too many skills, the rest ignored", "dir", dir, "limit", maxSkillsPerDir)
				break
			}
			list = append(list, found{src, dir, e.name, e.link})
			fmt.Fprintf(&sig, "%s\x00%s\x00%d\x00%d\x00%v\n", src, e.name, st.ModTime().UnixNano(), st.Size(), st.Mode())
		}
	}
	if s.cfg.StateFile != "" {
		if st, err := os.Stat(s.cfg.StateFile); err == nil {
			fmt.Fprintf(&sig, "state\x00%d\x00%d\n", st.ModTime().UnixNano(), st.Size())
		}
	}
	return list, sig.String()
}

// entry is a folder of a skills directory.
type entry struct {
	name string
	link bool // a symlink (to a folder, one hopes): never followed
}

// folders returns the directories and symlinks in dir that are not
// dot-named, sorted, looking at no more than maxDirEntries entries.
func folders(dir string) ([]entry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []entry
	seen := 0
	for seen < maxDirEntries {
		batch, err := f.ReadDir(256)
		seen += len(batch)
		for _, e := range batch {
			t := e.Type()
			if (t.IsDir() || t&fs.ModeSymlink != 0) && !strings.HasPrefix(e.Name(), ".") {
				out = append(out, entry{e.Name(), t&fs.ModeSymlink != 0})
			}
		}
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.name, b.name) })
			return out, err
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// scan reads every listed skill, settles duplicates and precedence, and
// replaces s.all. s.mu is held.
func (s *Set) scan(list []found) {
	if disabled, err := s.readState(); err != nil {
		s.log.Error("skills state unreadable, keeping the previous disabled set", "file", s.cfg.StateFile, "err", err)
	} else {
		s.disabled = disabled
	}
	winners := map[string]Skill{}
	var extras []Skill // duplicates within one directory
	for _, src := range sources {
		var here []Skill
		for _, f := range list {
			if f.src == src {
				here = append(here, s.load(f))
			}
		}
		// Within a directory, the folder named like the skill wins a
		// duplicate name, else the first folder by name.
		first := map[string]int{}
		for i, sk := range here {
			j, dup := first[sk.Name]
			if !dup {
				first[sk.Name] = i
				continue
			}
			if filepath.Base(sk.Dir) == sk.Name {
				first[sk.Name] = i
				i, j = j, i
			}
			here[i].Err = fmt.Sprintf("duplicate name %q in the %s directory (also folder %s)", sk.Name, src, filepath.Base(here[j].Dir))
		}
		for i, sk := range here {
			if first[sk.Name] != i {
				extras = append(extras, sk)
				continue
			}
			if lower, ok := winners[sk.Name]; ok {
				sk.Shadows = append(slices.Clone(lower.Shadows), lower.Source.String())
			}
			winners[sk.Name] = sk
		}
	}
	all := make([]Skill, 0, len(winners)+len(extras))
	byDir := map[string]bool{}
	for _, sk := range winners {
		all = append(all, sk)
		byDir[sk.Dir] = true
	}
	all = append(all, extras...)
	slices.SortFunc(all, func(a, b Skill) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if a.Source != b.Source {
			return int(b.Source) - int(a.Source)
		}
		return strings.Compare(a.Dir, b.Dir)
	})
	s.byName = map[string]int{}
	for i, sk := range all {
		if byDir[sk.Dir] {
			s.byName[sk.Name] = i
		}
		if sk.Err != "" {
			s.log.Warn("skill unusable", "skill", sk.Name, "dir", sk.Dir, "err", sk.Err)
		}
	}
	s.all = all
}

// load reads one skill folder.
func (s *Set) load(f found) Skill {
	dir := filepath.Join(f.dir, f.folder)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sk := Skill{Name: safeText(f.folder, 80), Source: f.src, Dir: dir}
	if f.link {
		sk.Err = "skill folder is a symlink (not followed; copy the folder instead)"
		return sk
	}
	root, err := openSkillRoot(f.dir, f.folder)
	if err != nil {
		sk.Err = clip.String("skill folder unreadable: "+err.Error(), maxErr)
		return sk
	}
	defer root.Close()
	data, _, err := readSkillFile(root, "SKILL.md")
	if err != nil {
		sk.Err = clip.String("SKILL.md unreadable: "+err.Error(), maxErr)
		return sk
	}
	p := parse(data, f.folder)
	sk.Name, sk.Description, sk.Requires, sk.Err = p.Name, p.Description, p.Requires, p.Err
	s.stripped(p.Stripped)
	s.evaluate(&sk)
	return sk
}

// evaluate sets sk's Missing and Disabled from the requirements and the
// operator's choice.
func (s *Set) evaluate(sk *Skill) {
	sk.Disabled = s.disabled[sk.Name]
	var miss []string
	r := sk.Requires
	for _, b := range r.Bins {
		if !s.hasBin(b) {
			miss = append(miss, "binary "+b)
		}
	}
	if len(r.AnyBins) > 0 && !slices.ContainsFunc(r.AnyBins, s.hasBin) {
		miss = append(miss, "one of binaries "+strings.Join(r.AnyBins, ", "))
	}
	for _, e := range r.Env {
		if !s.hasEnv(sk.Name, e) {
			miss = append(miss, "environment variable "+e)
		}
	}
	for _, c := range r.Config {
		miss = append(miss, "config key "+c+" (not supported here)")
	}
	if len(r.OS) > 0 && !slices.Contains(r.OS, s.goos) {
		miss = append(miss, "os "+strings.Join(r.OS, ", ")+" (this is "+s.goos+")")
	}
	sk.Missing = miss
}

// safeText makes untrusted text printable and short for lists and logs.
func safeText(v string, n int) string {
	v = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(v, "?"))
	return clip.String(v, n)
}

// state is the state file's content.
type state struct {
	Disabled []string `json:"disabled"`
}

// readState reads the disabled set; a missing file is an empty set.
func (s *Set) readState() (map[string]bool, error) {
	out := map[string]bool{}
	if s.cfg.StateFile == "" {
		return out, nil
	}
	f, err := os.Open(s.cfg.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxStateFile {
		return nil, fmt.Errorf("larger than %d KiB", maxStateFile>>10)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return out, nil
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, err
	}
	for _, n := range st.Disabled {
		out[n] = true
	}
	return out, nil
}

// SetEnabled switches a skill on or off for good: the disabled set is
// written to cfg.StateFile (temp file, fsync, rename). An unknown name is
// ErrNotFound (enabling a name only the state file remembers is allowed,
// to clean it up).
func (s *Set) SetEnabled(name string, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.StateFile == "" {
		return fmt.Errorf("skills: set enabled %s: no state file configured", name)
	}
	s.refresh(false)
	disabled, err := s.readState()
	if err != nil {
		s.log.Error("skills state unreadable, rewriting it from memory", "file", s.cfg.StateFile, "err", err)
		disabled = map[string]bool{}
		for n := range s.disabled {
			disabled[n] = true
		}
	}
	if _, ok := s.byName[name]; !ok && !(on && disabled[name]) {
		return fmt.Errorf("skills: set enabled %q: %w", clip.String(name, 80), ErrNotFound)
	}
	if on {
		delete(disabled, name)
	} else {
		disabled[name] = true
	}
	st := state{Disabled: []string{}}
	for n := range disabled {
		st.Disabled = append(st.Disabled, n)
	}
	slices.Sort(st.Disabled)
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("skills: set enabled %s: %w", name, err)
	}
	if err := writeAtomic(s.cfg.StateFile, append(data, '\n')); err != nil {
		return fmt.Errorf("skills: set enabled %s: %w", name, err)
	}
	s.refresh(true)
	return nil
}

// writeAtomic replaces file with data: a temp file beside it, fsync,
// rename, then a best-effort fsync of the folder.
func writeAtomic(file string, data []byte) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(file)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
