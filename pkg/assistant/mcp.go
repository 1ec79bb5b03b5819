package assistant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"agent/pkg/buildinfo"
	"agent/pkg/config"
	"agent/pkg/egress"
	"agent/pkg/health"
	"agent/pkg/mcp"
	"agent/pkg/tools"
)

// MCP servers ([mcp_servers]): their tools are published into the
// registry as SERVER__TOOL. Servers connect in the background and never
// delay READY; SIGHUP, `agentctl tools reload` and the reload_mcp tool
// apply a changed [mcp_servers] without a restart.

// ToolReloadMCP is the tool that re-reads [mcp_servers].
const ToolReloadMCP = "reload_mcp"

// How long a reload waits for servers to connect before it reports their
// state.
const (
	settleTool  = 15 * time.Second // reload_mcp: the model wants the new tools
	settleAdmin = 5 * time.Second  // agentctl tools reload: under the client's 10 s
)

// mcpPart is the MCP manager and the registry it publishes into.
type mcpPart struct {
	m   *mcp.Manager
	reg *tools.Registry
}

// mcpTransport is an HTTP MCP server's transport: through the egress
// ledger when there is one.
func (a *Assistant) mcpTransport(string) *http.Transport {
	if a.d.Egress != nil {
		return a.d.Egress.Transport(egress.MCP)
	}
	return http.DefaultTransport.(*http.Transport).Clone()
}

// startMCP creates the MCP manager, registers reload_mcp and starts the
// configured servers in the background.
func (a *Assistant) startMCP(cfg *config.Config) error {
	m, err := mcp.New(mcp.Options{
		Logger:            a.logger,
		Tools:             a.reg,
		ClientVersion:     buildinfo.Version(),
		TerminateDuration: 2 * time.Second, // shutdown must fit in the unit's stop timeout
		Transport:         a.mcpTransport,
		Stripped:          func(n int) { a.countStripped("mcp", n) },
	})
	if err != nil {
		return err
	}
	a.mcp = &mcpPart{m: m, reg: a.reg}
	if err := a.reg.Register(a.reloadMCPTool()); err != nil {
		return err
	}
	a.mcp.apply(context.Background(), cfg.MCPServers, a.logger)
	a.d.Health.Register("mcp", a.checkMCP)
	return nil
}

// apply starts, stops and restarts servers to match servers. A server with
// an unusable config is logged and reported failed; the rest run.
func (t *mcpPart) apply(ctx context.Context, servers map[string]config.MCPServer, log *slog.Logger) {
	if err := t.m.Apply(ctx, servers); err != nil {
		log.Error("mcp servers not started", "err", err)
	}
}

func (a *Assistant) mcpTools() (*mcpPart, error) {
	if err := a.unavailable(); err != nil {
		return nil, err
	}
	return a.mcp, nil
}

func (t *mcpPart) close(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- t.m.Close() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("mcp servers did not stop in time: %w", ctx.Err())
	}
}

// reloadMCP re-reads the configuration file and applies its [mcp_servers].
// An invalid file leaves the running servers untouched.
func (a *Assistant) reloadMCP(ctx context.Context) error {
	t, err := a.mcpTools()
	if err != nil {
		return err
	}
	cur := a.config()
	if cur.Path == "" {
		return errors.New("the configuration was not loaded from a file; nothing to reload")
	}
	next, _, err := config.Load(cur.Path, a.d.Env)
	if err != nil {
		return fmt.Errorf("the running MCP servers are unchanged: %w", err)
	}
	if a.d.Scrubber != nil {
		// The new servers' env and header values are secrets too; the rest
		// of the running config still is until a full reload.
		a.d.Scrubber.Set(append(cur.Secrets(), next.Secrets()...))
	}
	if err := t.m.Apply(ctx, next.MCPServers); err != nil {
		return err
	}
	a.logger.Info("mcp servers reloaded", "file", cur.Path, "servers", len(next.MCPServers))
	return nil
}

// settleMCP waits, at most max, until no server is still connecting, and
// returns their status.
func (a *Assistant) settleMCP(ctx context.Context, max time.Duration) []mcp.ServerStatus {
	t, err := a.mcpTools()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st := t.m.Status()
		if !slices.ContainsFunc(st, func(s mcp.ServerStatus) bool { return s.State == mcp.StateConnecting }) {
			return st
		}
		select {
		case <-ctx.Done():
			return t.m.Status()
		case <-tick.C:
		}
	}
}

func (a *Assistant) reloadMCPTool() tools.Tool {
	return tools.Tool{
		Name: ToolReloadMCP,
		Description: "Re-read the [mcp_servers] section of the agent's configuration file and start, stop or restart " +
			"MCP servers to match, without restarting the agent. Returns each server's state and number of tools; " +
			"new tools (named SERVER__TOOL) can be used from the next step. For the assistant's owners only.",
		Owner: true,
		// Offered by default only with servers configured or running;
		// asked for by name (the first server just added to the file)
		// it runs all the same.
		When: func() bool { return len(a.config().MCPServers) > 0 || (a.mcp != nil && len(a.mcp.m.Status()) > 0) },
		Handler: func(ctx context.Context, call tools.Call) (string, error) {
			if !a.trusted(call) {
				// It restarts servers everyone's turns use and shows
				// their errors: an operator's action.
				return "", errors.New("reload_mcp: only the assistant's owners may reload its MCP servers")
			}
			if err := a.reloadMCP(ctx); err != nil {
				return "", fmt.Errorf("reload_mcp: %w", err)
			}
			return describeMCP(a.settleMCP(ctx, settleTool)), nil
		},
	}
}

func describeMCP(st []mcp.ServerStatus) string {
	if len(st) == 0 {
		return "MCP servers reloaded: none are configured."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "MCP servers reloaded (%d):", len(st))
	for _, s := range st {
		fmt.Fprintf(&b, "\n- %s (%s): %s, %d tools", s.Name, s.Transport, s.State, s.Tools)
		if s.State != mcp.StateReady && s.LastError != "" {
			fmt.Fprintf(&b, "; last error: %s", s.LastError)
		}
	}
	return b.String()
}

// checkMCP is a readiness check, degraded while any server is failing. It
// is never a liveness check: a broken MCP server must not stop the watchdog.
func (a *Assistant) checkMCP(context.Context) error {
	t, err := a.mcpTools()
	if err != nil {
		return nil // the conversations check reports it
	}
	var failed []string
	for _, s := range t.m.Status() {
		if s.State == mcp.StateFailed {
			failed = append(failed, fmt.Sprintf("%s: %s", s.Name, s.LastError))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: MCP server failing, retrying with backoff: %s", health.ErrDegraded, strings.Join(failed, "; "))
	}
	return nil
}
