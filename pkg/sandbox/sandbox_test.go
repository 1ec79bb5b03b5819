package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"agent/pkg/nativetest"
	"agent/pkg/sandbox"
	"agent/pkg/sandbox/sandboxtest"
)

// newSandbox returns a sandbox with small limits, or skips (fails under
// AGENT_REQUIRE_NATIVE=1) without bubblewrap.
func newSandbox(t *testing.T, mod func(*sandbox.Config)) *sandbox.Sandbox {
	t.Helper()
	return sandboxtest.New(t, func(c *sandbox.Config) {
		c.Limits = sandbox.Limits{Timeout: 20 * time.Second, CPUSeconds: 10, MemoryMB: 256, MaxProcs: 32, FileMB: 10, OutputKB: 16}
		if mod != nil {
			mod(c)
		}
	})
}

var openDir = sandboxtest.Dir

func sh(t *testing.T, s *sandbox.Sandbox, spec sandbox.Spec, script string) *sandbox.Result {
	t.Helper()
	spec.Argv = []string{"/bin/sh", "-c", script}
	res, err := s.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return res
}

func TestRunBasics(t *testing.T) {
	s := newSandbox(t, nil)
	work := openDir(t)
	res := sh(t, s, sandbox.Spec{Work: work, Stdin: []byte("from stdin\n")}, `pwd; echo "$HOME"; cat; echo made > out.txt; echo oops >&2; exit 3`)
	if res.Exit != 3 || res.Limit != sandbox.LimitNone {
		t.Fatalf("exit %d limit %q, want 3: %s", res.Exit, res.Limit, res.Stderr)
	}
	if got := string(res.Stdout); got != "/work\n/work\nfrom stdin\n" {
		t.Errorf("stdout %q", got)
	}
	if string(res.Stderr) != "oops\n" {
		t.Errorf("stderr %q", res.Stderr)
	}
	b, err := os.ReadFile(filepath.Join(work, "out.txt"))
	if err != nil || string(b) != "made\n" {
		t.Errorf("the run's file on the host: %q %v", b, err)
	}
	res = sh(t, s, sandbox.Spec{Work: work}, `cat /proc/self/oom_score_adj`)
	if string(res.Stdout) != "1000\n" {
		t.Errorf("oom_score_adj %q: the OOM killer would not take the run first", res.Stdout)
	}
	res = sh(t, s, sandbox.Spec{Work: work}, `python3 -c 'import sys; print(sum(range(10)), sys.version_info[0])'`)
	if res.Exit != 0 || string(res.Stdout) != "45 3\n" {
		t.Errorf("python3: exit %d %q %q", res.Exit, res.Stdout, res.Stderr)
	}
	if err := s.Probe(context.Background()); err != nil {
		t.Errorf("probe: %v", err)
	}
}

// The run sees no variable of the daemon's, nor its processes.
func TestCleanEnvironmentAndPIDs(t *testing.T) {
	t.Setenv("AGENT_LLM_API_KEY", "sk-secret-in-daemon-env")
	s := newSandbox(t, nil)
	res := sh(t, s, sandbox.Spec{Work: openDir(t)}, `env; tr '\0' '\n' < /proc/1/environ; echo; ls /proc | grep -c '^[0-9]'; cat /proc/self/status | grep -i ^uid`)
	out := string(res.Stdout)
	if strings.Contains(out, "sk-secret") || strings.Contains(out, "AGENT_") {
		t.Fatalf("daemon environment visible inside:\n%s", out)
	}
	if strings.Contains(out, fmt.Sprintf("\n%d\n", os.Getpid())) {
		t.Errorf("host PIDs visible")
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", os.Getpid())); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.ToLower(l), "uid:") && strings.Fields(l)[1] == "0" {
			t.Errorf("runs as uid 0 inside: %s", l)
		}
	}
}

