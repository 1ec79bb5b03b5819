package shell_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/sandbox"
	"agent/pkg/sandbox/sandboxtest"
	"agent/pkg/shell"
	"agent/pkg/tools"
	"agent/pkg/workspace"
)

type fixture struct {
	sb     *sandbox.Sandbox
	spaces *workspace.Spaces
	exec   tools.Tool
	files  map[string]tools.Tool
}

func newFixture(t *testing.T, quotaMB int64, network bool) *fixture {
	t.Helper()
	sb := sandboxtest.New(t, func(c *sandbox.Config) { c.Network = network })
	spaces, err := workspace.Open(workspace.Config{
		Dir:     sandboxtest.Dir(t),
		Quota:   func() int64 { return quotaMB << 20 },
		IsOwner: func(c tools.Call) bool { return c.User == "boss" },
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{sb: sb, spaces: spaces, files: map[string]tools.Tool{}}
	f.exec = shell.Tool(shell.Config{Runner: sb, Spaces: spaces, Timeout: 20 * time.Second, Network: network})
	for _, tl := range spaces.Tools() {
		f.files[tl.Name] = tl
	}
	return f
}

func call(user string, args any) tools.Call {
	b, _ := json.Marshal(args)
	return tools.Call{Args: b, User: user, Channel: "wecom", Profile: "wecom"}
}

func (f *fixture) run(t *testing.T, user string, args any) (string, error) {
	t.Helper()
	return f.exec.Handler(context.Background(), call(user, args))
}

func (f *fixture) must(t *testing.T, user, command string) string {
	t.Helper()
	out, err := f.run(t, user, map[string]any{"command": command})
	if err != nil {
		t.Fatalf("exec %q: %v", command, err)
	}
	return out
}

func TestExec(t *testing.T) {
	f := newFixture(t, 0, false)
	out := f.must(t, "alice", `echo hello > a.txt; mkdir -p sub && printf 'x' > sub/b.bin; python3 -c 'print(6*7)'; echo warn >&2`)
	for _, want := range []string{"exit status: 0", "stdout:\n42\n", "stderr:\nwarn\n", "files created: a.txt (6 B), sub/b.bin (1 B)"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	out = f.must(t, "alice", `echo more >> a.txt; rm sub/b.bin; exit 4`)
	for _, want := range []string{"exit status: 4", "files changed: a.txt (11 B)", "files deleted: sub/b.bin"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	// The file tools see what exec made, and the other way round.
	if _, err := f.files["write_file"].Handler(context.Background(), call("alice", map[string]any{"path": "data.csv", "content": "a,b\n1,2\n"})); err != nil {
		t.Fatal(err)
	}
	out, err := f.run(t, "alice", map[string]any{"command": `python3 -c 'import csv,sys; print(sum(int(r["b"]) for r in csv.DictReader(open("data.csv"))))'; cat`, "stdin": "piped"})
	if err != nil || !strings.Contains(out, "2\npiped") {
		t.Errorf("csv + stdin: %v\n%s", err, out)
	}
}

func TestExecArguments(t *testing.T) {
	f := newFixture(t, 0, false)
	for _, args := range []any{
		map[string]any{},
		map[string]any{"command": "  "},
		map[string]any{"command": "true", "network": true},
		map[string]any{"command": "true", "timeout_s": -1},
		map[string]any{"command": strings.Repeat("x", shell.MaxCommand+1)},
		map[string]any{"command": "true", "stdin": strings.Repeat("x", shell.MaxStdin+1)},
		map[string]any{"command": "a\x00b"},
	} {
		if out, err := f.run(t, "alice", args); err == nil {
			t.Errorf("%.80v accepted: %s", args, out)
		}
	}
	out, err := f.run(t, "alice", map[string]any{"command": "sleep 5", "timeout_s": 1})
	if err != nil || !strings.Contains(out, "STOPPED: over the time limit") {
		t.Errorf("timeout_s 1: %v\n%s", err, out)
	}
	out, err = f.run(t, "alice", map[string]any{"command": "true", "timeout_s": 9999})
	if err != nil || !strings.Contains(out, "timeout_s 9999 is over the limit; 20 s applied") {
		t.Errorf("timeout_s over the limit: %v\n%s", err, out)
	}
	out = f.must(t, "alice", `head -c 100000 /dev/zero | tr '\0' 'y'`)
	if !strings.Contains(out, "STOPPED: over the output limit") || !strings.Contains(out, "[stdout cut:") {
		t.Errorf("big output:\n%.300s", out)
	}
}

// Users are trust boundaries inside the sandbox too: bob's runs see
// neither alice's folder nor anything of the daemon, and the shared area
// only read-only, owners included.
func TestExecIsolatesUsers(t *testing.T) {
	f := newFixture(t, 0, false)
	f.must(t, "alice", `echo alice-secret-salary > salary.txt`)
	if _, err := f.files["write_file"].Handler(context.Background(), call("boss", map[string]any{"path": "shared/handbook.md", "content": "office handbook"})); err != nil {
		t.Fatal(err)
	}
	out := f.must(t, "bob", `ls -a /work; cat /work/../*/salary.txt 2>&1; grep -rs alice-secret /work /tmp /shared /etc /opt /var /run /home /root /srv /mnt 2>/dev/null | head; cat /shared/handbook.md; echo x > /shared/new.md; rm /shared/handbook.md; ls /`)
	if strings.Contains(out, "alice-secret-salary") {
		t.Fatalf("bob read alice's file:\n%s", out)
	}
	if !strings.Contains(out, "office handbook") {
		t.Errorf("shared area not readable:\n%s", out)
	}
	if strings.Count(out, "Read-only file system") < 2 {
		t.Errorf("shared area writable:\n%s", out)
	}
	for _, who := range []string{"bob", "boss"} {
		f.must(t, who, `echo x > /shared/by-`+who+` 2>/dev/null`)
		if _, err := os.Stat(filepath.Join(f.spaces.Dir(), workspace.SharedDir, "by-"+who)); err == nil {
			t.Errorf("%s wrote to shared/ from the sandbox", who)
		}
	}
	if _, err := os.Stat(filepath.Join(f.spaces.Dir(), workspace.SharedDir, "handbook.md")); err != nil {
		t.Errorf("bob deleted a shared file: %v", err)
	}
}

// What a run leaves behind cannot be turned against the daemon's own file
// tools: a link to another user's file or out of the workspace is not
// followed, a FIFO does not hang read_file.
func TestExecLeftoversDoNotFoolFileTools(t *testing.T) {
	f := newFixture(t, 0, false)
	f.must(t, "alice", `echo alice-secret > mine.txt`)
	aliceDir, err := f.spaces.UserDir("wecom:alice")
	if err != nil {
		t.Fatal(err)
	}
	f.must(t, "bob", `ln -s `+filepath.Join(aliceDir, "mine.txt")+` abs; ln -s ../`+filepath.Base(aliceDir)+`/mine.txt rel; ln -s /etc/passwd etc; mkfifo pipe`)
	for _, p := range []string{"abs", "rel", "etc", "pipe"} {
		done := make(chan struct{})
		var out string
		var err error
		go func() {
			defer close(done)
			out, err = f.files["read_file"].Handler(context.Background(), call("bob", map[string]any{"path": p}))
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("read_file %s hangs", p)
		}
		if err == nil || strings.Contains(out, "alice-secret") || strings.Contains(out, "root:") {
			t.Errorf("read_file %s: %v %q", p, err, out)
		}
	}
}

// A run cannot write past the user's quota: it is stopped, told why, and
// what it wrote is taken back. A run that would start over the quota does
// not start; delete_file frees room.
func TestExecQuota(t *testing.T) {
	f := newFixture(t, 2, false)
	if f.must(t, "alice", `head -c 300000 /dev/zero > before.bin`) == "" {
		t.Fatal("no result")
	}
	out := f.must(t, "alice", `i=0; while :; do i=$((i+1)); head -c 500000 /dev/zero > f$i || exit 7; done`)
	if !strings.Contains(out, "STOPPED: over the disk limit") || !strings.Contains(out, "taken back") {
		t.Errorf("quota not enforced, or the run's files kept:\n%s", out)
	}
	out = f.must(t, "alice", `ls`)
	if strings.TrimSpace(strings.Split(out, "stdout:\n")[1]) != "before.bin" {
		t.Errorf("after the stopped run the folder holds:\n%s", out)
	}
	// Filled past the quota from outside a run (an older release, an
	// owner's copy): nothing runs until room is made.
	alice, err := f.spaces.UserDir("wecom:alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(alice, "big.bin"), make([]byte, 3<<20), 0o640); err != nil {
		t.Fatal(err)
	}
	out, err = f.run(t, "alice", map[string]any{"command": "echo ran > ran.txt"})
	if err == nil || !strings.Contains(err.Error(), "nothing ran") || !strings.Contains(err.Error(), "delete") {
		t.Fatalf("a run over the quota: %q, %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(alice, "ran.txt")); !os.IsNotExist(err) {
		t.Fatal("the refused run wrote")
	}
	if _, err := f.files["delete_file"].Handler(context.Background(), call("alice", map[string]any{"path": "big.bin"})); err != nil {
		t.Fatal(err)
	}
	if out := f.must(t, "alice", `echo ran`); !strings.Contains(out, "ran") {
		t.Errorf("after delete_file: %s", out)
	}
}

func TestExecNetworkSwitch(t *testing.T) {
	f := newFixture(t, 0, true)
	if !strings.Contains(string(f.exec.Schema), `"network"`) || !strings.Contains(f.exec.Description, "network: true") {
		t.Fatalf("network on: schema %s", f.exec.Schema)
	}
	out, err := f.run(t, "alice", map[string]any{"command": "cat /etc/resolv.conf >/dev/null 2>&1 && echo has-net-files || echo no-net-files", "network": true})
	if err != nil || !strings.Contains(out, "has-net-files") {
		t.Errorf("network: true: %v %s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	probe := fmt.Sprintf("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", %d), 2); print(\"REACHED\")' 2>&1 | tail -1", ln.Addr().(*net.TCPAddr).Port)
	if out := f.must(t, "alice", probe); strings.Contains(out, "REACHED") {
		t.Errorf("a run that did not ask got the network:\n%s", out)
	}
	if out, err := f.run(t, "alice", map[string]any{"command": probe, "network": true}); err != nil || !strings.Contains(out, "REACHED") {
		t.Errorf("a run that asked did not get the network: %v\n%s", err, out)
	}
}
