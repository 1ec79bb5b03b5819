package main

import (
	"context"
	"strings"
	"testing"

	"agent/pkg/admin"
)

type toolsBackend struct {
	memBackend
	reloads int
}

func (b *toolsBackend) Tools(context.Context) (admin.ToolList, error) {
	return admin.ToolList{
		Servers: []admin.ToolServer{{Name: "everything", Transport: "stdio", State: "ready", Tools: 1},
			{Name: "web", Transport: "http", State: "failed", LastError: "connection refused", Restarts: 2}},
		Tools: []admin.ToolInfo{{Name: "everything__echo", Server: "everything"}, {Name: "read_file"}},
	}, nil
}

func (b *toolsBackend) ReloadTools(context.Context) error {
	b.reloads++
	return nil
}

func TestToolsCommands(t *testing.T) {
	b := &toolsBackend{}
	path := serveAdmin(t, b)

	code, out, errs := agentctl(t, "-config", path, "tools", "list")
	lines := strings.Split(out, "\n")
	if code != 0 || len(lines) < 7 || !strings.HasPrefix(lines[1], "everything  stdio") || !strings.Contains(lines[1], "ready") ||
		!strings.Contains(lines[2], "failed") || !strings.Contains(lines[2], "connection refused") ||
		!strings.Contains(out, "  everything__echo  (mcp: everything)\n") || !strings.Contains(out, "  read_file\n") {
		t.Fatalf("tools list: exit %d %q\n%s", code, errs, out)
	}
	code, out, _ = agentctl(t, "-config", path, "--json", "tools", "list")
	if code != 0 || !strings.Contains(out, `"name": "everything__echo"`) || !strings.Contains(out, `"state": "failed"`) {
		t.Fatalf("tools list --json: exit %d\n%s", code, out)
	}
	code, out, _ = agentctl(t, "-config", path, "tools", "reload")
	if code != 0 || b.reloads != 1 || !strings.HasPrefix(out, "reloaded [mcp_servers]\n") || !strings.Contains(out, "everything__echo") {
		t.Fatalf("tools reload: exit %d, %d reloads\n%s", code, b.reloads, out)
	}
	for _, args := range [][]string{{"tools"}, {"tools", "drop"}, {"tools", "list", "x"}} {
		if code, _, _ := agentctl(t, append([]string{"-config", path}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
