package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"agent/pkg/admin"
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
	_, statErr := os.Stat(path)
	_, nodeErr := exec.LookPath("node")
	if statErr == nil && nodeErr == nil {
		return path
	}
	msg := fmt.Sprintf("%s is not installed (run scripts/mcp-servers.sh; node and npm are needed)", path)
	if nodeErr != nil {
		msg = "node is not on PATH: " + nodeErr.Error()
	}
	if os.Getenv("AGENT_REQUIRE_NATIVE") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg + "; set AGENT_REQUIRE_NATIVE=1 to make this a failure")
	return ""
}

// mcpEchoLLM calls everything__echo on a user message and answers with the
// tool result it gets back.
func mcpEchoLLM(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		last := req.Messages[len(req.Messages)-1]
		w.Header().Set("Content-Type", "application/json")
		if last.Role == "user" {
			io.WriteString(w, `{"id":"c1","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"everything__echo","arguments":"{\"message\":\"hi from mcp\"}"}}]}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
			return
		}
		b, _ := json.Marshal(map[string]any{"id": "c2", "object": "chat.completion",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": fmt.Sprintf("The tool said (%s): %v", last.Role, last.Content)}}},
			"usage": map[string]any{"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24}})
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
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
	llmConf := "[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = \"" + llmSrv.URL + "/v1\"\n"
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
