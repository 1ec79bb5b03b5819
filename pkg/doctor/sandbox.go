package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"agent/pkg/sandbox"
	"agent/pkg/sandboxsetup"
)

// sandboxPrograms are what the sandboxed tools run inside, from the box's
// /usr: without one, that tool fails (and says so) while the rest work.
var sandboxPrograms = []struct{ bin, pkg, what string }{
	{"pdftotext", "poppler-utils", "read_document cannot read PDFs"},
	{"ffmpeg", "ffmpeg", "the video tools fail"},
	{"ffprobe", "ffmpeg", "the video tools fail"},
	{"espeak-ng", "espeak-ng", "generate_video cannot speak narration"},
}

// checkSandbox builds the sandbox the daemon builds (sandboxsetup: the
// same account, the same place for its own files, the same folders) and
// runs the daemon's probe in it, as the daemon does before it offers exec,
// PDF reading and the video tools: the verdict is the daemon's. The
// daemon's user is the state dir's owner; doctor run as root takes it on
// (as root, the daemon's sandbox runs as nobody), as another user it can
// only probe as itself, and says so.
func (e Env) checkSandbox(ctx context.Context) Result {
	host, note := daemonHost(e.Config.Agent.StateDir)
	set, err := sandboxsetup.For(e.Config, host, sandbox.Config{Bwrap: e.Bwrap})
	chosen := set.Config.TempDir
	var sb *sandbox.Sandbox
	if err == nil {
		var cleanup func()
		cleanup, err = doctorTempDir(&set, host)
		if err == nil {
			defer cleanup()
			sb, err = sandbox.New(set.Config)
		}
	}
	if err == nil {
		// Root probing for another user writes nothing where that user
		// could swap it for a link (doctorTempDir).
		set.Folders.Untouched = os.Geteuid() == 0 && host.UID != 0
		err = sb.ProbeFolders(ctx, set.Folders)
	}
	if err != nil {
		fix := "see the detail: it names the cause and the fix"
		var un *sandbox.Unreachable
		switch {
		case strings.Contains(err.Error(), "not installed"):
			fix = "apt install bubblewrap"
		case errors.As(err, &un):
			fix = un.Fix() + ", or put agent.workspace and agent.state_dir outside " + un.Dir
		}
		return Result{Level: Warn, Detail: "exec, read_document (PDFs) and the video tools are NOT offered: " + err.Error() + note, Fix: fix}
	}
	lim := sb.Limits()
	net := "off"
	if sb.NetworkAllowed() {
		net = "on when a run asks"
	}
	res := Result{Level: OK, Detail: fmt.Sprintf("bubblewrap works (network %s; per run %s, %d CPU s, %d MB, %d processes, %d KB output); exec, read_document and the video tools are offered",
		net, lim.Timeout, lim.CPUSeconds, lim.MemoryMB, lim.MaxProcs, lim.OutputKB)}
	var missing, fixes []string
	for _, p := range sandboxPrograms {
		if _, err := exec.LookPath("/usr/bin/" + p.bin); err != nil {
			missing = append(missing, p.bin+" missing: "+p.what)
			fixes = append(fixes, "apt install "+p.pkg)
		}
	}
	if set.Moved != nil {
		res.Detail += fmt.Sprintf("; its runs' files are in %s, not the state dir (%v)", chosen, set.Moved)
	}
	res.Detail += note
	if len(missing) > 0 {
		res.Level = Warn
		res.Detail += "; but " + strings.Join(missing, "; ")
		res.Fix = strings.Join(fixes, "; ")
	}
	return res
}

// daemonHost is the daemon as its sandbox sees it: the state dir's owner
// (this process when there is none yet). note says when doctor cannot
// take on that user (not root) and probes as itself.
func daemonHost(stateDir string) (sandbox.Host, string) {
	fi, err := os.Stat(stateDir)
	if err != nil {
		return sandbox.Self(), ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return sandbox.Self(), ""
	}
	uid, gid := int(st.Uid), int(st.Gid)
	if uid != os.Geteuid() && os.Geteuid() != 0 {
		return sandbox.Self(), fmt.Sprintf(" (probed as doctor's user, not the daemon's (uid %d): run doctor as root to probe as the daemon does)", uid)
	}
	return sandbox.HostFor(uid, gid), ""
}

// doctorTempDir points set at a folder of doctor's own: inside the
// daemon's temp dir (the same path, reached the same way; a sandbox clears
// leftover runs in its temp dir when it starts, and those may be the
// running daemon's), and removed afterwards. Doctor run as root for a
// daemon of another user makes it in a directory of root's instead (group
// the daemon's, so that its bwrap reaches it): root must not make and
// hand over (chown) folders in a directory that user owns, who could swap
// them for links to anything on the box. Where the daemon has not made
// its temp dir yet, or doctor may not write in it, a temporary directory
// stands in too.
func doctorTempDir(set *sandboxsetup.Setup, host sandbox.Host) (func(), error) {
	set.Config.NoCgroups = true // doctor is no service of its own: it moves no cgroups
	asRoot := os.Geteuid() == 0 && host.UID != 0
	var dir string
	err := errors.New("root for another user")
	if !asRoot {
		dir, err = os.MkdirTemp(set.Config.TempDir, "doctor-")
	}
	if err != nil {
		dir, err = os.MkdirTemp("", "agent-doctor-sandbox-")
		if err != nil {
			return nil, fmt.Errorf("cannot make a temporary directory: %w", err)
		}
	}
	cleanup := func() { os.RemoveAll(dir) }
	if asRoot {
		if err := os.Chown(dir, 0, host.GID); err != nil {
			cleanup()
			return nil, err
		}
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		cleanup()
		return nil, err
	}
	set.Config.TempDir = dir
	return cleanup, nil
}
