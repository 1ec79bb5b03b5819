package sandbox

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupTree is the cgroup v2 subtree the daemon was delegated (the
// service's own cgroup under Delegate=): the daemon moves itself into a
// leaf of it ("daemon") and puts each run into a cgroup of its own beside
// that leaf, whose memory.max, pids.max and cpu.max bound the whole run,
// every process of it together. A run's cgroup is killed whole when the
// run ends, and under systemd the service's cgroup holds every run, so
// that no process of a run outlives the service.
type cgroupTree struct {
	dir string // the delegated cgroup, e.g. /sys/fs/cgroup/system.slice/agent.service
	cpu bool   // the cpu controller is there too
}

// cgroupRoot is where the cgroup v2 hierarchy is looked for (tests of
// the detection give a fixture).
const cgroupRoot = "/sys/fs/cgroup"

// openCgroups finds the daemon's own cgroup and readies it for runs, or
// says why runs cannot have cgroups here (then the per-process limits are
// all there is).
func openCgroups(mount string) (*cgroupTree, error) {
	own, err := ownCgroup()
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err != nil || fi.IsDir() {
		return nil, errors.New("no cgroup v2 hierarchy at " + mount + " (the box uses cgroup v1 or a hybrid layout)")
	}
	dir := filepath.Join(mount, filepath.FromSlash(own))
	if filepath.Base(dir) == leaf {
		// This process moved itself already (a second sandbox in the
		// same daemon): runs go beside it, the tree is ready.
		parent := filepath.Dir(dir)
		sub, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
		if err == nil && strings.Contains(string(sub), "memory") && strings.Contains(string(sub), "pids") {
			return &cgroupTree{dir: parent, cpu: strings.Contains(string(sub), "cpu")}, nil
		}
	}
	ctl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("the daemon's cgroup %s: %w", dir, err)
	}
	have := strings.Fields(string(ctl))
	for _, need := range []string{"memory", "pids"} {
		if !slices.Contains(have, need) {
			return nil, fmt.Errorf("the %s controller is not delegated to the daemon's cgroup %s (it has: %s): the service needs Delegate=yes", need, own, strings.Join(have, " "))
		}
	}
	t := &cgroupTree{dir: dir, cpu: slices.Contains(have, "cpu")}
	if err := t.takeOver(); err != nil {
		return nil, err
	}
	t.sweep()
	return t, nil
}

// ownCgroup is the daemon's cgroup v2 path ("0::/path" in
// /proc/self/cgroup).
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("the daemon is in no cgroup v2 (the box uses cgroup v1)")
}

// leaf is the cgroup the daemon's own process moves into: a cgroup that
// hands controllers to its children may hold no process itself.
const leaf = "daemon"

// takeOver moves the daemon into its leaf (when its cgroup holds nothing
// but the daemon: a cgroup shared with other programs, a login shell's
// say, is not the daemon's to rearrange) and hands the controllers down.
func (t *cgroupTree) takeOver() error {
	procs, err := readPIDs(filepath.Join(t.dir, "cgroup.procs"))
	if err != nil {
		return fmt.Errorf("the daemon's cgroup %s: %w", t.dir, err)
	}
	me := os.Getpid()
	for _, p := range procs {
		if p != me {
			return fmt.Errorf("the daemon's cgroup %s holds other programs (pid %d): run the daemon as its own service (Delegate=yes) for per-run cgroups", t.dir, p)
		}
	}
	if len(procs) > 0 {
		if err := os.Mkdir(filepath.Join(t.dir, leaf), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cannot make a cgroup under %s: %w (the service needs Delegate= and its own cgroup in ReadWritePaths=)", t.dir, err)
		}
		if err := os.WriteFile(filepath.Join(t.dir, leaf, "cgroup.procs"), []byte(strconv.Itoa(me)), 0); err != nil {
			return fmt.Errorf("cannot move the daemon into %s: %w", filepath.Join(t.dir, leaf), err)
		}
	}
	ctl := "+memory +pids"
	if t.cpu {
		ctl += " +cpu"
	}
	if err := os.WriteFile(filepath.Join(t.dir, "cgroup.subtree_control"), []byte(ctl), 0); err != nil {
		return fmt.Errorf("cannot hand the controllers (%s) down in %s: %w", ctl, t.dir, err)
	}
	return nil
}

