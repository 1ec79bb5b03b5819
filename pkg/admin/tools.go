package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
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
	Custom bool   `json:"custom,omitempty"` // made with create_tool
}

// ToolList is what GET /v1/tools returns: the MCP servers and every tool the
// model can be offered, sorted by name.
type ToolList struct {
	Servers []ToolServer `json:"servers"`
	Tools   []ToolInfo   `json:"tools"`
	Custom  []CustomTool `json:"custom"` // every custom tool, offered or not
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
		if list.Custom == nil {
			list.Custom = []CustomTool{}
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

// CustomTool is one tool created with create_tool.
type CustomTool struct {
	Name        string    `json:"name"`
	State       string    `json:"state"` // live | pending | rejected
	Creator     string    `json:"creator"`
	Live        int       `json:"live,omitempty"`    // the version offered
	Pending     int       `json:"pending,omitempty"` // the version waiting for approval
	Latest      int       `json:"latest"`
	History     []int     `json:"history,omitempty"` // earlier live versions (rollback)
	ApprovedBy  string    `json:"approved_by,omitempty"`
	Language    string    `json:"language"`
	Network     bool      `json:"network,omitempty"`
	Description string    `json:"description"`
	Updated     time.Time `json:"updated"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// CustomToolDetail is a tool with the code of one version: the pending
// one when there is one (what an owner decides on), else the live one.
type CustomToolDetail struct {
	CustomTool
	Version    int             `json:"version"`
	Digest     string          `json:"digest"` // of this version's content: approve pins it
	Author     string          `json:"author"`
	Parameters json.RawMessage `json:"parameters"`
	Code       string          `json:"code"`
}

// CustomToolsBackend is the custom tools part of the admin API.
type CustomToolsBackend interface {
	CustomTool(ctx context.Context, name string) (CustomToolDetail, error)
	// CustomToolAction is approve, reject, rollback or remove. want,
	// for approve, pins the version read ("vN" or its digest); "": the
	// one waiting.
	CustomToolAction(ctx context.Context, name, action, want string) (CustomTool, error)
}

// ErrConflict is returned (wrapped) for an action the tool's state does
// not allow (approving a tool with nothing pending).
var ErrConflict = errors.New("conflict")

// CustomToolActions are the actions of POST /v1/tools/custom/{name}/{action}.
var CustomToolActions = []string{"approve", "reject", "rollback", "remove"}

func registerCustomTools(mux *http.ServeMux, b Backend) {
	custom := optional[CustomToolsBackend](b, "custom tools")
	mux.HandleFunc("GET /v1/tools/custom/{name}", custom(func(w http.ResponseWriter, r *http.Request, c CustomToolsBackend) {
		d, err := c.CustomTool(r.Context(), r.PathValue("name"))
		answer(w, d, err)
	}))
	mux.HandleFunc("POST /v1/tools/custom/{name}/{action}", custom(func(w http.ResponseWriter, r *http.Request, c CustomToolsBackend) {
		action := r.PathValue("action")
		if !slices.Contains(CustomToolActions, action) {
			writeError(w, http.StatusBadRequest, "unknown action "+action+"; one of "+strings.Join(CustomToolActions, ", "))
			return
		}
		t, err := c.CustomToolAction(r.Context(), r.PathValue("name"), action, r.URL.Query().Get("version"))
		if errors.Is(err, ErrConflict) {
			writeError(w, http.StatusConflict, err.Error())
			return
		}
		answer(w, t, err)
	}))
}

// CustomTool reads one custom tool with its code.
func (c *Client) CustomTool(ctx context.Context, name string) (CustomToolDetail, error) {
	return call[CustomToolDetail](ctx, c, http.MethodGet, "/v1/tools/custom/"+url.PathEscape(name), nil)
}

// CustomToolAction approves, rejects, rolls back or removes a custom tool;
// want pins the version an approval is for ("": the one waiting).
func (c *Client) CustomToolAction(ctx context.Context, name, action, want string) (CustomTool, error) {
	path := "/v1/tools/custom/" + url.PathEscape(name) + "/" + url.PathEscape(action)
	if want != "" {
		path += "?version=" + url.QueryEscape(want)
	}
	return call[CustomTool](ctx, c, http.MethodPost, path, nil)
}
