package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Unreachable is Reach's answer when a directory on the way stops the
// account: bwrap, running as it, could not resolve a bind's source there.
type Unreachable struct {
	Path     string      // the directory asked about
	Dir      string      // the directory that stops the account
	Mode     fs.FileMode // Dir's permissions
	UID, GID int         // Dir's owner and group
	Account  string      // who was stopped ("nobody (uid 65534)")
	// Class is the permission class that applies to the account: "owner",
	// "group" or "others".
	Class string
}

func (u *Unreachable) Error() string {
	return fmt.Sprintf("%s cannot reach %s: %s is %s (owner %s, group %s), closed to it",
		u.Account, u.Path, u.Dir, u.Mode.Perm(), userName(u.UID), groupName(u.GID))
}

// Fix is the chmod that opens Dir to the account: search (x) only, which
// lets it pass through, not list or read.
func (u *Unreachable) Fix() string {
	who := map[string]string{"owner": "u", "group": "g", "others": "o"}[u.Class]
	return fmt.Sprintf("chmod %s+x %s", who, u.Dir)
}

// Reach reports whether the account as can reach dir: search (x) on every
// directory from / down to dir itself, judged by the owner, group and
// others bits the way the kernel does (POSIX ACLs are not read). nil as is
// this process's own user; root reaches everything. The error is an
// *Unreachable naming the first directory that stops it. Symbolic links on
// the way are followed, as bwrap follows them. Components of dir that do
// not exist yet are not judged: the daemon makes them (0750, with its
// group, which its sandbox's account has).
func Reach(dir string, as *Account) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	uid, gids, name := identityOf(as)
	if uid == 0 {
		return nil
	}
	p := abs
	var real string
	for {
		real, err = filepath.EvalSymlinks(p)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || p == "/" {
			return fmt.Errorf("reach %s: %w", abs, err)
		}
		p = filepath.Dir(p)
	}
	walk := "/"
	for _, part := range append([]string{""}, strings.Split(strings.TrimPrefix(real, "/"), "/")...) {
		walk = filepath.Join(walk, part)
		fi, err := os.Stat(walk)
		if err != nil {
			return fmt.Errorf("reach %s: %w", abs, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil // not a Unix file system: no bits to judge
		}
		class, bits := "others", fi.Mode().Perm()&0o7
		switch {
		case int(st.Uid) == uid:
			class, bits = "owner", fi.Mode().Perm()>>6&0o7
		case slices.Contains(gids, int(st.Gid)):
			class, bits = "group", fi.Mode().Perm()>>3&0o7
		}
		if bits&0o1 == 0 {
			return &Unreachable{Path: abs, Dir: walk, Mode: fi.Mode(), UID: int(st.Uid), GID: int(st.Gid), Account: name, Class: class}
		}
	}
	return nil
}

// identityOf is the uid, the groups and a name for as (nil: this process).
func identityOf(as *Account) (uid int, gids []int, name string) {
	if as == nil {
		uid = os.Geteuid()
		gids = append([]int{os.Getegid()}, must(os.Getgroups())...)
		return uid, gids, fmt.Sprintf("the daemon's user %s", userName(uid))
	}
	gids = append([]int{as.GID}, as.Groups...)
	n := as.Name
	if n == "" {
		n = userName(as.UID)
	}
	return as.UID, gids, fmt.Sprintf("the sandbox's account %s (uid %d)", n, as.UID)
}

func must(gs []int, err error) []int {
	if err != nil {
		return nil
	}
	return gs
}

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

func groupName(gid int) string {
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		return g.Name
	}
	return strconv.Itoa(gid)
}

// Host is a daemon as its sandbox sees it: the user and group that own the
// sandbox's files, and the account bwrap runs as (nil: the host's own
// user, which is then this process's).
type Host struct {
	UID, GID int
	As       *Account
}

// Self is this process as a daemon: as root its sandboxes run as nobody
// (Nobody), as New would choose; otherwise as itself.
func Self() Host { return HostFor(os.Geteuid(), os.Getegid()) }

// HostFor is the Host of a daemon running as uid and gid, seen from this
// process (doctor, finding the daemon's user from the state dir's owner):
// root's sandboxes run as nobody; another user's as that user, which only
// root can switch to (elsewhere this process's own user stands in).
func HostFor(uid, gid int) Host {
	h := Host{UID: uid, GID: gid}
	switch {
	case uid == 0:
		h.As = Nobody()
		h.As.Groups = []int{gid} // the daemon's group, not necessarily this process's
	case uid != os.Geteuid() && os.Geteuid() == 0:
		h.As = &Account{UID: uid, GID: gid, Name: userName(uid)}
		if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
			if ids, err := u.GroupIds(); err == nil {
				for _, s := range ids {
					if g, err := strconv.Atoi(s); err == nil && g != gid {
						h.As.Groups = append(h.As.Groups, g)
					}
				}
			}
		}
	}
	return h
}

// fallbackRoot holds the temp dirs of daemons whose state dir their
// sandbox's account cannot reach: on disk (a run's /tmp may hold large
// files; /tmp may be RAM), reachable by everyone.
var fallbackRoot = "/var/tmp"

// TempDir is where h's sandbox keeps its per-run directories (Config's
// TempDir): stateDir/sandbox when h's account can reach it; otherwise a
// directory of h's own, 0750 with h's group, under /var/tmp, named for
// stateDir ("agent-sandbox-" and a hash), with why naming what stops the
// account (nil when the state dir is used). The directory is made (Mkdir,
// not through links) and refused when it exists as a link, as something
// other than a directory or owned by another user: /var/tmp is everyone's.
func (h Host) TempDir(stateDir string) (dir string, why error, err error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: state dir: %w", err)
	}
	primary := filepath.Join(abs, "sandbox")
	why = Reach(primary, h.As)
	var un *Unreachable
	if why == nil {
		return primary, nil, nil
	}
	if !errors.As(why, &un) {
		return "", nil, fmt.Errorf("sandbox: %w", why)
	}
	dir = FallbackTempDir(abs)
	if err := h.ownDir(dir); err != nil {
		return "", why, fmt.Errorf("sandbox: %v; and the fallback %w", why, err)
	}
	if err := Reach(dir, h.As); err != nil {
		return "", why, fmt.Errorf("sandbox: %v; and the fallback: %w", why, err)
	}
	return dir, why, nil
}

// FallbackTempDir is the temp dir under /var/tmp that TempDir falls back
// to for stateDir: "agent-sandbox-" and a hash of its absolute path.
func FallbackTempDir(stateDir string) string {
	if abs, err := filepath.Abs(stateDir); err == nil {
		stateDir = abs
	}
	sum := sha256.Sum256([]byte(stateDir))
	return filepath.Join(fallbackRoot, "agent-sandbox-"+hex.EncodeToString(sum[:6]))
}

// ownDir makes dir (0750) for h, or accepts it when it is already h's
// directory.
func (h Host) ownDir(dir string) error {
	err := os.Mkdir(dir, 0o750)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir():
		return fmt.Errorf("%s is not a directory of the daemon's (%s): remove it", dir, fi.Mode().Type())
	case !ok:
		return fmt.Errorf("%s: no owner to check", dir)
	case int(st.Uid) != h.UID && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s belongs to %s, not the daemon's user %s: remove it", dir, userName(int(st.Uid)), userName(h.UID))
	}
	if int(st.Uid) != h.UID || int(st.Gid) != h.GID {
		// Made by root for another daemon user (doctor): it is theirs.
		if err := os.Lchown(dir, h.UID, h.GID); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}