// sweep ends what runs of an earlier daemon left (it was killed while
// they ran, outside a service manager that would have ended them).
func (t *cgroupTree) sweep() {
	old, _ := filepath.Glob(filepath.Join(t.dir, "run-*"))
	for _, d := range old {
		r := &runCgroup{dir: d, fd: -1}
		r.close()
		r.remove()
	}
}

// runCgroup is one run's cgroup.
type runCgroup struct {
	dir string
	fd  int // open on dir, for clone3's CLONE_INTO_CGROUP
}

// newRun makes a cgroup for a run bounded by lim: memory.max the run's
// memory (no swap), pids.max its processes, cpu.max all cores but one.
func (t *cgroupTree) newRun(lim Limits) (*runCgroup, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(t.dir, "run-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: run cgroup: %w", err)
	}
	r := &runCgroup{dir: dir, fd: -1}
	set := map[string]string{
		"memory.max":       strconv.FormatInt(int64(lim.MemoryMB)<<20, 10),
		"memory.swap.max":  "0",
		"memory.oom.group": "1",
		"pids.max":         strconv.Itoa(lim.MaxProcs),
	}
	if t.cpu {
		set["cpu.max"] = fmt.Sprintf("%d 100000", max(runtime.NumCPU()-1, 1)*100000)
	}
	for k, v := range set {
		err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0)
		if err != nil && !(k == "memory.swap.max" && errors.Is(err, os.ErrNotExist)) {
			r.close()
			return nil, fmt.Errorf("sandbox: run cgroup %s = %s: %w", k, v, err)
		}
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		r.close()
		return nil, fmt.Errorf("sandbox: run cgroup: %w", err)
	}
	r.fd = fd
	return r, nil
}

// oomKilled reports whether the kernel killed a process of the run for
// going over memory.max.
func (r *runCgroup) oomKilled() bool {
	b, err := os.ReadFile(filepath.Join(r.dir, "memory.events"))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && (f[0] == "oom_kill" || f[0] == "oom_group_kill") && f[1] != "0" {
			return true
		}
	}
	return false
}

// close kills whatever of the run is left (cgroup.kill) and removes its
// cgroup once it is empty: in the background, so that the run's result
// does not wait the millisecond or two the kernel takes to let go of
// the run's last processes.
func (r *runCgroup) close() {
	if r.fd >= 0 {
		syscall.Close(r.fd)
		r.fd = -1
	}
	if err := os.WriteFile(filepath.Join(r.dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		// Before Linux 5.14: kill what cgroup.procs lists, until empty.
		for range 10 {
			pids, _ := readPIDs(filepath.Join(r.dir, "cgroup.procs"))
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
	}
	if syscall.Rmdir(r.dir) != nil {
		go r.remove()
	}
}

// remove removes the run's killed cgroup once it is empty (rmdir fails
// with EBUSY until then). What it does not remove in time, the next
// start's sweep does.
func (r *runCgroup) remove() {
	wait := 100 * time.Microsecond
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		err := syscall.Rmdir(r.dir)
		if err == nil || !errors.Is(err, syscall.EBUSY) {
			return
		}
		time.Sleep(wait) // waits on the kernel, not on a test
		wait = min(2*wait, 5*time.Millisecond)
	}
}

func readPIDs(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if n, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// CgroupSupport says whether this box can give runs cgroups of their own:
// nil when the cgroup v2 hierarchy has the memory and pids controllers
// (the service, with Delegate=yes, then gets them), else why not.
func CgroupSupport() error {
	b, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers"))
	if err != nil {
		return errors.New("no cgroup v2 hierarchy at " + cgroupRoot + " (cgroup v1 or a hybrid layout, or a container without it)")
	}
	have := strings.Fields(string(b))
	for _, need := range []string{"memory", "pids"} {
		if !slices.Contains(have, need) {
			return fmt.Errorf("the cgroup v2 hierarchy has no %s controller (it has: %s; the others are on cgroup v1)", need, strings.Join(have, " "))
		}
	}
	return nil
}
