// Package sandbox runs untrusted commands (the model's shell commands,
// document converters, ffmpeg on a user's files) inside bubblewrap.
//
// Every run gets new user, mount, PID, IPC, UTS and cgroup namespaces and,
// unless it asks for the network and the config allows it, a network
// namespace of its own with nothing in it but a loopback interface. The
// system (/usr and what programs need of /etc) is mounted read-only; the
// caller's folder is the only writable place besides a private /tmp; the
// environment is built from nothing. Limits on wall time, CPU seconds,
// address space, processes, file size, output and disk use end a run that
// goes over them, and the Result says which.
//
// There is no fallback: when bwrap is missing or cannot create namespaces,
// Run fails and Probe says why and how to fix it. Callers offer the tools
// that need a sandbox only when Probe passes.
package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"agent/pkg/clock"
)

// Limits bound one run. Zero fields take the defaults (DefaultLimits).
type Limits struct {
	Timeout    time.Duration // wall time
	CPUSeconds int           // CPU time of each process
	MemoryMB   int           // address space of each process
	MaxProcs   int           // processes and threads of the run together
	FileMB     int           // the largest file a run may write
	OutputKB   int           // stdout and stderr kept, each; more ends the run
}

// DefaultLimits are safe for a 2 GB box running a few runs at once.
var DefaultLimits = Limits{
	Timeout:    60 * time.Second,
	CPUSeconds: 60,
	MemoryMB:   512,
	MaxProcs:   64,
	FileMB:     100,
	OutputKB:   64,
}

// Or is l with each zero (or negative) field taken from def.
func (l Limits) Or(def Limits) Limits {
	if l.Timeout <= 0 {
		l.Timeout = def.Timeout
	}
	if l.CPUSeconds <= 0 {
		l.CPUSeconds = def.CPUSeconds
	}
	if l.MemoryMB <= 0 {
		l.MemoryMB = def.MemoryMB
	}
	if l.MaxProcs <= 0 {
		l.MaxProcs = def.MaxProcs
	}
	if l.FileMB <= 0 {
		l.FileMB = def.FileMB
	}
	if l.OutputKB <= 0 {
		l.OutputKB = def.OutputKB
	}
	return l
}

// Config of a Sandbox.
type Config struct {
	// Bwrap is the bubblewrap binary; "" looks up "bwrap" in PATH.
	Bwrap string
	// Limits of a run whose Spec leaves them zero.
	Limits Limits
	// Network says whether runs may have the network at all (config
	// sandbox.network = "on"); a run also has to ask for it.
	Network bool
	// Python is the interpreter that python3 and python name inside
	// (sandbox.python); "" is python3. A name is looked up in /usr's bin
	// directories; an absolute path must lie under /usr.
	Python string
	// TempDir holds the per-run /tmp directories (the state dir's
	// sandbox/). Required; made 0750 (an Account reads it by group).
	TempDir string
	// As runs bwrap as this account instead of the daemon's own. A daemon
	// running as root sets it (New does so when it is nil): a sandbox
	// never runs as the real root, whose processes no process limit binds.
	As *Account
	// MaxRuns bounds the runs at once; more wait their turn (0: 4).
	MaxRuns int
	// MinFreeMB stops a run when its folder's filesystem has less free
	// (agent.disk_reserve_mb; 0: 256, negative: no floor).
	MinFreeMB int
	// NoCgroups keeps runs out of cgroups of their own even where the
	// daemon could make them (tests that measure the difference).
	NoCgroups bool
	Clock     clock.Clock
	Logger    *slog.Logger
}

// Account is a user the sandbox runs as: the writable folders of a run are
// handed to it (chown) first, and Groups lets it read the read-only binds.
type Account struct {
	UID, GID int
	Groups   []int
	Name     string
}

// Bind is a host path made visible inside at Dst.
type Bind struct {
	Src, Dst string
	Write    bool
}

