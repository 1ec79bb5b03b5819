package assistant

import (
	"context"
	"path/filepath"
	"slices"
	"strings"

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

// CustomTools is the custom tools' manager (the operator approves,
// rejects, rolls back and removes them).
func (a *Assistant) CustomTools() (*customtool.Manager, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	return a.custom, nil
}

// toolsCommand is /tools in chat: the tools waiting for approval, and for
// owners show, approve and reject.
func (a *Assistant) toolsCommand(_ context.Context, user string, fields []string) string {
	channel, id, _ := strings.Cut(user, ":")
	owner := a.Recipients().Owner(recipient.Caller{Channel: channel, User: id})
	return a.custom.Command(user, owner, fields)
}