// No process inside shows a host path: bwrap's own process is PID 1 of
// the run's namespace, and its command line names every bind's source.
func TestNoHostPathInProcessCommandLines(t *testing.T) {
	temp := openDir(t)
	s := newSandbox(t, func(c *sandbox.Config) { c.TempDir = temp })
	work, shared := openDir(t), openDir(t)
	spec := sandbox.Spec{Work: work, Binds: []sandbox.Bind{{Src: shared, Dst: "/shared"}},
		Files: []sandbox.DataFile{{Dst: "/opt/skill/creds", Data: []byte("k")}}}
	res := sh(t, s, spec, `sleep 5 & for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done; kill %1`)
	out := string(res.Stdout)
	if !strings.Contains(out, "bwrap") || !strings.Contains(out, "sleep 5") {
		t.Fatalf("the processes inside were not listed:\n%s\n%s", out, res.Stderr)
	}
	for _, host := range []string{temp, work, shared, filepath.Dir(work)} {
		if strings.Contains(out, host) {
			t.Errorf("a command line inside shows the host path %s:\n%s", host, out)
		}
	}
}

// Nothing of the box but the system and the run's own folder: not the
// daemon's state dir or config, not another folder, not /etc/shadow.
func TestFilesystemConfined(t *testing.T) {
	s := newSandbox(t, nil)
	state := openDir(t) // stands for /var/lib/agent: the database, config
	secret := filepath.Join(state, "config.toml")
	if err := os.WriteFile(secret, []byte("api_key = \"sk-state\"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	alice := openDir(t)
	if err := os.WriteFile(filepath.Join(alice, "salary.txt"), []byte("alice private"), 0o600); err != nil {
		t.Fatal(err)
	}
	bob := openDir(t)
	// A link bob made (or a run made) pointing at alice's file and the
	// state dir: inside it resolves in the sandbox's view, where neither
	// exists.
	if err := os.Symlink(filepath.Join(alice, "salary.txt"), filepath.Join(bob, "alice")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(state, filepath.Join(bob, "state")); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`
cat %[1]q 2>&1; cat %[2]q 2>&1; cat alice 2>&1; cat state/config.toml 2>&1; ls %[3]q 2>&1
cat /etc/shadow 2>&1; ls /etc
touch /usr/x 2>&1; touch /x 2>&1; touch /etc/x 2>&1; mkdir /opt/agent/bin/y 2>&1
echo tmp > /tmp/t && cat /tmp/t
ls -d /var/lib/agent /run /home /root 2>&1
`, secret, filepath.Join(alice, "salary.txt"), state)
	res := sh(t, s, sandbox.Spec{Work: bob}, script)
	out := string(res.Stdout)
	for _, leak := range []string{"sk-state", "alice private", "root:x:0", "root:*", "root:!"} {
		if strings.Contains(out, leak) {
			t.Errorf("leaked %q:\n%s", leak, out)
		}
	}
	for _, f := range []string{"/usr/x", "/x", "/etc/x"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s written on the host", f)
			_ = os.Remove(f)
		}
	}
	if !strings.Contains(out, "tmp\n") {
		t.Errorf("private /tmp not writable:\n%s", out)
	}
	if n := strings.Count(out, "Read-only file system"); n < 3 {
		t.Errorf("writes to the system not refused as read-only (%d):\n%s", n, out)
	}
	// /etc holds only what programs need.
	for _, name := range []string{"shadow", "agent", "sudoers", "ssh"} {
		if strings.Contains(out, "\n"+name+"\n") {
			t.Errorf("/etc/%s visible", name)
		}
	}
}

// A setuid-root binary bound into the sandbox does not make anyone root.
func TestSetuidIgnored(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a setuid-root file needs root")
	}
	s := newSandbox(t, nil)
	dir := openDir(t)
	b, err := os.ReadFile("/usr/bin/id")
	if err != nil {
		t.Fatal(err)
	}
	suid := filepath.Join(dir, "id")
	if err := os.WriteFile(suid, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o4755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	res := sh(t, s, sandbox.Spec{Work: openDir(t), Binds: []sandbox.Bind{{Src: dir, Dst: "/opt/suid"}}}, `ls -l /opt/suid/id; /opt/suid/id -u; /opt/suid/id -ru`)
	lines := strings.Fields(string(res.Stdout))
	if len(lines) < 2 || !strings.Contains(string(res.Stdout), "rws") {
		t.Fatalf("setuid binary not as expected inside: %q %q", res.Stdout, res.Stderr)
	}
	if euid := lines[len(lines)-2]; euid == "0" {
		t.Fatalf("setuid binary gave euid 0: %s", res.Stdout)
	}
}

// No network: neither the daemon's own port on loopback nor the LLM's
// address on the LAN. With network = on and a run that asks, both work.
func TestNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "daemon-secret-banner\n")
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	lan := lanAddr(t)
	probe := func(host string) string {
		return fmt.Sprintf(`
import socket
try:
    s = socket.create_connection((%q, %d), 3)
    print("CONNECTED", s.recv(100))
except Exception as e:
    print("REFUSED", type(e).__name__, e)
`, host, port)
	}
	off := newSandbox(t, nil)
	on := newSandbox(t, func(c *sandbox.Config) { c.Network = true })
	for _, host := range append([]string{"127.0.0.1"}, lan...) {
		for name, run := range map[string]struct {
			s   *sandbox.Sandbox
			ask bool
		}{"off": {off, true}, "on-not-asked": {on, false}} {
			res, err := run.s.Run(context.Background(), sandbox.Spec{Argv: []string{"python3", "-c", probe(host)}, Network: run.ask})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(res.Stdout), "CONNECTED") || res.Network {
				t.Errorf("%s: reached %s:%d: %s", name, host, port, res.Stdout)
			}
		}
	}
	res, err := on.Run(context.Background(), sandbox.Spec{Argv: []string{"python3", "-c", probe("127.0.0.1")}, Network: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Stdout), "daemon-secret-banner") || !res.Network {
		t.Errorf("network on and asked for: %s %s", res.Stdout, res.Stderr)
	}
}

