package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, true, err
	}
	defer root.Close()
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
		if fi, err := d.Info(); err == nil {
			total += diskuse.Of(fi)
		}
		return nil
	})
	return total, blind, err
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
// its own directories (chmod 0 on a folder under /tmp).
func removeAll(dir string) {
	if err := os.RemoveAll(dir); err == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}
