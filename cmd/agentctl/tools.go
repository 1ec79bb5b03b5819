package main

import (
	"context"
	"fmt"
	"io"

	"agent/pkg/admin"
	"agent/pkg/config"
)

const toolsUsage = `usage: agentctl tools list     MCP servers (state, tool count), then every tool the model can be offered
       agentctl tools reload   re-read [mcp_servers] from the config file and apply the difference
`

// runTools is `agentctl tools list|reload`.
func runTools(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	if len(args) != 1 || (args[0] != "list" && args[0] != "reload") {
		fmt.Fprint(stderr, toolsUsage)
		return 2
	}
	return withClient(path, stderr, env, func(c *admin.Client) error {
		if args[0] == "reload" {
			if err := c.ReloadTools(ctx); err != nil {
				return err
			}
			if !asJSON {
				fmt.Fprintln(stdout, "reloaded [mcp_servers]")
			}
		}
		list, err := c.Tools(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(stdout, list)
		}
		writeTools(stdout, list)
		return nil
	})
}

// writeTools prints one line per MCP server, then the tool names.
func writeTools(w io.Writer, l admin.ToolList) {
	if len(l.Servers) == 0 {
		fmt.Fprintln(w, "no MCP servers configured")
	} else {
		width := len("SERVER")
		for _, s := range l.Servers {
			width = max(width, len(s.Name))
		}
		fmt.Fprintf(w, "%-*s  %-9s  %-10s  %5s  %8s  %s\n", width, "SERVER", "TRANSPORT", "STATE", "TOOLS", "RESTARTS", "LAST ERROR")
		for _, s := range l.Servers {
			fmt.Fprintf(w, "%-*s  %-9s  %-10s  %5d  %8d  %s\n", width, s.Name, s.Transport, s.State, s.Tools, s.Restarts, s.LastError)
		}
	}
	fmt.Fprintf(w, "\ntools (%d):\n", len(l.Tools))
	for _, t := range l.Tools {
		if t.Server != "" {
			fmt.Fprintf(w, "  %s  (mcp: %s)\n", t.Name, t.Server)
		} else {
			fmt.Fprintf(w, "  %s\n", t.Name)
		}
	}
}
