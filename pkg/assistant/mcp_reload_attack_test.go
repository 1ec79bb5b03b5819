package assistant

import (
	"context"
	"testing"
	"time"

	"agent/pkg/tools"
)

// reload_mcp's When reads the configuration in force (a.config()), but the
// tool itself re-reads the FILE. Started without MCP servers, an owner who
// adds one to the file and asks the assistant to reload_mcp is refused as
// "unknown tool" (runOne gates on Chooser.Allowed, which checks When) and
// is never offered it: the one case the tool exists for. The same holds
// after reload_mcp itself applies servers: a.config() still has none, so
// the next reload_mcp (to fix or remove them) is refused too.
func TestReloadMCPUnreachableForFirstServer(t *testing.T) {
	web := httpServer("web", mcpHTTPServer(t)) // before the assistant: its cleanup runs last
	d := newMCPAssistant(t, "")
	d.write(t, web) // the owner edits the file
	admin := tools.Query{Channel: "admin", User: "ops", Profile: "admin", Text: "reload the mcp servers"}
	if !d.chooser.Allowed(admin, ToolReloadMCP) {
		t.Errorf("reload_mcp is refused to the operator after adding the first server to the file (When reads the running config, not the file)")
	}
	// What the handler would do if it were allowed: it works.
	if _, err := d.reg.Run(context.Background(), ToolReloadMCP, tools.Call{Args: []byte(`{}`), Channel: "admin", User: "ops"}); err != nil {
		t.Fatal(err)
	}
	d.settleMCP(context.Background(), 5*time.Second)
	if _, ok := d.reg.Get("web__echo"); !ok {
		t.Fatal("web__echo not registered")
	}
	if !d.chooser.Allowed(admin, ToolReloadMCP) {
		t.Errorf("with a server running (applied by reload_mcp), reload_mcp is still refused: the running config was never updated")
	}
}
