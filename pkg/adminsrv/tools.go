package adminsrv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"agent/pkg/admin"
	"agent/pkg/customtool"
	"agent/pkg/mcp"
)

// agentctl tools: the registry, the MCP servers and the custom tools.

// Tools implements admin.ToolsBackend.
func (b *Backend) Tools(context.Context) (admin.ToolList, error) {
	m, err := b.Assistant.MCP()
	if err != nil {
		return admin.ToolList{}, err
	}
	reg, err := b.Assistant.Tools()
	if err != nil {
		return admin.ToolList{}, err
	}
	ct, err := b.Assistant.CustomTools()
	if err != nil {
		return admin.ToolList{}, err
	}
	st := m.Status()
	out := admin.ToolList{Servers: make([]admin.ToolServer, 0, len(st))}
	for _, s := range st {
		out.Servers = append(out.Servers, admin.ToolServer{Name: s.Name, Transport: s.Transport, State: string(s.State),
			Tools: s.Tools, LastError: s.LastError, Restarts: s.Restarts})
	}
	custom := map[string]bool{}
	for _, c := range customList(ct) {
		custom[c.Name] = c.Live > 0
		out.Custom = append(out.Custom, c)
	}
	for _, tool := range reg.List("") {
		out.Tools = append(out.Tools, admin.ToolInfo{Name: tool.Name, Server: serverOf(tool.Name, st), Custom: custom[tool.Name]})
	}
	return out, nil
}

// serverOf names the MCP server a registry name belongs to ("" for a
// built-in tool). Server names cannot contain "__", so the prefix decides.
func serverOf(name string, servers []mcp.ServerStatus) string {
	for _, s := range servers {
		if strings.HasPrefix(name, s.Name+"__") {
			return s.Name
		}
	}
	return ""
}

// ReloadTools implements admin.ToolsBackend: like reload_mcp, then waits
// briefly so that `agentctl tools reload` can show the outcome.
func (b *Backend) ReloadTools(ctx context.Context) error { return b.Assistant.ReloadMCP(ctx) }

func adminCustom(m customtool.Meta, ver customtool.Version) admin.CustomTool {
	return admin.CustomTool{Name: m.Name, State: string(m.State()), Creator: m.Creator, Live: m.Live, Pending: m.Pending,
		Latest: m.Latest, History: m.History, ApprovedBy: m.ApprovedBy, Language: ver.Language, Network: ver.Network,
		Description: ver.Description, Updated: m.Updated, LastError: m.LastError, LastErrorAt: m.LastErrorAt}
}

// shown is the version an owner looks at: the pending one, else the live
// one, else the rejected one.
func shown(m customtool.Meta) int {
	if m.Pending > 0 {
		return m.Pending
	}
	return max(m.Live, m.Rejected)
}

// customList is every custom tool for `agentctl tools list`.
func customList(ct *customtool.Manager) []admin.CustomTool {
	st := ct.Store()
	var out []admin.CustomTool
	for _, m := range st.List() {
		ver, _ := st.Version(m.Name, shown(m))
		out = append(out, adminCustom(m, ver))
	}
	return out
}

// CustomTool implements admin.CustomToolsBackend.
func (b *Backend) CustomTool(_ context.Context, name string) (admin.CustomToolDetail, error) {
	ct, err := b.Assistant.CustomTools()
	if err != nil {
		return admin.CustomToolDetail{}, err
	}
	st := ct.Store()
	m, ok := st.Get(name)
	if !ok {
		return admin.CustomToolDetail{}, fmt.Errorf("%w: no custom tool %q", admin.ErrNotFound, name)
	}
	ver, err := st.Version(name, shown(m))
	if err != nil {
		return admin.CustomToolDetail{}, err
	}
	return admin.CustomToolDetail{CustomTool: adminCustom(m, ver), Version: ver.Version, Digest: ver.Digest(), Author: ver.Author,
		Parameters: ver.Parameters, Code: ver.Code}, nil
}

// CustomToolAction implements admin.CustomToolsBackend: the operator
// approves, rejects, rolls back or removes.
func (b *Backend) CustomToolAction(_ context.Context, name, action, want string) (admin.CustomTool, error) {
	ct, err := b.Assistant.CustomTools()
	if err != nil {
		return admin.CustomTool{}, err
	}
	var m customtool.Meta
	const by = "operator"
	switch action {
	case "approve":
		m, err = ct.Approve(name, want, by)
	case "reject":
		m, err = ct.Reject(name, by)
	case "rollback":
		m, err = ct.Rollback(name, by)
	case "remove":
		m, err = ct.Remove(nil, name)
	default:
		return admin.CustomTool{}, fmt.Errorf("unknown action %q", action)
	}
	switch {
	case errors.Is(err, customtool.ErrNotFound):
		return admin.CustomTool{}, fmt.Errorf("%w: %v", admin.ErrNotFound, err)
	case errors.Is(err, customtool.ErrConflict):
		return admin.CustomTool{}, fmt.Errorf("%w: %v", admin.ErrConflict, err)
	case err != nil:
		return admin.CustomTool{}, err
	}
	ver, _ := ct.Store().Version(name, shown(m))
	if action == "remove" {
		m.Live, m.Pending = 0, 0
	}
	return adminCustom(m, ver), nil
}
