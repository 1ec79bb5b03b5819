package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// maxWalk bounds the entries one measurement visits: a run that makes
// millions of empty files is stopped by the count, not measured forever.
const maxWalk = 200_000

// usage is the bytes under dir (files' sizes plus a block per entry, so
// that a million empty files count too), stopping at maxWalk entries with
// what it saw so far plus a large penalty. It walks through an os.Root:
// a directory a run swaps for a link to a host directory meanwhile does
// not lead it out of dir.
func usage(dir string, _ int) (int64, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	var total int64
	n := 0
	err = fs.WalkDir(root.FS(), ".", func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skip, keep measuring the rest
		}
		n++
		if n > maxWalk {
			total += 1 << 40
			return fs.SkipAll
		}
		total += 4096
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total, err
}

// handOver makes dir and everything in it owned by uid:gid, so that a
// sandbox running as that account can use the folder. Symbolic links are
// changed themselves, never followed. The walk goes through an os.Root:
// a run of the same folder swapping a directory for a link to a host
// directory meanwhile cannot make it chown anything outside dir.
func handOver(dir string, uid, gid int) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone meanwhile
			}
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		if err := root.Lchown(p, uid, gid); err != nil && !os.IsNotExist(err) {
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