// lanAddr lists this machine's non-loopback IPv4 addresses (the LLM or
// another office machine would be reached through them).
func lanAddr(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// Every limit ends the run and says which, keeping what it printed.
func TestLimits(t *testing.T) {
	s := newSandbox(t, nil)
	cases := []struct {
		name   string
		spec   sandbox.Spec
		script string
		want   sandbox.Limit
		check  func(t *testing.T, r *sandbox.Result)
	}{
		{"wall time", sandbox.Spec{Limits: sandbox.Limits{Timeout: time.Second}}, `echo started; sleep 60`, sandbox.LimitTime, func(t *testing.T, r *sandbox.Result) {
			if string(r.Stdout) != "started\n" {
				t.Errorf("output so far lost: %q", r.Stdout)
			}
		}},
		{"cpu", sandbox.Spec{Limits: sandbox.Limits{CPUSeconds: 1}}, `echo spin; while :; do :; done`, sandbox.LimitCPU, nil},
		{"output", sandbox.Spec{}, `yes 'a gigabyte of output'`, sandbox.LimitOutput, func(t *testing.T, r *sandbox.Result) {
			if len(r.Stdout) != 16<<10 || r.StdoutDropped == 0 {
				t.Errorf("kept %d bytes, dropped %d", len(r.Stdout), r.StdoutDropped)
			}
		}},
		{"file size", sandbox.Spec{Work: openDir(t)}, `head -c 1000000000 /dev/zero > big; echo after`, sandbox.LimitFileSize, nil},
		{"file size, last command", sandbox.Spec{Work: openDir(t)}, `head -c 1000000000 /dev/zero > big`, sandbox.LimitFileSize, nil},
		{"disk", sandbox.Spec{Work: openDir(t), MaxWrite: 8 << 20}, `i=0; while :; do i=$((i+1)); head -c 1000000 /dev/zero > f$i || exit 9; done`, sandbox.LimitDisk, nil},
		{"disk hidden behind chmod 0", sandbox.Spec{Work: openDir(t), MaxWrite: 8 << 20}, `mkdir d && exec 3>d/h1 4>d/h2 && chmod 0 d && head -c 9000000 /dev/zero >&3 && head -c 9000000 /dev/zero >&4 && sleep 10`, sandbox.LimitDisk, func(t *testing.T, r *sandbox.Result) {
			// A root daemon reads the directory anyway and counts the
			// bytes; the agent user cannot, and stops the run unmeasured.
			if !strings.Contains(r.Detail, "permissions") && !strings.Contains(r.Detail, "wrote") {
				t.Errorf("detail %q", r.Detail)
			}
		}},
		{"memory through /dev", sandbox.Spec{MaxWrite: 8 << 20, Limits: sandbox.Limits{FileMB: 100}}, `head -c 100000000 /dev/zero > /dev/fill; echo $?; head -c 100000000 /dev/zero > /dev/shm/fill`, sandbox.LimitNone, func(t *testing.T, r *sandbox.Result) {
			if !strings.Contains(string(r.Stderr), "Read-only file system") || !strings.Contains(string(r.Stderr), "No space left") {
				t.Errorf("/dev writable or /dev/shm unbounded: %q", r.Stderr)
			}
		}},
		{"disk in /tmp", sandbox.Spec{MaxWrite: 8 << 20}, `i=0; while :; do i=$((i+1)); head -c 1000000 /dev/zero > /tmp/f$i || exit 9; done`, sandbox.LimitDisk, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := sh(t, s, c.spec, c.script)
			if r.Limit != c.want {
				t.Fatalf("limit %q (%s), want %q; exit %d stderr %q", r.Limit, r.Detail, c.want, r.Exit, r.Stderr)
			}
			if r.Detail == "" && c.want != sandbox.LimitNone {
				t.Errorf("no detail for %q", r.Limit)
			}
			if c.check != nil {
				c.check(t, r)
			}
		})
	}
}

