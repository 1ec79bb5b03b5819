package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/llm/llmtest"
	"agent/pkg/nativetest"
)

// everythingServer returns the absolute path of the reference MCP server
// installed by scripts/mcp-servers.sh, or skips (fails under
// AGENT_REQUIRE_NATIVE=1) when it or node is missing.
func everythingServer(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", ".deps", "mcp", "node_modules", ".bin", "mcp-server-everything"))
	if err != nil {
		t.Fatal(err)
	}
	nativetest.Node(t)
	return nativetest.File(t, path, "the reference MCP server", "scripts/mcp-servers.sh (scripts/deps.sh mcp; node and npm are needed)")
}

// mcpEchoLLM calls everything__echo on a user message and answers with the
// tool result it gets back.
func mcpEchoLLM(t *testing.T) *llmtest.Server {
	t.Helper()
	return llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		if last.Role == "user" {
			return llmtest.Calls(llmtest.Call("everything__echo", `{"message":"hi from mcp"}`))
		}
		return llmtest.Text(fmt.Sprintf("The tool said (%s): %v", last.Role, last.Content))
	})
}

// pollTools asks the daemon for its tools until ok accepts them.
func pollTools(t *testing.T, c *admin.Client, what string, ok func(admin.ToolList) bool) admin.ToolList {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		l, err := c.Tools(context.Background())
		if err == nil && ok(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: last answer %+v, %v", what, l, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An MCP server from the config serves a turn through the full agent
// loop; agentctl tools list shows it; SIGHUP without it removes its tools.
func TestMCPServerThroughTheDaemon(t *testing.T) {
	bin := everythingServer(t)
	llmSrv := mcpEchoLLM(t)
	dir := t.TempDir()
	llmConf := "[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = \"" + llmSrv.BaseURL() + "\"\n"
	writeConfig(t, dir, llmConf+"[mcp_servers.everything]\ntransport = \"stdio\"\ncommand = \""+bin+"\"\nargs = [\"stdio\"]\n")
	ns := newNotifySock(t)
	in := start(t, dir, "NOTIFY_SOCKET="+ns.path)
	ns.await(t, "READY=1")
	c := admin.NewClient(filepath.Join(dir, "var", "agent.sock"))
	ctx := context.Background()

	l := pollTools(t, c, "the everything server never became ready", func(l admin.ToolList) bool {
		return len(l.Servers) == 1 && l.Servers[0].State == "ready"
	})
	if s := l.Servers[0]; s.Name != "everything" || s.Transport != "stdio" || s.Tools < 5 {
		t.Errorf("server = %+v; want everything over stdio with its tools", s)
	}
	fromServer := 0
	hasEcho := false
	for _, tool := range l.Tools {
		if tool.Server == "everything" {
			fromServer++
		}
		hasEcho = hasEcho || (tool.Name == "everything__echo" && tool.Server == "everything")
	}
	if !hasEcho || fromServer != l.Servers[0].Tools {
		t.Errorf("tools list: echo %v, %d tools from the server, status says %d:\n%+v", hasEcho, fromServer, l.Servers[0].Tools, l.Tools)
	}

	res, err := c.Send(ctx, admin.SendRequest{To: "alice", Text: "echo something"})
	if err != nil || len(res.Replies) != 1 || !strings.Contains(res.Replies[0], "Echo: hi from mcp") {
		t.Fatalf("send = %+v, %v; want the echo in the reply", res, err)
	}

	// SIGHUP with the server removed: it stops and its tools go.
	writeConfig(t, dir, llmConf)
	in.cmd.Process.Signal(syscall.SIGHUP)
	l = pollTools(t, c, "the removed server's tools stayed", func(l admin.ToolList) bool {
		for _, tool := range l.Tools {
			if strings.HasPrefix(tool.Name, "everything__") {
				return false
			}
		}
		return len(l.Servers) == 0
	})
	if !strings.Contains(in.stderr.String(), "mcp server removed; stopping") {
		t.Errorf("no log of the server stopping")
	}
	if strings.Contains(in.stderr.String(), "takes effect after a restart") {
		t.Errorf("mcp_servers reported as needing a restart")
	}

	in.cmd.Process.Signal(syscall.SIGTERM)
	if code := in.wait(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
