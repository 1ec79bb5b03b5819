package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"agent/pkg/statedir"
	"agent/pkg/store"
)

// maxWorkspaceScan bounds the walk over the workspace: doctor answers in
// seconds on a Jetson whatever users stored.
const maxWorkspaceScan = 20000

// checkPermissions reports files at rest that other local users can read:
// the state dir (beyond 0750), the database and its WAL and shared-memory
// file and anything else in the state dir (beyond 0600), and the workspace
// (users' private files: nothing for others). Each finding names the path,
// its mode and the chmod that fixes it. A file others can read is a
// failure; group access or a loose directory is a warning (the daemon
// tightens the state dir and the database at its next start).
func (e Env) checkPermissions(ctx context.Context) Result {
	var fails, warns, fixes []string
	add := func(fail bool, detail, fix string) {
		if fail {
			fails = append(fails, detail)
		} else {
			warns = append(warns, detail)
		}
		fixes = append(fixes, fix)
	}
	dir := e.Config.Agent.StateDir
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// checkStateDir says it is created at start (0750).
	case err != nil:
		add(false, "cannot read "+dir+": "+err.Error(), "")
	case st.IsDir():
		if loose := statedir.Loose(st.Mode()); loose != 0 {
			want := st.Mode().Perm() & statedir.DirMode
			add(false, fmt.Sprintf("state dir %s is %04o (%s)", dir, st.Mode().Perm(), who(loose)), fmt.Sprintf("chmod %o %s", want, dir))
		}
		e.stateFiles(dir, st.Mode().Perm(), add)
	}
	if ws := e.Config.Agent.Workspace; ws != "" {
		e.workspaceFiles(ctx, ws, add)
	}
	fixes = compact(fixes)
	switch {
	case len(fails) > 0:
		return Result{Level: Fail, Detail: strings.Join(append(fails, warns...), "; "), Fix: strings.Join(fixes, "; ")}
	case len(warns) > 0:
		return Result{Level: Warn, Detail: strings.Join(warns, "; "), Fix: strings.Join(fixes, "; ")}
	}
	return Result{Level: OK, Detail: fmt.Sprintf("%s and the database private to the service user; workspace not open to others", dir)}
}

// stateFiles: every regular file directly in the state dir (the database,
// its companions, the lock, a database moved aside) is 0600. A file others
// can read fails the check when they can reach it (the dir has o+x).
func (e Env) stateFiles(dir string, dirMode os.FileMode, add func(bool, string, string)) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		add(false, "cannot list "+dir+": "+err.Error(), "")
		return
	}
	for _, de := range entries {
		if !de.Type().IsRegular() {
			continue // the admin socket, subdirectories: their owners set them
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		m := fi.Mode().Perm()
		if m&0o077 == 0 {
			continue
		}
		p := filepath.Join(dir, de.Name())
		what := "file"
		if strings.HasPrefix(de.Name(), store.FileName) {
			what = "database file"
		}
		add(m&0o004 != 0 && dirMode&0o001 != 0, fmt.Sprintf("%s %s is %04o (%s)", what, p, m, who(m&0o077)), fmt.Sprintf("chmod %o %s", store.FileMode, p))
	}
}

// workspaceFiles: nothing in the workspace is open to others. A folder
// others cannot enter (no o+x, like the per-user folders) hides what is in
// it, so the walk does not descend into it; it stops after
// maxWorkspaceScan entries or when ctx ends.
func (e Env) workspaceFiles(ctx context.Context, ws string, add func(bool, string, string)) {
	var open []string
	var dirOpen bool
	seen := 0
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == ws {
				return err
			}
			return nil // unreadable entry: not ours to judge
		}
		if seen++; seen > maxWorkspaceScan {
			return fs.SkipAll
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		m := fi.Mode().Perm()
		if m&0o007 != 0 {
			if p == ws {
				dirOpen = true
			} else {
				open = append(open, p)
			}
		}
		if d.IsDir() && m&0o001 == 0 {
			return fs.SkipDir
		}
		return nil
	})
	switch {
	case errors.Is(err, os.ErrNotExist):
		return
	case err != nil && ctx.Err() == nil:
		add(false, "cannot read workspace "+ws+": "+err.Error(), "")
		return
	}
	fix := "chmod -R o-rwx " + ws
	if dirOpen {
		add(false, fmt.Sprintf("workspace %s is open to others", ws), fix)
	}
	if len(open) > 0 {
		detail := fmt.Sprintf("%d file(s) or folder(s) in the workspace are open to others (first: %s)", len(open), open[0])
		if seen > maxWorkspaceScan {
			detail += fmt.Sprintf(" among the first %d entries", maxWorkspaceScan)
		}
		add(false, detail, fix)
	}
}

// who names the classes perm bits open: "group-readable", "readable by others" ...
func who(bits os.FileMode) string {
	var parts []string
	if bits&0o070 != 0 {
		parts = append(parts, "group "+rwx(bits>>3&7))
	}
	if bits&0o007 != 0 {
		parts = append(parts, "others "+rwx(bits&7))
	}
	return strings.Join(parts, ", ")
}

func rwx(b os.FileMode) string {
	s := []byte("---")
	for i, c := range "rwx" {
		if b&(4>>i) != 0 {
			s[i] = byte(c)
		}
	}
	return string(s)
}

func compact(fixes []string) []string {
	seen := map[string]bool{}
	out := fixes[:0]
	for _, f := range fixes {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}
