package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"agent/pkg/diskuse"
)

// maxWalk bounds the entries one measurement visits: a run that makes
// millions of empty files is stopped by the count, not measured forever.
const maxWalk = 200_000

// usage is the disk dir's tree holds (each entry's allocated blocks, at
// least a block, so that a million empty files count too, a sparse file
// what it holds and one preallocated with fallocate what it reserved), stopping at maxWalk entries with
// what it saw so far plus a large penalty. It walks through an os.Root:
// a directory a run swaps for a link to a host directory meanwhile does
// not lead it out of dir. blind reports entries it could not read (a run
// took the permissions off a directory to hide what it writes there):
// callers treat that as over any limit.
func usage(dir string) (total int64, blind bool, err error) {
	total, blind, _, err = measure(dir, false)
	return total, blind, err
}

// tree is what a folder held before a run: each entry by device and
// inode.
type tree map[fileID]fileState

type fileID struct{ dev, ino uint64 }

type fileState struct{ size, blocks int64 }

// measure is usage, and with keep the folder's entries too.
func measure(dir string, keep bool) (total int64, blind bool, t tree, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, true, nil, err
	}
	defer root.Close()
	if keep {
		t = tree{}
	}
	n := 0
	err = fs.WalkDir(root.FS(), ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				blind = true // unreadable: note it, keep measuring the rest
			}
			return nil
		}
		n++
		if n > maxWalk {
			total += 1 << 40
			return fs.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		total += diskuse.Of(fi)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && keep {
			size, blocks := diskuse.Size(fi)
			t[fileID{uint64(st.Dev), st.Ino}] = fileState{size, blocks}
		}
		return nil
	})
	if n > maxWalk {
		t = nil // too many to take back: a run stopped for disk keeps its files
	}
	return total, blind, t, err
}

// rollBack takes each folder back to what it held before the run (as
// far as sizes go): entries the run created are removed (a folder it
// made only when nothing that was there before lies in it now), files it
// grew are truncated to their size before (and blocks they reserved
// beyond it are given back). Contents the run changed in place stay
// changed: a database the run grew is cut back too, and may be damaged.
// It returns what it did, for the run's Result.
func (s *Sandbox) rollBack(dirs []string, before map[string]tree) string {
	var removed, cut int
	for _, dir := range dirs {
		t := before[dir]
		if t == nil {
			continue
		}
		if err := tend(dir, nil); err != nil { // the run may have hidden a directory
			s.logger.Warn("sandbox: folder not readied for the roll-back", "dir", dir, "err", err)
		}
		r, c, err := rollBackDir(dir, t)
		removed, cut = removed+r, cut+c
		if err != nil {
			s.logger.Warn("sandbox: what a run stopped for disk added was not all taken back", "dir", dir, "err", err)
		}
	}
	if removed == 0 && cut == 0 {
		return ""
	}
	return fmt.Sprintf("; what the run added was taken back (%d new files or folders removed, %d grown files cut back to their size before)", removed, cut)
}

func rollBackDir(dir string, t tree) (removed, cut int, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, 0, err
	}
	defer root.Close()
	var errs []error
	var newDirs []string // removed last, deepest first, and only when empty
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return nil
		}
		if p == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		was, known := t[fileID{uint64(st.Dev), st.Ino}]
		switch {
		case !known && d.IsDir():
			// A folder the run made may hold what was there before (a
			// file the run moved into it): its new entries go, then the
			// folder if nothing else is left in it.
			newDirs = append(newDirs, p)
		case !known:
			if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			} else {
				removed++
			}
		case fi.Mode().IsRegular():
			size, blocks := diskuse.Size(fi)
			if size <= was.size && blocks <= was.blocks {
				return nil
			}
			if err := cutBack(root, p, fi.Mode().Perm(), was); err != nil {
				errs = append(errs, err)
			} else {
				cut++
			}
		}
		return nil
	})
	for i := len(newDirs) - 1; i >= 0; i-- {
		if root.Remove(newDirs[i]) == nil {
			removed++
		}
	}
	return removed, cut, errors.Join(append(errs, err)...)
}

// cutBack truncates the file at p to its size before and gives back the
// blocks reserved beyond that size (fallocate --keep-size). A file the run
// made read-only (while it kept writing through a descriptor it had open)
// gets its owner's write permission for the cut, then its mode back.
func cutBack(root *os.Root, p string, mode os.FileMode, was fileState) error {
	open := func() (*os.File, error) {
		return root.OpenFile(p, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	}
	f, err := open()
	if errors.Is(err, fs.ErrPermission) {
		if cerr := root.Chmod(p, mode|0o200); cerr != nil {
			return err
		}
		defer func() { _ = root.Chmod(p, mode) }()
		f, err = open()
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(was.size); err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if _, blocks := diskuse.Size(fi); blocks > was.blocks {
		const punch = 0x02 | 0x01 // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
		_ = syscall.Fallocate(int(f.Fd()), punch, was.size, 1<<62-was.size)
	}
	return nil
}

// tend readies dir before a run and tidies it after: every directory gets
// its owner's rwx back (a run may chmod 0 a folder, which would hide it
// from the disk check and from the workspace's own quota walk), and with
// as set everything is handed to that account (chown) so that a sandbox
// running as it can use the folder. Symbolic links are changed
// themselves, never followed; the walk goes through an os.Root, so a run
// of the same folder swapping a directory for a link to a host directory
// meanwhile cannot make it touch anything outside dir.
func tend(dir string, as *Account) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	n := 0
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone meanwhile
			}
			return err
		}
		if n++; n > maxWalk {
			return fs.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		// WalkDir calls this for a directory before it reads it: the
		// mode is back in time for the read.
		if fi.IsDir() && fi.Mode().Perm()&0o700 != 0o700 {
			if err := root.Chmod(p, fi.Mode().Perm()|0o700); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		if as == nil {
			return nil
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == as.UID && int(st.Gid) == as.GID {
			return nil
		}
		if err := root.Lchown(p, as.UID, as.GID); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	})
}

// removeAll removes dir even where a run took the write permission off
// its own directories (chmod 0 on a folder under /tmp). The permissions
// are given back through an os.Root: a directory the run swaps for a link
// meanwhile leads nowhere outside dir.
func removeAll(dir string) {
	if err := os.RemoveAll(dir); err == nil {
		return
	}
	if root, err := os.OpenRoot(dir); err == nil {
		_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if d != nil && d.IsDir() {
				_ = root.Chmod(p, 0o700)
			}
			return nil
		})
		root.Close()
	}
	_ = os.RemoveAll(dir)
}
