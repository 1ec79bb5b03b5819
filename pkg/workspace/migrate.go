package workspace

import (
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
// shared) into this one, once (a .layout file records it), losing
// nothing:
//   - uploads/<user>/ (WeCom media) goes to files/<wecom:user>/uploads/;
//   - every other file or folder at the top, except the prompt files,
//     skills/, shared/, files/ and dot files, goes to shared/: it was
//     visible to everyone before and stays readable by everyone, but only
//     owners may now change it.
//
// A name already taken at the destination gets a ".migrated-N" suffix.
func Migrate(dir string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	marker := filepath.Join(dir, layoutFile)
	if b, err := os.ReadFile(marker); err == nil && strings.TrimSpace(string(b)) == layoutV2 {
		return nil
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
	moved := 0
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
	if err := os.WriteFile(marker, []byte(layoutV2+"\n"), 0o640); err != nil {
		return fmt.Errorf("workspace: migrate: %w", err)
	}
	if moved > 0 {
		logger.Warn("workspace migrated to private folders per user", "moved", moved, "dir", dir)
	}
	return nil
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