// Memory: a process cannot allocate past MemoryMB.
func TestMemoryLimit(t *testing.T) {
	s := newSandbox(t, nil)
	r := sh(t, s, sandbox.Spec{}, `python3 -c 'b = bytearray(600 * 1024 * 1024); print("allocated")'`)
	if r.Exit == 0 || strings.Contains(string(r.Stdout), "allocated") || !strings.Contains(string(r.Stderr), "MemoryError") {
		t.Fatalf("600 MB allocated under a 256 MB limit: exit %d %q %q", r.Exit, r.Stdout, r.Stderr)
	}
}

// A fork bomb stops at MaxProcs; the daemon (this test) can still start
// processes and the next run works.
func TestForkBomb(t *testing.T) {
	s := newSandbox(t, func(c *sandbox.Config) { c.Limits.Timeout = 5 * time.Second })
	r := sh(t, s, sandbox.Spec{}, `
python3 - <<'EOF'
import os, time
n = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
print(n, flush=True)
EOF`)
	n, err := strconv.Atoi(strings.TrimSpace(string(r.Stdout)))
	if err != nil || n >= 32 {
		t.Fatalf("forks before the limit: %q (%v) %q", r.Stdout, err, r.Stderr)
	}
	// The shell kind of bomb too, ended by the wall clock at worst.
	r = sh(t, s, sandbox.Spec{Limits: sandbox.Limits{Timeout: 3 * time.Second}}, `b() { b | b & }; b; sleep 10`)
	if r.Limit == sandbox.LimitNone && r.Exit == 0 {
		t.Errorf("shell fork bomb: exit %d", r.Exit)
	}
	if out, err := exec.Command("true").CombinedOutput(); err != nil {
		t.Fatalf("the host cannot start processes after the bomb: %v %s", err, out)
	}
	if r := sh(t, s, sandbox.Spec{}, `echo fine`); string(r.Stdout) != "fine\n" {
		t.Fatalf("next run: %q", r.Stdout)
	}
}

