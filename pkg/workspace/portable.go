package workspace

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A user's private folder, as one box of a fleet hands it to another with
// the user (pkg/fleet): a tar stream of its folders and regular files
// (links and special files are left behind). Reading and writing go
// through an os.Root, so neither a link planted in the folder nor a name
// in the stream reaches outside it.

// ExportFiles writes scope's folder to w as a tar stream and returns how
// many files it holds. A folder that does not exist is an empty stream.
func (s *Spaces) ExportFiles(scope string, w io.Writer) (int, error) {
	tw := tar.NewWriter(w)
	dir := filepath.Join(s.dir, FilesDir, ScopeDir(scope))
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, tw.Close()
	}
	if err != nil {
		return 0, fmt.Errorf("workspace: export %s: %w", scope, err)
	}
	defer root.Close()
	l := s.lock(dir)
	l.Lock()
	defer l.Unlock()
	files := 0
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o700, ModTime: fi.ModTime()})
		case d.Type().IsRegular():
			f, err := root.Open(p)
			if errors.Is(err, fs.ErrPermission) {
				// chmod 000 from the user's sandbox: the file is still
				// theirs (and this box's user owns it).
				if root.Chmod(p, 0o600) == nil {
					f, err = root.Open(p)
				}
			}
			if err != nil {
				return err
			}
			defer f.Close()
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o600, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
				return err
			}
			if _, err := io.CopyN(tw, f, fi.Size()); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			files++
		}
		return nil // links, sockets, devices stay
	})
	if err != nil {
		return files, fmt.Errorf("workspace: export %s: %w", scope, err)
	}
	return files, tw.Close()
}

// ImportFiles unpacks a stream ExportFiles wrote into scope's folder (a
// file already there is replaced) and returns how many files it wrote.
// Entries other than folders and regular files, and names that are not
// clean relative paths within the bounds of the file tools, are refused.
// The folder's quota holds: a stream that would take it over fails there.
func (s *Spaces) ImportFiles(scope string, r io.Reader) (int, error) {
	dir, err := s.UserDir(scope)
	if err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("workspace: import %s: %w", scope, err)
	}
	defer root.Close()
	l := s.lock(dir)
	l.Lock()
	defer l.Unlock()
	quota := s.cfg.Quota()
	used, err := usage(dir)
	if err != nil {
		return 0, fmt.Errorf("workspace: import %s: %w", scope, err)
	}
	tr := tar.NewReader(r)
	files := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return files, fmt.Errorf("workspace: import %s: %w", scope, err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		// Any clean relative path: what ExportFiles writes (a user's
		// sandbox may make paths deeper or longer than the file tools
		// take, and they must move too); os.Root keeps them inside.
		if name == "" || path.Clean(name) != name || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") || len(name) > maxImportPath {
			return files, fmt.Errorf("workspace: import %s: refused entry %q", scope, clipName(h.Name))
		}
		prev, err := root.Lstat(name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return files, fmt.Errorf("workspace: import %s: %w", scope, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if prev == nil {
				used += entryCost
			}
			if err := root.MkdirAll(name, 0o700); err != nil {
				return files, fmt.Errorf("workspace: import %s: %w", scope, err)
			}
		case tar.TypeReg:
			used += entryCost + h.Size
			if prev != nil {
				// Replaced (an import tried again): what it held is
				// given back; what is not a regular file (a FIFO, a
				// link, a socket planted there) goes first, so the
				// write neither blocks nor follows it.
				used -= entryCost
				if prev.Mode().IsRegular() {
					used -= prev.Size()
				} else if err := root.Remove(name); err != nil {
					return files, fmt.Errorf("workspace: import %s: replace %s: %w", scope, clipName(name), err)
				}
			}
			if quota > 0 && used > quota {
				return files, fmt.Errorf("%w: importing %s's files needs %s of its %s limit", ErrQuota, scope, mib(used), mib(quota))
			}
			if d := path.Dir(name); d != "." {
				if err := root.MkdirAll(d, 0o700); err != nil {
					return files, fmt.Errorf("workspace: import %s: %w", scope, err)
				}
			}
			if err := writeEntry(root, name, tr, h.Size, h.ModTime); err != nil {
				return files, fmt.Errorf("workspace: import %s: %s: %w", scope, clipName(name), err)
			}
			files++
		default:
			return files, fmt.Errorf("workspace: import %s: refused entry %q of type %q", scope, h.Name, h.Typeflag)
		}
	}
}

func writeEntry(root *os.Root, name string, r io.Reader, size int64, mod time.Time) error {
	// O_NONBLOCK: a FIFO planted between the check and the open does
	// not block the import (it has no effect on a regular file).
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return errors.New("not a regular file")
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if !mod.IsZero() {
		_ = root.Chtimes(name, mod, mod)
	}
	return nil
}

// maxImportPath bounds an imported entry's name (a sanity bound far past
// what a folder holds: the entries' cost against the quota bounds the
// rest).
const maxImportPath = 64 << 10

// clipName shortens a name for an error.
func clipName(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// PurgeFiles deletes scope's folder (after the user moved to another
// box).
func (s *Spaces) PurgeFiles(scope string) error {
	dir := filepath.Join(s.dir, FilesDir, ScopeDir(scope))
	l := s.lock(dir)
	l.Lock()
	defer l.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("workspace: purge %s: %w", scope, err)
	}
	return nil
}
