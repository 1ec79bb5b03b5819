package assistant

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"agent/pkg/admin"
	"agent/pkg/customtool"
	"agent/pkg/recipient"
)

// builtinTools are the names of the built-in tools (the external
// contract), registered or not yet: a custom tool may take none of them,
// or a later start would find its name taken.
var builtinTools = []string{"exec", "message", "read_file", "write_file", "edit_file", "list_files",
	"schedule", "list_schedules", "remove_schedule", "send_image", "send_file", "send_video", "send_link",
	"trim_video", "add_bgm", "generate_video", "web_search", "search_memory", "recall", "self_check",
	"diagnose", "create_tool", "list_custom_tools", "remove_tool", "reload_mcp", "get_skill",
	"read_document", "web_fetch", "find_tools", "correct_memory", "forget_memory", "list_skills"}

// CustomToolsDir is the workspace folder of the custom tools.
const CustomToolsDir = "custom_tools"

// openCustomTools loads the custom tools (offered once the sandbox works:
// activateCustomTools).
func (a *Assistant) openCustomTools(workspaceDir string) (*customtool.Manager, error) {
	return customtool.Open(customtool.Config{
		Dir:      filepath.Join(workspaceDir, CustomToolsDir),
		Registry: a.reg,
		Sandbox: func(ctx context.Context) (customtool.Runner, error) {
			sb, err := a.readySandbox(ctx)
			if err != nil {
				return nil, err
			}
			return sb, nil
		},
		Spaces: a.spaces,
		Owner:  a.callerIsOwner,
		Network: func() bool {
			sb, err := a.Sandbox()
			return err == nil && sb.NetworkAllowed()
		},
		Notify:   a.NotifyOwners,
		Reserved: func(name string) bool { return slices.Contains(builtinTools, name) },
		Clock:    a.clock,
		Logger:   a.logger.With("component", "custom_tools"),
	})
}

// CustomTools is the custom tools' manager (nil when the pipeline is
// unavailable).
func (a *Assistant) CustomTools() *customtool.Manager { return a.custom }

// toolsCommand is /tools in chat: the tools waiting for approval, and for
// owners show, approve and reject.
func (a *Assistant) toolsCommand(_ context.Context, user string, fields []string) string {
	channel, id, _ := strings.Cut(user, ":")
	owner := a.Recipients().Owner(recipient.Caller{Channel: channel, User: id})
	return a.custom.Command(user, owner, fields)
}

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
func (a *Assistant) customList() []admin.CustomTool {
	st := a.custom.Store()
	var out []admin.CustomTool
	for _, m := range st.List() {
		ver, _ := st.Version(m.Name, shown(m))
		out = append(out, adminCustom(m, ver))
	}
	return out
}

// CustomTool implements admin.CustomToolsBackend.
func (a *Assistant) CustomTool(_ context.Context, name string) (admin.CustomToolDetail, error) {
	if err := a.unavailable(); err != nil {
		return admin.CustomToolDetail{}, err
	}
	st := a.custom.Store()
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
func (a *Assistant) CustomToolAction(_ context.Context, name, action, want string) (admin.CustomTool, error) {
	if err := a.unavailable(); err != nil {
		return admin.CustomTool{}, err
	}
	var m customtool.Meta
	var err error
	const by = "operator"
	switch action {
	case "approve":
		m, err = a.custom.Approve(name, want, by)
	case "reject":
		m, err = a.custom.Reject(name, by)
	case "rollback":
		m, err = a.custom.Rollback(name, by)
	case "remove":
		m, err = a.custom.Remove(nil, name)
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
	ver, _ := a.custom.Store().Version(name, shown(m))
	if action == "remove" {
		m.Live, m.Pending = 0, 0
	}
	return adminCustom(m, ver), nil
}
