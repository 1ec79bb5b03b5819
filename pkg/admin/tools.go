package admin

import (
	"context"
	"net/http"
)

// ToolServer is one configured MCP server, for `agentctl tools list`.
type ToolServer struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	State     string `json:"state"` // connecting | ready | failed | stopped
	Tools     int    `json:"tools"` // tools of this server offered to the model
	LastError string `json:"last_error,omitempty"`
	Restarts  int    `json:"restarts"`
}

// ToolInfo is one tool in the daemon's registry.
type ToolInfo struct {
	Name   string `json:"name"`
	Server string `json:"server,omitempty"` // the MCP server it comes from; "" for built-in tools
}

// ToolList is what GET /v1/tools returns: the MCP servers and every tool the
// model can be offered, sorted by name.
type ToolList struct {
	Servers []ToolServer `json:"servers"`
	Tools   []ToolInfo   `json:"tools"`
}

// ToolsBackend is the tools part of the admin API; a Backend that also
// implements it serves /v1/tools.
type ToolsBackend interface {
	Tools(ctx context.Context) (ToolList, error)
	// ReloadTools re-reads the configuration file and applies its
	// [mcp_servers]. An invalid file changes nothing.
	ReloadTools(ctx context.Context) error
}

// registerTools adds GET /v1/tools and POST /v1/tools/reload; both answer
// 501 when b is not a ToolsBackend.
func registerTools(mux *http.ServeMux, b Backend) {
	tools := optional[ToolsBackend](b, "tool registry")
	mux.HandleFunc("GET /v1/tools", tools(func(w http.ResponseWriter, r *http.Request, t ToolsBackend) {
		list, err := t.Tools(r.Context())
		if list.Servers == nil {
			list.Servers = []ToolServer{}
		}
		if list.Tools == nil {
			list.Tools = []ToolInfo{}
		}
		answer(w, list, err)
	}))
	mux.HandleFunc("POST /v1/tools/reload", tools(func(w http.ResponseWriter, r *http.Request, t ToolsBackend) {
		if err := t.ReloadTools(r.Context()); err != nil {
			writeError(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "reloaded"})
	}))
}

// Tools lists the daemon's MCP servers and registered tools.
func (c *Client) Tools(ctx context.Context) (ToolList, error) {
	return call[ToolList](ctx, c, http.MethodGet, "/v1/tools", nil)
}

// ReloadTools asks the daemon to re-read [mcp_servers] and apply the
// difference.
func (c *Client) ReloadTools(ctx context.Context) error {
	ctx, cancel := quick(ctx)
	defer cancel()
	return c.do(ctx, http.MethodPost, "/v1/tools/reload", nil, nil)
}