// Spec is one run.
type Spec struct {
	// Argv is the command inside the sandbox; Argv[0] is an absolute path
	// or a name looked up in PATH inside.
	Argv []string
	// Work is the host folder bound read-write at /work, the working
	// directory and $HOME. "" runs in an empty /work.
	Work string
	// Binds are more paths, read-only unless Write.
	Binds []Bind
	Stdin []byte
	// Network asks for the network; it is granted only when the
	// Config allows it.
	Network bool
	// Limits of this run; zero fields take the Config's.
	Limits Limits
	// MaxWrite bounds the bytes the run may add to its writable folders
	// and /tmp together (a user's remaining quota); 0: no bound but
	// MinFreeMB.
	MaxWrite int64
	// Env adds variables (KEY=value) to the clean environment.
	Env []string
	// Files are read-only files made inside from bytes (a skill's
	// credentials): the host file need not be readable by the sandbox's
	// account, and nothing is written to disk.
	Files []DataFile
}

// DataFile is a file inside a run with the given content, read-only.
type DataFile struct {
	Dst  string
	Data []byte
}

// MaxDataFile bounds one DataFile.
const MaxDataFile = 1 << 20

// Limit names what ended a run early.
type Limit string

// The limits a Result may report.
const (
	LimitNone     Limit = ""
	LimitTime     Limit = "time"
	LimitCPU      Limit = "cpu"
	LimitOutput   Limit = "output"
	LimitFileSize Limit = "file size"
	LimitDisk     Limit = "disk"
	// LimitMemory: the run, all its processes together, went over its
	// memory (a cgroup's memory.max; the kernel killed it).
	LimitMemory Limit = "memory"
	// LimitCancelled: the caller gave up (the turn was cancelled, the
	// daemon is stopping).
	LimitCancelled Limit = "cancelled"
)

// Result of a run that started. Exit is the command's exit status (128+N
// when signal N ended it, -1 when the sandbox killed it).
type Result struct {
	Exit           int
	Stdout, Stderr []byte
	// StdoutDropped and StderrDropped count bytes printed past OutputKB.
	StdoutDropped, StderrDropped int64
	Limit                        Limit
	// Detail says more about Limit ("60 s", "512 MB"...).
	Detail  string
	Elapsed time.Duration
	// Network says whether the run had the network.
	Network bool
}

// ErrUnavailable is wrapped by Run and Probe when bwrap cannot run here.
var ErrUnavailable = errors.New("sandbox unavailable")

// Sandbox runs Specs. Safe for concurrent use.
type Sandbox struct {
	cfg    Config
	bwrap  string
	python string
	slots  chan struct{}
	clock  clock.Clock
	logger *slog.Logger

	mu       sync.Mutex
	features map[string]bool // bwrap options this version has

	// cg gives each run a cgroup of its own; nil where the box cannot
	// (cgNote says why): the per-process limits are then all there is.
	cg     *cgroupTree
	cgNote string
	// mark names this sandbox's runs in their command lines
	// ("agent-sandbox-" and a hash of TempDir).
	mark string
	// seccomp is the filter every run gets (seccomp.go); nil: none.
	seccomp []byte
}

// New checks cfg (bwrap found, python resolvable, TempDir usable) and
// returns the Sandbox. It does not start bwrap: Probe does.
func New(cfg Config) (*Sandbox, error) {
	s := &Sandbox{cfg: cfg, clock: clock.Or(cfg.Clock), logger: cfg.Logger}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.cfg.Limits = cfg.Limits.Or(DefaultLimits)
	if s.cfg.MaxRuns <= 0 {
		s.cfg.MaxRuns = 4
	}
	switch {
	case s.cfg.MinFreeMB == 0:
		s.cfg.MinFreeMB = 256
	case s.cfg.MinFreeMB < 0:
		s.cfg.MinFreeMB = 0 // no floor (agent.disk_reserve_mb = 0)
	}
	s.slots = make(chan struct{}, s.cfg.MaxRuns)
	if s.cfg.TempDir == "" {
		return nil, errors.New("sandbox: Config.TempDir is required")
	}
	if s.cfg.As == nil && os.Geteuid() == 0 {
		s.cfg.As = Nobody()
	}
	bw := cfg.Bwrap
	if bw == "" {
		bw = "bwrap"
	}
	p, err := exec.LookPath(bw)
	if err != nil {
		return nil, fmt.Errorf("%w: bubblewrap (bwrap) is not installed or not in PATH: install it (apt install bubblewrap)", ErrUnavailable)
	}
	s.bwrap = p
	py, err := resolvePython(cfg.Python)
	if err != nil {
		return nil, err
	}
	s.python = py
	if err := os.MkdirAll(s.cfg.TempDir, 0o750); err != nil {
		return nil, fmt.Errorf("sandbox: temp dir: %w", err)
	}
	if err := os.Chmod(s.cfg.TempDir, 0o750); err != nil {
		return nil, fmt.Errorf("sandbox: temp dir: %w", err)
	}
	if cfg.NoCgroups {
		s.cgNote = "per-run cgroups switched off"
	} else if cg, err := openCgroups(cgroupRoot); err != nil {
		s.cgNote = err.Error()
		s.logger.Info("sandbox: runs get per-process limits only, no cgroup of their own", "why", err)
	} else {
		s.cg = cg
		s.logger.Info("sandbox: each run gets a cgroup of its own", "under", cg.dir)
	}
	sum := sha256.Sum256([]byte(s.cfg.TempDir))
	s.mark = "agent-sandbox-" + hex.EncodeToString(sum[:6])
	s.seccomp = seccompProgram(runtime.GOARCH)
	// What runs left when the daemon was killed mid-run: their processes
	// (a bwrap killed while it set a run up can leave its other half
	// waiting for it forever) and their folders.
	if n := sweep(procRoot, s.mark); n > 0 {
		s.logger.Warn("sandbox: processes an earlier daemon's runs left were ended", "count", n)
	}
	for _, pat := range []string{"run-*", "probe-*"} {
		old, _ := filepath.Glob(filepath.Join(s.cfg.TempDir, pat))
		for _, d := range old {
			removeAll(d)
		}
	}
	return s, nil
}