// A command that prints what bwrap prints when it fails is still the
// command's result, not a sandbox failure; fd 3 (the start signal) is
// closed before the command runs.
func TestCommandCannotFakeASandboxFailure(t *testing.T) {
	s := newSandbox(t, nil)
	r := sh(t, s, sandbox.Spec{}, `echo 'bwrap: Can'"'"'t mount proc' >&2; echo fd3 >&3 || echo no-fd3; exit 1`)
	if r.Exit != 1 || !strings.HasPrefix(string(r.Stderr), "bwrap: ") {
		t.Fatalf("exit %d stderr %q", r.Exit, r.Stderr)
	}
	if !strings.Contains(string(r.Stdout), "no-fd3") {
		t.Errorf("the command got fd 3: %q", r.Stdout)
	}
}

func TestCancelled(t *testing.T) {
	s := newSandbox(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	r, err := s.Run(ctx, sandbox.Spec{Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Limit != sandbox.LimitCancelled {
		t.Fatalf("limit %q", r.Limit)
	}
}

func TestBadSpecs(t *testing.T) {
	s := newSandbox(t, nil)
	for _, spec := range []sandbox.Spec{
		{},
		{Argv: []string{"true"}, Binds: []sandbox.Bind{{Src: "/etc", Dst: "/usr/lib"}}},
		{Argv: []string{"true"}, Binds: []sandbox.Bind{{Src: "/etc", Dst: "/work/x"}}},
		{Argv: []string{"true"}, Binds: []sandbox.Bind{{Src: "/etc", Dst: "/"}}},
		{Argv: []string{"true"}, Binds: []sandbox.Bind{{Src: "/etc", Dst: "relative"}}},
		{Argv: []string{"true"}, Binds: []sandbox.Bind{{Src: "relative", Dst: "/data"}}},
	} {
		if _, err := s.Run(context.Background(), spec); err == nil {
			t.Errorf("%+v accepted", spec)
		}
	}
	_, err := s.Run(context.Background(), sandbox.Spec{Argv: []string{"true"}, Binds: []sandbox.Bind{{Src: "/nonexistent-src", Dst: "/data"}}})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("missing bind source: %v", err)
	}
}

func TestNoBwrap(t *testing.T) {
	_, err := sandbox.New(sandbox.Config{Bwrap: "/nonexistent/bwrap", TempDir: t.TempDir()})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "apt install bubblewrap") {
		t.Fatalf("err = %v", err)
	}
	if _, err := sandbox.New(sandbox.Config{TempDir: t.TempDir(), Python: "/opt/py/bin/python3"}); err == nil {
		t.Fatal("python outside /usr accepted")
	}
}

// The shipped unit runs the daemon as the unprivileged agent user, not
// root: run this package's tests again as nobody, where bwrap runs as the
// daemon's own user (no Account) and RLIMIT_NPROC counts per user
// namespace.
func TestAsUnprivilegedUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests are this test")
	}
	if testing.Short() {
		t.Skip("short")
	}
	nativetest.LookPath(t, "bwrap", "bubblewrap")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := openDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^(TestRunBasics|TestCleanEnvironmentAndPIDs|TestFilesystemConfined|TestNetwork|TestLimits|TestMemoryLimit|TestForkBomb)$", "-test.v")
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + dir, "HOME=" + dir, nativetest.Env + "=" + os.Getenv(nativetest.Env)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tests as nobody: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "SKIP") || !strings.Contains(string(out), "--- PASS: TestForkBomb") {
		t.Fatalf("tests as nobody did not all run:\n%s", out)
	}
}
