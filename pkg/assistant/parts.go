package assistant

import (
	"context"

	"agent/pkg/mcp"
	"agent/pkg/session"
	"agent/pkg/tools"
)

// The pipeline's parts an operator's tools read and change (pkg/adminsrv
// serves them to agentctl). Each answers why when the pipeline did not
// start.

// Sessions are the conversations' sessions.
func (a *Assistant) Sessions() (*session.Store, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	return a.sessions, nil
}

// Tools is the tool registry: built-in, MCP, custom and channel tools.
func (a *Assistant) Tools() (*tools.Registry, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	return a.reg, nil
}

// MCP is the manager of the [mcp_servers].
func (a *Assistant) MCP() (*mcp.Manager, error) {
	t, err := a.mcpTools()
	if err != nil {
		return nil, err
	}
	return t.m, nil
}

// ReloadMCP is `agentctl tools reload`: like the reload_mcp tool, it
// re-reads the configuration file and applies its [mcp_servers] (an
// invalid file changes nothing), then waits briefly for the servers to
// connect, so that their state can be shown.
func (a *Assistant) ReloadMCP(ctx context.Context) error {
	if err := a.reloadMCP(ctx); err != nil {
		return err
	}
	a.settleMCP(ctx, settleAdmin)
	return nil
}