// Nobody is the account a root daemon's sandboxes run as: nobody, in
// nogroup, with the daemon's group to read the read-only binds.
func Nobody() *Account {
	return &Account{UID: 65534, GID: 65534, Groups: []int{os.Getgid()}, Name: "nobody"}
}

// resolvePython finds the interpreter python3 names inside.
func resolvePython(name string) (string, error) {
	if name == "" {
		name = "python3"
	}
	if strings.HasPrefix(name, "/") {
		clean := filepath.Clean(name)
		if !strings.HasPrefix(clean, "/usr/") {
			return "", fmt.Errorf("sandbox.python %q: an absolute path must lie under /usr (only /usr is visible inside the sandbox)", name)
		}
		return clean, nil
	}
	if strings.ContainsAny(name, "/ \t") {
		return "", fmt.Errorf("sandbox.python %q: give a program name like python3 or an absolute path under /usr", name)
	}
	for _, dir := range []string{"/usr/local/bin", "/usr/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	// Not fatal: exec still works for shell commands; Probe reports it.
	return filepath.Join("/usr/bin", name), nil
}

// Cgroups says how runs are bounded: "" when each run has a cgroup of its
// own (memory, processes and CPU for the whole run), else why not.
func (s *Sandbox) Cgroups() (under string, whyNot string) {
	if s.cg != nil {
		return s.cg.dir, ""
	}
	return "", s.cgNote
}

// Limits are the Config's limits with defaults filled in.
func (s *Sandbox) Limits() Limits { return s.cfg.Limits }

// NetworkAllowed reports whether runs may ask for the network.
func (s *Sandbox) NetworkAllowed() bool { return s.cfg.Network }

// Python is the interpreter python3 runs inside.
func (s *Sandbox) Python() string { return s.python }

// Run runs spec and returns its Result. An error means the run did not
// start or the sandbox itself failed (bwrap missing, a bind that does not
// exist); a command that fails or goes over a limit is a Result.
func (s *Sandbox) Run(ctx context.Context, spec Spec) (*Result, error) {
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return nil, errors.New("sandbox: empty command")
	}
	lim := s.cfg.Limits
	if spec.Limits != (Limits{}) {
		lim = spec.Limits.Or(s.cfg.Limits)
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("sandbox: waiting for a free slot: %w", ctx.Err())
	}
	defer func() { <-s.slots }()

	run, err := os.MkdirTemp(s.cfg.TempDir, "run-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer removeAll(run)
	tmp := filepath.Join(run, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	writable := []string{tmp}
	if spec.Work != "" {
		writable = append(writable, spec.Work)
	}
	for _, b := range spec.Binds {
		if b.Write {
			writable = append(writable, b.Src)
		}
	}
	for _, w := range writable {
		if err := tend(w, s.cfg.As); err != nil {
			return nil, fmt.Errorf("sandbox: prepare %s: %w", w, err)
		}
	}
	// Afterwards the folder's directories are the owner's again, whatever
	// the run did to their modes (the workspace's quota walk reads them).
	defer func() {
		for _, w := range writable[1:] { // the run's own /tmp goes anyway
			if err := tend(w, nil); err != nil {
				s.logger.Warn("sandbox: folder not tidied after a run", "dir", w, "err", err)
			}
		}
	}()
	args, data, err := s.args(spec, lim, run, tmp)
	if err != nil {
		return nil, err
	}
	network := spec.Network && s.cfg.Network
	return s.start(ctx, args, data, spec, lim, writable, network)
}

// env is the whole environment inside: nothing of the daemon's.
func (s *Sandbox) env(extra []string) []string {
	env := []string{
		"PATH=" + binDir + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=/work",
		"TMPDIR=/tmp",
		"LANG=C.UTF-8",
		"USER=sandbox",
		"LOGNAME=sandbox",
		"SHELL=/bin/sh",
		"TERM=dumb",
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONIOENCODING=utf-8",
	}
	for _, e := range extra {
		if k, _, ok := strings.Cut(e, "="); ok && k != "" {
			env = append(env, e)
		}
	}
	return env
}

// start runs bwrap with args and watches the run until it ends.
func (s *Sandbox) start(ctx context.Context, args []string, data []DataFile, spec Spec, lim Limits, writable []string, network bool) (*Result, error) {
	// The options go through the pipe; the command (from "--" on) stays
	// in argv, where bwrap looks for it.
	dash := slices.Index(args, "--")
	if dash < 0 {
		return nil, errors.New("sandbox: no command in bwrap's arguments")
	}
	cmd := exec.Command(s.bwrap, append([]string{"--args", strconv.Itoa(argsFD)}, args[dash:]...)...)
	cmd.Env = s.env(spec.Env)
	cmd.Dir = "/"
	var cgroup *runCgroup
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if a := s.cfg.As; a != nil {
		groups := make([]uint32, 0, len(a.Groups))
		for _, g := range a.Groups {
			groups = append(groups, uint32(g))
		}
		attr.Credential = &syscall.Credential{Uid: uint32(a.UID), Gid: uint32(a.GID), Groups: groups}
	}
	if s.cg != nil {
		rc, err := s.cg.newRun(lim)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		// The last thing to run: whatever of the run is left is killed
		// with its cgroup.
		defer rc.close()
		attr.UseCgroupFD, attr.CgroupFD = true, rc.fd
		cgroup = rc
	}
	cmd.SysProcAttr = attr
	if len(spec.Stdin) > 0 {
		cmd.Stdin = strings.NewReader(string(spec.Stdin))
	}
	max := int64(lim.OutputKB) << 10
	killed := make(chan killReason, 4)
	over := func() { killed <- killReason{limit: LimitOutput, detail: fmt.Sprintf("%d KB", lim.OutputKB)} }
	stdout := newCapped(max, over)
	stderr := newCapped(max, over)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// started learns that bwrap set the sandbox up and the command began
	// (the prelude writes a byte to fd 3): bwrap's own failures are told
	// apart from the command's without reading its stderr.
	startR, startW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer startR.Close()
	// The lifeline: the run's watchdog reads its end (fd lifeFD) until
	// the daemon's end closes, which happens when the daemon is gone.
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	defer lifeW.Close()
	defer lifeR.Close()
	// The command line (NUL-separated, fd argsFD) and each DataFile's
	// bytes (fd firstDataFD, ..., in the order args numbered them) come
	// through pipes bwrap reads.
	cmd.ExtraFiles = []*os.File{startW, nil, lifeR} // fd 3, argsFD, lifeFD
	for i, b := range append([][]byte{nulJoin(args[:dash])}, dataBytes(data)...) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		defer r.Close()
		if i == 0 {
			cmd.ExtraFiles[argsFD-3] = r
		} else {
			cmd.ExtraFiles = append(cmd.ExtraFiles, r)
		}
		go func(b []byte) {
			_, _ = w.Write(b) // fails only when bwrap died first
			w.Close()
		}(b)
	}
	// What the folders hold before the command starts: its writes are
	// what grows past this, and what a run stopped for disk is taken
	// back to (the folders it leaves behind, not its own /tmp).
	base := map[string]int64{}
	before := map[string]tree{}
	for i, w := range writable {
		if i == 0 {
			base[w], _, _ = usage(w)
			continue
		}
		var t tree
		// Only a run with a quota is taken back: only then is the
		// folder's inventory kept.
		base[w], _, t, _ = measure(w, spec.MaxWrite > 0)
		before[w] = t
	}
	fs0 := freeSpace(writable)
	start := s.clock.Now()
	err = cmd.Start()
	startW.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: start bwrap: %v", ErrUnavailable, err)
	}
	startedCh := make(chan bool, 1)
	go func() {
		n, _ := startR.Read(make([]byte, 1))
		startedCh <- n > 0
		_, _ = io.Copy(io.Discard, startR) // until bwrap exits
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	timer := s.clock.NewTimer(lim.Timeout)
	defer timer.Stop()
	// The disk is watched at two speeds: the free space of the folders'
	// filesystems often (a statfs), the folders themselves (a walk)
	// every diskEvery and as soon as the filesystems lost what the run
	// may still write, or came near the reserve.
	watch := s.clock.NewTimer(freeEvery)
	defer func() { watch.Stop() }()
	ticks := 0
	var reason killReason
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case <-ctx.Done():
			reason = killReason{limit: LimitCancelled, detail: context.Cause(ctx).Error()}
		case <-timer.C():
			reason = killReason{limit: LimitTime, detail: fmt.Sprintf("%s wall time", lim.Timeout)}
		case reason = <-killed:
		case <-watch.C():
			ticks++
			if ticks%int(diskEvery/freeEvery) == 0 || s.diskPressed(spec, writable, fs0) {
				if r, over := s.overDisk(spec, writable, base); over {
					reason = r
					break
				}
			}
			watch = s.clock.NewTimer(freeEvery)
			continue
		}
		// Over a limit: kill the whole run (bwrap and, through its PID
		// namespace, everything inside) and wait for it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		waitErr = <-done
		break
	}
	res := &Result{
		Stdout: stdout.Bytes(), Stderr: stderr.Bytes(),
		StdoutDropped: stdout.dropped, StderrDropped: stderr.dropped,
		Elapsed: s.clock.Now().Sub(start), Network: network,
		Limit: reason.limit, Detail: reason.detail,
	}
	res.Exit = exitCode(cmd.ProcessState, waitErr)
	if reason.limit == LimitNone && spec.MaxWrite > 0 {
		// A run that ended between two measurements is measured once
		// more: what it wrote past the quota does not stay either. (Its
		// directories get their owner's permissions back first: a run
		// that ended is not hiding anything, and a disk that came down to
		// the reserve meanwhile does not make a finished run a stopped
		// one.)
		for _, w := range writable {
			_ = tend(w, nil)
		}
		if r, over := s.overDisk(spec, writable, base); over && r.takeBack {
			reason = r
			res.Limit, res.Detail = r.limit, r.detail
		}
	}
	if reason.limit == LimitNone && cgroup != nil && cgroup.oomKilled() {
		reason = killReason{limit: LimitMemory, detail: fmt.Sprintf("%d MB for the whole run", lim.MemoryMB)}
		res.Limit, res.Detail = reason.limit, reason.detail
	}
	if reason.takeBack {
		// Nothing of the run is left running: take back what it added,
		// so that the folder ends where it began, not over its quota.
		res.Detail += s.rollBack(writable[1:], before)
	}
	if reason.limit != LimitNone {
		res.Exit = -1
		return res, nil
	}
	if started := <-startedCh; !started {
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, firstLine(string(res.Stderr)))
	}
	switch res.Exit {
	case 128 + int(syscall.SIGXCPU), 128 + int(syscall.SIGKILL):
		if res.Exit == 128+int(syscall.SIGXCPU) || cpuSpent(cmd.ProcessState) >= time.Duration(lim.CPUSeconds)*time.Second {
			res.Limit, res.Detail = LimitCPU, fmt.Sprintf("%d CPU seconds", lim.CPUSeconds)
		}
	case 128 + int(syscall.SIGXFSZ):
		res.Limit, res.Detail = LimitFileSize, fmt.Sprintf("%d MB per file", lim.FileMB)
	}
	if res.Limit == LimitNone && strings.Contains(string(res.Stderr), "File size limit exceeded") {
		// The shell reports a command it ran that the limit killed, and
		// goes on: the run was not killed, but a file was cut short.
		res.Limit, res.Detail = LimitFileSize, fmt.Sprintf("%d MB per file; a command was stopped", lim.FileMB)
	}
	return res, nil
}

