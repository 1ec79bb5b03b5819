package doctor

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"agent/pkg/buildinfo"
	"agent/pkg/mcp"
	"agent/pkg/tools"
)

// mcpProbeTimeout bounds the whole mcp check: every configured server gets
// this long, in parallel, to connect and list its tools.
const mcpProbeTimeout = 10 * time.Second

// checkMCP starts each configured MCP server with a throwaway registry,
// waits until it lists its tools or fails, and stops it again.
func (e Env) checkMCP(ctx context.Context) Result {
	servers := e.Config.MCPServers
	if len(servers) == 0 {
		return Result{Level: OK, Detail: "none configured"}
	}
	tail := &stderrTail{mu: new(sync.Mutex), last: map[string]string{}}
	m, err := mcp.New(mcp.Options{
		Logger:            slog.New(tail),
		Tools:             tools.NewRegistry(),
		ConnectTimeout:    mcpProbeTimeout,
		TerminateDuration: time.Second,
		ClientVersion:     buildinfo.Version(),
	})
	if err != nil {
		return Result{Level: Fail, Detail: err.Error()}
	}
	defer m.Close()
	m.Apply(ctx, servers) // unusable configs are reported failed by Status

	ctx, cancel := context.WithTimeout(ctx, mcpProbeTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	st := m.Status()
wait:
	for slices.ContainsFunc(st, func(s mcp.ServerStatus) bool { return s.State == mcp.StateConnecting }) {
		select {
		case <-ctx.Done():
			break wait
		case <-tick.C:
			st = m.Status()
		}
	}

	var ok, bad, names []string
	for _, s := range st {
		switch s.State {
		case mcp.StateReady:
			ok = append(ok, fmt.Sprintf("%s %d tools", s.Name, s.Tools))
			continue
		case mcp.StateConnecting:
			bad = append(bad, fmt.Sprintf("%s: no tool list within %s", s.Name, mcpProbeTimeout))
		default:
			bad = append(bad, fmt.Sprintf("%s: %s", s.Name, s.LastError))
		}
		if line := tail.lastLine(s.Name); line != "" {
			bad[len(bad)-1] += " (stderr: " + line + ")"
		}
		names = append(names, s.Name)
	}
	if len(bad) > 0 {
		detail := "failing: " + strings.Join(bad, "; ")
		if len(ok) > 0 {
			detail += "; ready: " + strings.Join(ok, ", ")
		}
		return Result{Level: Fail, Detail: detail,
			Fix: "check [mcp_servers." + names[0] + "] in the config (run its command by hand, or curl its url), then agentctl tools reload"}
	}
	return Result{Level: OK, Detail: strings.Join(ok, ", ")}
}

// stderrTail is a slog.Handler that keeps the last stderr line of each MCP
// server, so a failure can say what the server printed.
type stderrTail struct {
	mu     *sync.Mutex
	last   map[string]string
	server string
}

func (h *stderrTail) Enabled(context.Context, slog.Level) bool { return true }

func (h *stderrTail) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "mcp server stderr" || h.server == "" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			h.mu.Lock()
			h.last[h.server] = a.Value.String()
			h.mu.Unlock()
			return false
		}
		return true
	})
	return nil
}

func (h *stderrTail) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	for _, a := range attrs {
		if a.Key == "server" {
			c.server = a.Value.String()
		}
	}
	return &c
}

func (h *stderrTail) WithGroup(string) slog.Handler { return h }

func (h *stderrTail) lastLine(server string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.last[server]
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
