package assistant

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"agent/pkg/config"
	"agent/pkg/health"
	"agent/pkg/tools"
)

type echoIn struct {
	Message string `json:"message"`
}

// mcpHTTPServer is a streamable-HTTP MCP server with one tool, echo.
func mcpHTTPServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// closedURL is an http URL nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/mcp"
}

// mcpAssistant is an assistant configured from a file the test rewrites.
type mcpAssistant struct {
	*Assistant
	path    string
	reg     *tools.Registry
	checker *health.Checker
	env     config.Env

	mu  sync.Mutex
	cfg *config.Config
}

func newMCPAssistant(t *testing.T, servers string) *mcpAssistant {
	t.Helper()
	dir := t.TempDir()
	m := &mcpAssistant{path: filepath.Join(dir, "config.toml"), checker: health.New(time.Second, nil),
		env: func(string) (string, bool) { return "", false }}
	m.write(t, servers)
	cfg, _, err := config.Load(m.path, m.env)
	if err != nil {
		t.Fatal(err)
	}
	m.cfg = cfg
	a, err := New(cfg, Deps{Store: testStore(t, cfg), Config: m.config, Env: m.env, Health: m.checker})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	m.Assistant, m.reg = a, a.reg
	return m
}

func (m *mcpAssistant) config() *config.Config {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg
}

// reload is the daemon's SIGHUP: the file becomes the configuration in
// force, then the assistant applies it.
func (m *mcpAssistant) reload(t *testing.T) {
	t.Helper()
	next, _, err := config.Load(m.path, m.env)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.cfg = next
	m.mu.Unlock()
	m.Reload(context.Background(), next)
}

func (m *mcpAssistant) write(t *testing.T, servers string) {
	t.Helper()
	body := "[server]\nlisten = \"127.0.0.1:0\"\n[agent]\nstate_dir = \"var\"\n" + servers
	if err := os.WriteFile(m.path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reloadTool runs reload_mcp as the operator (admin channel); a user who
// is not an owner is refused and nothing is reloaded.
func (m *mcpAssistant) reloadTool(t *testing.T) (string, error) {
	t.Helper()
	if _, err := m.reg.Run(context.Background(), ToolReloadMCP, tools.Call{Args: []byte(`{}`), Channel: "wecom", User: "mallory"}); err == nil ||
		!strings.Contains(err.Error(), "only the assistant's owners") {
		t.Errorf("reload_mcp by a user who is not an owner: %v", err)
	}
	return m.reg.Run(context.Background(), ToolReloadMCP, tools.Call{Args: []byte(`{}`), Channel: "admin", User: "ops"})
}

func (m *mcpAssistant) mcpCheck(t *testing.T) health.Result {
	t.Helper()
	rep := m.checker.Run(context.Background())
	if !rep.Alive {
		t.Errorf("an MCP problem made the daemon not alive: %+v", rep.Checks)
	}
	for _, c := range rep.Checks {
		if c.Name == "mcp" {
			return c
		}
	}
	t.Fatal("no mcp health check")
	return health.Result{}
}

func httpServer(name, url string) string {
	return "[mcp_servers." + name + "]\ntransport = \"http\"\nurl = \"" + url + "\"\n"
}

func TestReloadMCPTool(t *testing.T) {
	web := httpServer("web", mcpHTTPServer(t))
	d := newMCPAssistant(t, web)
	out, err := d.reloadTool(t) // unchanged file: the server stays, reported ready
	if err != nil || !strings.Contains(out, "web (http): ready, 1 tools") {
		t.Fatalf("reload_mcp = %q, %v", out, err)
	}
	if got, err := d.reg.Run(context.Background(), "web__echo", tools.Call{Args: []byte(`{"message":"hi"}`)}); err != nil || got != "Echo: hi" {
		t.Fatalf("web__echo = %q, %v", got, err)
	}
	if c := d.mcpCheck(t); c.Status != health.OK {
		t.Errorf("mcp check with a ready server = %+v", c)
	}
	m, err := d.MCP()
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); len(st) != 1 || st[0].Name != "web" || st[0].State != "ready" || st[0].Tools != 1 {
		t.Fatalf("MCP status = %+v", st)
	}

	// A server added to the file starts; one that cannot connect is failed
	// and makes health degraded, never failing.
	d.write(t, web+httpServer("down", closedURL(t)))
	out, err = d.reloadTool(t)
	if err != nil || !strings.Contains(out, "down (http): failed, 0 tools; last error: ") || !strings.Contains(out, "web (http): ready") {
		t.Fatalf("reload_mcp with a dead server = %q, %v", out, err)
	}
	if c := d.mcpCheck(t); c.Status != health.Degraded || !strings.Contains(c.Detail, "down: ") {
		t.Errorf("mcp check with a failed server = %+v", c)
	}

	// A broken file changes nothing and says why.
	d.write(t, "[mcp_servers.web]\ntransport = \"carrier-pigeon\"\n")
	if out, err = d.reloadTool(t); err == nil || !strings.Contains(err.Error(), "unchanged") || !strings.Contains(err.Error(), "mcp_servers.web.transport") {
		t.Fatalf("reload_mcp with a broken file = %q, %v", out, err)
	}
	if _, ok := d.reg.Get("web__echo"); !ok {
		t.Fatal("a broken file removed the running server's tools")
	}

	// agentctl tools reload: removed servers stop and their tools go.
	d.write(t, "")
	if err := d.ReloadMCP(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.reg.Get("web__echo"); ok {
		t.Error("web__echo still registered after its server was removed")
	}
	if st := m.Status(); len(st) != 0 {
		t.Errorf("servers after removal: %+v", st)
	}
	if c := d.mcpCheck(t); c.Status != health.OK {
		t.Errorf("mcp check with no servers = %+v", c)
	}
	if out, err := d.reloadTool(t); err != nil || out != "MCP servers reloaded: none are configured." {
		t.Errorf("reload_mcp with none = %q, %v", out, err)
	}

	// SIGHUP (the daemon's Reload) applies [mcp_servers] live too.
	d.write(t, web)
	d.reload(t)
	d.settleMCP(context.Background(), 10*time.Second)
	if _, ok := d.reg.Get("web__echo"); !ok {
		t.Error("web__echo not registered after a reload added its server")
	}
}
