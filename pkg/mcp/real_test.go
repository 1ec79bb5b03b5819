package mcp

// Tests against the reference MCP servers installed by
// scripts/mcp-servers.sh under .deps/mcp. They are skipped when the servers
// are missing, or fail when AGENT_REQUIRE_NATIVE=1.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"agent/pkg/config"
	"agent/pkg/nativetest"
)

// repoRoot walks up from the working directory to the directory holding
// go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// nativeServer returns the path of an installed MCP server binary, or skips
// (fails under AGENT_REQUIRE_NATIVE=1) when it or node is missing.
func nativeServer(t testing.TB, bin string) string {
	t.Helper()
	nativetest.Node(t)
	path := filepath.Join(repoRoot(t), ".deps", "mcp", "node_modules", ".bin", bin)
	return nativetest.File(t, path, "the MCP server "+bin, "scripts/mcp-servers.sh (scripts/deps.sh mcp; node and npm are needed)")
}

func TestEverythingStdio(t *testing.T) {
	bin := nativeServer(t, "mcp-server-everything")
	h := newHarness(t, nil)
	h.m.Apply(context.Background(), map[string]config.MCPServer{"everything": {Transport: "stdio", Command: bin, Args: []string{"stdio"}}})
	st := h.waitReady(t, "everything")
	if st.Tools < 5 {
		t.Errorf("status = %+v, want the everything server's tools", st)
	}
	tests := []struct{ tool, args, want string }{
		{"everything__echo", `{"message":"hello over stdio"}`, "Echo: hello over stdio"},
		{"everything__get-sum", `{"a":2,"b":40}`, "42"},
		{"everything__get-tiny-image", `{}`, "[image: image/png, "},
	}
	for _, tc := range tests {
		if got, err := h.run(t, tc.tool, tc.args); err != nil || !strings.Contains(got, tc.want) {
			t.Errorf("%s = %.300q, %v; want %q", tc.tool, got, err, tc.want)
		}
	}
	// The server registers more tools once initialized and announces them
	// with notifications/tools/list_changed.
	waitFor(t, "tools/list_changed from the everything server", func() bool { return h.listChanged("everything") > 0 })
	h.waitTool(t, "everything__simulate-research-query")

	killAndCheckReconnect(t, h, "everything", "everything__echo", `{"message":"again"}`, "Echo: again")
}

func TestEverythingHTTP(t *testing.T) {
	bin := nativeServer(t, "mcp-server-everything")
	port := freePort(t)
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitFor(t, "the HTTP server to listen on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	h := newHarness(t, nil)
	h.m.Apply(context.Background(), map[string]config.MCPServer{"web": {
		Transport: "http", URL: "http://" + addr + "/mcp", Headers: map[string]string{"X-Test": "1"},
	}})
	if st := h.waitReady(t, "web"); st.Transport != "http" || st.Tools < 5 {
		t.Errorf("status = %+v", st)
	}
	if got, err := h.run(t, "web__echo", `{"message":"hello over http"}`); err != nil || got != "Echo: hello over http" {
		t.Errorf("echo = %q, %v", got, err)
	}
	if got, err := h.run(t, "web__get-structured-content", `{"location":"New York"}`); err != nil || !strings.Contains(got, "temperature") {
		t.Errorf("get-structured-content = %q, %v", got, err)
	}
}

func TestFilesystemStdio(t *testing.T) {
	bin := nativeServer(t, "mcp-server-filesystem")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(file, []byte("the quick brown fox\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil)
	h.m.Apply(context.Background(), map[string]config.MCPServer{"fs": {Command: bin, Args: []string{dir}}})
	h.waitReady(t, "fs")
	got, err := h.run(t, "fs__read_text_file", fmt.Sprintf(`{"path":%q}`, file))
	if err != nil || !strings.Contains(got, "the quick brown fox") {
		t.Errorf("read_text_file = %q, %v", got, err)
	}
	// Outside the allowed directory the server answers isError, which the
	// model sees as the error text.
	_, err = h.run(t, "fs__read_text_file", `{"path":"/etc/hostname"}`)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "denied") {
		t.Errorf("read outside the root: err = %v, want access denied", err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
