package memory

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"agent/pkg/embed/embedtest"
)

// Memory is offline by construction. These tests prove it: a child test
// process installs a seccomp filter that kills the process on any attempt
// to open an IPv4 or IPv6 socket, then runs every memory operation (with
// the real ONNX embedder); the control child shows that the filter does
// kill a process that tries to connect.

const offlineEnv = "AGENT_MEMORY_OFFLINE_CHILD"

// seccomp and BPF constants (linux/seccomp.h, linux/filter.h, linux/audit.h).
const (
	prSetNoNewPrivs        = 38
	seccompSetModeFilter   = 1
	seccompFilterFlagTsync = 1
	seccompRetKillProcess  = 0x80000000
	seccompRetAllow        = 0x7fff0000
	bpfLdWAbs              = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK                = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfRetK                = 0x06 // BPF_RET | BPF_K
	auditArchX86_64        = 0xc000003e
	auditArchAarch64       = 0xc00000b7
)

type sockFilter struct {
	code uint16
	jt   uint8
	jf   uint8
	k    uint32
}

type sockFprog struct {
	len    uint16
	filter *sockFilter
}

// denyInetSockets installs, for every thread of the process, a filter that
// kills the process on socket(AF_INET|AF_INET6, ...). Unix sockets stay
// allowed.
func denyInetSockets() error {
	var arch, nr uint32
	switch runtime.GOARCH {
	case "amd64":
		arch, nr = auditArchX86_64, 41
	case "arm64":
		arch, nr = auditArchAarch64, 198
	default:
		return errors.New("no seccomp numbers for " + runtime.GOARCH)
	}
	prog := []sockFilter{
		{bpfLdWAbs, 0, 0, 4},             // seccomp_data.arch
		{bpfJeqK, 1, 0, arch},            // our arch: go on
		{bpfRetK, 0, 0, seccompRetAllow}, // (another ABI: not ours to judge)
		{bpfLdWAbs, 0, 0, 0},             // seccomp_data.nr
		{bpfJeqK, 0, 3, nr},              // socket(2)?
		{bpfLdWAbs, 0, 0, 16},            // args[0] (low word): the domain
		{bpfJeqK, 2, 0, syscall.AF_INET}, //
		{bpfJeqK, 1, 0, syscall.AF_INET6},
		{bpfRetK, 0, 0, seccompRetAllow},
		{bpfRetK, 0, 0, seccompRetKillProcess},
	}
	fprog := sockFprog{len: uint16(len(prog)), filter: &prog[0]}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return e
	}
	if _, _, e := syscall.RawSyscall(seccompSyscall(), seccompSetModeFilter, seccompFilterFlagTsync, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return e
	}
	return nil
}

func seccompSyscall() uintptr {
	if runtime.GOARCH == "arm64" {
		return 277
	}
	return 317
}

// runChild runs this test binary's test name in a child with mode set.
func runChild(t *testing.T, name, mode string) (*exec.Cmd, string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), offlineEnv+"="+mode)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return cmd, out.String(), err
}

func TestMemoryOpensNoConnection(t *testing.T) {
	switch os.Getenv(offlineEnv) {
	case "":
		if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
			t.Skip("seccomp numbers only for amd64 and arm64")
		}
		// The control: the filter kills a process that tries to connect.
		cmd, out, err := runChild(t, t.Name(), "control")
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
			t.Fatalf("control child was not killed by SIGSYS (err %v):\n%s", err, out)
		}
		// The real run: every memory operation under the filter.
		if _, out, err := runChild(t, t.Name(), "memory"); err != nil || !strings.Contains(out, "MEMORY-OFFLINE-OK") {
			t.Fatalf("memory operations under the no-network filter: %v\n%s", err, out)
		}
	case "control":
		if err := denyInetSockets(); err != nil {
			t.Fatalf("seccomp: %v", err)
		}
		net.Dial("tcp", "127.0.0.1:9") // never returns: SIGSYS
		t.Fatal("connect was allowed")
	case "memory":
		offlineMemoryOps(t)
	}
}

func offlineMemoryOps(t *testing.T) {
	// Everything that may be prepared beforehand is: the model files and
	// the database. From the filter on, nothing may open an inet socket.
	dir := t.TempDir()
	if err := embedtest.Ensure(dir, embedtest.Tiny(), 5); err != nil {
		t.Fatal(err)
	}
	if err := denyInetSockets(); err != nil {
		t.Fatalf("seccomp: %v", err)
	}
	e := onnxEmbedder(t, dir, embedtest.Tiny())
	s, _ := newMem(t, nil, Config{DedupThreshold: 1})
	ctx := context.Background()
	if err := s.SetEmbedder(ctx, e, "tiny"); err != nil {
		t.Fatal(err)
	}
	a := mustAdd(t, s, "wecom:alice", Input{Text: "The user's badge number is 2231", Keywords: []string{"badge"}})
	mustAdd(t, s, "wecom:alice", Input{Text: "用户的生日是五月三日", Topic: "生日"})
	if _, err := s.Search(ctx, "wecom:alice", "badge number", 5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Block(ctx, "wecom:alice", "生日", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Block(ctx, "wecom:alice", "生日", false); err != nil {
		t.Fatal(err)
	}
	c, err := s.Correct(ctx, "wecom:alice", a.ID, "The user's badge number is 2232", "tool")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, Filter{Scope: "wecom:alice", History: true, Topic: "生日"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forget(ctx, "wecom:alice", c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ForgetMatching(ctx, "wecom:alice", "生日"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backfill(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	os.Stdout.WriteString("MEMORY-OFFLINE-OK\n")
}
