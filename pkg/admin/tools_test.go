package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// toolsBackend is a fakeBackend with MCP servers.
type toolsBackend struct {
	fakeBackend
	list      ToolList
	reloadErr error
	reloads   int
}

func (b *toolsBackend) Tools(context.Context) (ToolList, error) { return b.list, nil }
func (b *toolsBackend) ReloadTools(context.Context) error {
	b.reloads++
	return b.reloadErr
}

func serve(t *testing.T, b Backend) *Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, b, testLogger()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return NewClient(path)
}

func TestToolsEndpoints(t *testing.T) {
	b := &toolsBackend{list: ToolList{
		Servers: []ToolServer{{Name: "everything", Transport: "stdio", State: "ready", Tools: 1},
			{Name: "web", Transport: "http", State: "failed", LastError: "connection refused", Restarts: 3}},
		Tools:  []ToolInfo{{Name: "everything__echo", Server: "everything"}, {Name: "read_file"}},
		Custom: []CustomTool{},
	}}
	c := serve(t, b)
	ctx := context.Background()
	got, err := c.Tools(ctx)
	if err != nil || !reflect.DeepEqual(got, b.list) {
		t.Fatalf("Tools = %+v, %v\nwant %+v", got, err, b.list)
	}
	if err := c.ReloadTools(ctx); err != nil || b.reloads != 1 {
		t.Fatalf("ReloadTools = %v after %d reloads", err, b.reloads)
	}
	b.reloadErr = errors.New("config.toml: mcp_servers.web.url: required")
	if err := c.ReloadTools(ctx); err == nil || !strings.Contains(err.Error(), "mcp_servers.web.url: required") {
		t.Fatalf("ReloadTools with a bad file = %v", err)
	}
}

// Empty lists are JSON arrays, never null.
func TestToolsEmptyLists(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler(&toolsBackend{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/tools", nil))
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"servers":[],"tools":[],"custom":[]}` {
		t.Fatalf("GET /v1/tools = %d %s", rec.Code, rec.Body)
	}
}

// A backend without tools answers 501 with a reason.
func TestToolsNotImplemented(t *testing.T) {
	c := serve(t, fakeBackend{})
	if _, err := c.Tools(context.Background()); err == nil || !strings.Contains(err.Error(), "no tool registry") {
		t.Fatalf("Tools = %v", err)
	}
	rec := httptest.NewRecorder()
	Handler(fakeBackend{}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/tools/reload", nil))
	if rec.Code != http.StatusNotImplemented {
		t.Fatalf("POST /v1/tools/reload = %d; want 501", rec.Code)
	}
}