func dataBytes(data []DataFile) [][]byte {
	out := make([][]byte, len(data))
	for i, f := range data {
		out[i] = f.Data
	}
	return out
}

// nulJoin is args as bwrap's --args reads them: each followed by a NUL.
func nulJoin(args []string) []byte {
	var b []byte
	for _, a := range args {
		b = append(append(b, a...), 0)
	}
	return b
}

type killReason struct {
	limit  Limit
	detail string
	// takeBack: the run itself went over what its folder had left (or
	// hid what it wrote): what it added is taken back. A run stopped
	// because the disk came down to the reserve keeps its files: the
	// space may have gone to another user's run.
	takeBack bool
}

// diskEvery is how often a run's folders are measured (walked);
// freeEvery how often their filesystems' free space is read.
const (
	diskEvery = 250 * time.Millisecond
	freeEvery = 25 * time.Millisecond
)

// freeSpace is the free bytes of each filesystem the folders lie on, by
// filesystem.
func freeSpace(dirs []string) map[[2]int32]uint64 {
	out := map[[2]int32]uint64{}
	for _, d := range dirs {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err == nil {
			out[st.Fsid.X__val] = st.Bavail * uint64(st.Bsize)
		}
	}
	return out
}

// diskPressed reports whether the folders' filesystems lost, since the
// run began, as much as the run may write, or came under the reserve: a
// walk then says whether the run is to blame. Other writers make it
// fire early, never late.
func (s *Sandbox) diskPressed(spec Spec, writable []string, fs0 map[[2]int32]uint64) bool {
	var lost uint64
	for id, now := range freeSpace(writable) {
		if now < uint64(s.cfg.MinFreeMB)<<20 {
			return true
		}
		if was := fs0[id]; was > now {
			lost += was - now
		}
	}
	return spec.MaxWrite > 0 && lost >= uint64(spec.MaxWrite)
}

