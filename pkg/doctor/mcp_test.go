package doctor

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Message string `json:"message"`
}

// mcpServer is a streamable-HTTP MCP server with one tool, echo.
func mcpServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv
}

func TestMCPCheck(t *testing.T) {
	if r := find(t, Run(context.Background(), Checks(baseEnv(t, "", nil)), time.Minute), "mcp"); r.Level != OK || r.Detail != "none configured" {
		t.Errorf("no servers: %s %q; want ok \"none configured\"", r.Level, r.Detail)
	}

	srv := mcpServer(t)
	e := baseEnv(t, `[mcp_servers.web]
transport = "http"
url = "`+srv.URL+`"
`, nil)
	if r := e.checkMCP(context.Background()); r.Level != OK || r.Detail != "web 1 tools" {
		t.Errorf("one good server: %s %q; want ok \"web 1 tools\"", r.Level, r.Detail)
	}

	e = baseEnv(t, `[mcp_servers.web]
transport = "http"
url = "`+srv.URL+`"
[mcp_servers.broken]
transport = "stdio"
command = "/nonexistent/mcp-server"
`, nil)
	start := time.Now()
	r := e.checkMCP(context.Background())
	if r.Level != Fail || !strings.Contains(r.Detail, "broken: ") || !strings.Contains(r.Detail, "/nonexistent/mcp-server") ||
		!strings.Contains(r.Detail, "ready: web 1 tools") || !strings.Contains(r.Fix, "[mcp_servers.broken]") {
		t.Errorf("a broken server: %s %q fix %q", r.Level, r.Detail, r.Fix)
	}
	if took := time.Since(start); took > mcpProbeTimeout {
		t.Errorf("a server that fails at once took %s to report", took)
	}
}

// A server that never answers is reported within the probe timeout, not
// after the doctor's per-check limit.
func TestMCPCheckHangingServer(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the probe timeout")
	}
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server notices the client leaving
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) }) // runs first
	e := baseEnv(t, "[mcp_servers.slow]\ntransport = \"http\"\nurl = \""+hang.URL+"\"\n", nil)
	r := Run(context.Background(), []Check{{"mcp", e.checkMCP}}, time.Minute)[0]
	if r.Level != Fail || !strings.Contains(r.Detail, "slow: ") {
		t.Errorf("hanging server: %s %q", r.Level, r.Detail)
	}
}
