package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Migrate moves a workspace of the earlier layout (one folder everyone
// shared) into this one, once, losing nothing:
//   - uploads/<user>/ (WeCom media) goes to files/<wecom:user>/uploads/;
//   - every other file or folder at the top, except the prompt files,
//     skills/ and dot files, goes to shared/: it was visible to everyone
//     before and stays readable by everyone, but only owners may now
//     change it. A files/ that was there (any user could have made one, to
//     plant files in a colleague's future folder) goes to shared/ too, and
//     so does a shared or skills that is not a plain directory;
//   - other users' access is taken off the tree.
//
// A name already taken at the destination gets a ".migrated-N" suffix.
// The record that it ran is kept in markerDir (the state dir: out of the
// users' reach), or in the workspace when markerDir is "". The prompt
// files and skills stay where they are, but any user could change them
// before: their hashes are logged for the owners to review.
func Migrate(dir, markerDir string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	marker, want := filepath.Join(dir, layoutFile), layoutV2
	if markerDir != "" {
		marker, want = filepath.Join(markerDir, "workspace.layout"), layoutV2+" "+dir
	}
	if b, err := os.ReadFile(marker); err == nil && strings.TrimSpace(string(b)) == want {
		return nil
	}
	moved := 0
	for _, name := range []string{FilesDir, SharedDir, SkillsDir} {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if err != nil || (name != FilesDir && fi.IsDir()) {
			continue
		}
		aside, err := freeName(p + ".old")
		if err != nil {
			return err
		}
		if err := os.Rename(p, aside); err != nil {
			return fmt.Errorf("workspace: migrate %s: %w", name, err)
		}
		logger.Warn("workspace: an existing "+name+" is moved to the shared area", "to", rel(dir, filepath.Join(SharedDir, filepath.Base(aside))))
	}
	for _, d := range []string{SharedDir, FilesDir, SkillsDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
			return fmt.Errorf("workspace: migrate: %w", err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("workspace: migrate: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, "."), slices.Contains(PromptFiles, name),
			name == SharedDir, name == FilesDir, name == SkillsDir:
			continue
		case name == UploadsDir && e.IsDir():
			n, err := migrateUploads(dir, logger)
			if err != nil {
				return err
			}
			moved += n
			continue
		}
		dst, err := freeName(filepath.Join(dir, SharedDir, name))
		if err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(dir, name), dst); err != nil {
			return fmt.Errorf("workspace: migrate %s: %w", name, err)
		}
		logger.Info("workspace: moved to the shared area (readable by everyone, changed by owners)", "from", name, "to", rel(dir, dst))
		moved++
	}
	if n := closeToOthers(dir); n > 0 {
		logger.Info("workspace: access for other users removed", "entries", n)
	}
	logPrompt(dir, logger)
	if err := os.WriteFile(marker, []byte(want+"\n"), 0o600); err != nil {
		return fmt.Errorf("workspace: migrate: %w", err)
	}
	if moved > 0 {
		logger.Warn("workspace migrated to private folders per user", "moved", moved, "dir", dir)
	}
	return nil
}

// logPrompt logs a hash of each prompt file and skill carried over: before
// this layout any user could change them, so owners should review them.
func logPrompt(dir string, logger *slog.Logger) {
	files := append([]string(nil), PromptFiles...)
	skills, _ := filepath.Glob(filepath.Join(dir, SkillsDir, "*", "SKILL.md"))
	for _, s := range skills {
		files = append(files, rel(dir, s))
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		sum := sha256.Sum256(b)
		logger.Warn("workspace: review this prompt file; before this version any user could change it", "file", f,
			"bytes", len(b), "sha256", hex.EncodeToString(sum[:]))
	}
}

// closeToOthers takes every permission for other users off dir and what
// is under it (symbolic links are not followed) and returns how many
// entries it changed: the earlier layout wrote files 0644. Failures are
// skipped; doctor's permissions check reports what is left.
func closeToOthers(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.Mode().Perm()&0o007 == 0 {
			return nil
		}
		if os.Chmod(p, fi.Mode().Perm()&^0o007|fi.Mode()&(fs.ModeSetgid)) == nil {
			n++
		}
		return nil
	})
	return n
}

// migrateUploads moves uploads/<user>/* into files/<wecom:user>/uploads/.
func migrateUploads(dir string, logger *slog.Logger) (int, error) {
	up := filepath.Join(dir, UploadsDir)
	users, err := os.ReadDir(up)
	if err != nil {
		return 0, fmt.Errorf("workspace: migrate uploads: %w", err)
	}
	moved := 0
	for _, u := range users {
		src := filepath.Join(up, u.Name())
		if !u.IsDir() {
			// A stray file: keep it, shared.
			dst, err := freeName(filepath.Join(dir, SharedDir, UploadsDir+"-"+u.Name()))
			if err != nil {
				return moved, err
			}
			if err := os.Rename(src, dst); err != nil {
				return moved, fmt.Errorf("workspace: migrate %s: %w", src, err)
			}
			moved++
			continue
		}
		// Uploads were saved per WeCom sender (the only channel with media).
		userDir := filepath.Join(dir, FilesDir, ScopeDir("wecom:"+u.Name()))
		target := filepath.Join(userDir, UploadsDir)
		if err := os.MkdirAll(userDir, 0o700); err != nil {
			return moved, fmt.Errorf("workspace: migrate uploads: %w", err)
		}
		if err := os.MkdirAll(target, 0o700); err != nil {
			return moved, fmt.Errorf("workspace: migrate uploads: %w", err)
		}
		files, err := os.ReadDir(src)
		if err != nil {
			return moved, fmt.Errorf("workspace: migrate uploads: %w", err)
		}
		for _, f := range files {
			dst, err := freeName(filepath.Join(target, f.Name()))
			if err != nil {
				return moved, err
			}
			if err := os.Rename(filepath.Join(src, f.Name()), dst); err != nil {
				return moved, fmt.Errorf("workspace: migrate uploads: %w", err)
			}
			moved++
		}
		if err := os.Remove(src); err != nil {
			return moved, fmt.Errorf("workspace: migrate uploads: %w", err)
		}
		logger.Info("workspace: uploads moved to the user's folder", "user", "wecom:"+u.Name(), "to", rel(dir, target))
	}
	if err := os.Remove(up); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return moved, fmt.Errorf("workspace: migrate uploads: %w", err)
	}
	return moved, nil
}

// freeName is p, or p.migrated-N when p exists.
func freeName(p string) (string, error) {
	for i := 0; i < 1000; i++ {
		cand := p
		if i > 0 {
			cand = fmt.Sprintf("%s.migrated-%d", p, i)
		}
		if _, err := os.Lstat(cand); errors.Is(err, fs.ErrNotExist) {
			return cand, nil
		}
	}
	return "", fmt.Errorf("workspace: migrate: no free name for %s", p)
}

func rel(dir, p string) string {
	if r, err := filepath.Rel(dir, p); err == nil {
		return r
	}
	return p
}