// overDisk reports whether the run grew its writable folders past
// spec.MaxWrite or left less than MinFreeMB free.
func (s *Sandbox) overDisk(spec Spec, writable []string, base map[string]int64) (killReason, bool) {
	var grown int64
	for _, w := range writable {
		n, blind, _ := usage(w)
		if blind {
			// Fail closed: what cannot be measured may be anything.
			return killReason{limit: LimitDisk, detail: "a folder could not be measured: the run took the permissions off a directory", takeBack: true}, true
		}
		grown += n - base[w]
	}
	if spec.MaxWrite > 0 && grown > spec.MaxWrite {
		return killReason{limit: LimitDisk, detail: fmt.Sprintf("wrote %d MB, over the %d MB the folder has left", grown>>20, spec.MaxWrite>>20), takeBack: true}, true
	}
	// Every filesystem the run writes to: /tmp lies in the state dir, the
	// folder in agent.workspace, maybe another disk.
	for _, w := range writable {
		free, err := diskFree(w)
		if err == nil && free < uint64(s.cfg.MinFreeMB)<<20 {
			return killReason{limit: LimitDisk, detail: fmt.Sprintf("the disk is nearly full (%d MB free; the box keeps %d MB)", free>>20, s.cfg.MinFreeMB)}, true
		}
	}
	return killReason{}, false
}

func diskFree(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// cpuSpent is the CPU time of the run's processes bwrap waited for.
func cpuSpent(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// capped keeps the first max bytes written and counts the rest; the first
// byte past max calls over once.
type capped struct {
	mu      sync.Mutex
	buf     []byte
	max     int64
	dropped int64
	over    func()
	fired   bool
}

func newCapped(max int64, over func()) *capped { return &capped{max: max, over: over} }

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - int64(len(c.buf))
	if room > 0 {
		n := min(int64(len(p)), room)
		c.buf = append(c.buf, p[:n]...)
		c.dropped += int64(len(p)) - n
	} else {
		c.dropped += int64(len(p))
	}
	if c.dropped > 0 && !c.fired {
		c.fired = true
		c.over()
	}
	return len(p), nil
}

func (c *capped) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}

var _ io.Writer = (*capped)(nil)
