package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"agent/pkg/admin"
	"agent/pkg/config"
	"agent/pkg/invisible"
)

const toolsUsage = `usage: agentctl tools list            MCP servers, custom tools (state, creator, version, last error), every tool offered
       agentctl tools reload          re-read [mcp_servers] from the config file and apply the difference
       agentctl tools show NAME       a custom tool with the code of its pending (else live) version
       agentctl tools approve NAME [DIGEST|vN]
                                      make the pending version of a custom tool live (with the digest
                                      show printed: only if that is still the version waiting)
       agentctl tools reject NAME     drop the pending version
       agentctl tools rollback NAME   go back to the version live before the current one
       agentctl tools remove NAME     delete a custom tool and all its versions
`

// runTools is `agentctl tools list|reload|show|approve|reject|rollback|remove`.
func runTools(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	if len(args) == 2 && (args[0] == "show" || slices.Contains(admin.CustomToolActions, args[0])) {
		return runCustomTool(ctx, path, args[0], args[1], "", asJSON, stdout, stderr, env)
	}
	if len(args) == 3 && args[0] == "approve" {
		return runCustomTool(ctx, path, args[0], args[1], args[2], asJSON, stdout, stderr, env)
	}
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
	if len(l.Custom) > 0 {
		writeCustom(w, l.Custom)
	}
	fmt.Fprintf(w, "\ntools (%d):\n", len(l.Tools))
	for _, t := range l.Tools {
		switch {
		case t.Server != "":
			fmt.Fprintf(w, "  %s  (mcp: %s)\n", t.Name, t.Server)
		case t.Custom:
			fmt.Fprintf(w, "  %s  (custom)\n", t.Name)
		default:
			fmt.Fprintf(w, "  %s\n", t.Name)
		}
	}
}

// writeCustom prints one line per custom tool.
func writeCustom(w io.Writer, list []admin.CustomTool) {
	width := len("CUSTOM TOOL")
	for _, t := range list {
		width = max(width, len(t.Name))
	}
	fmt.Fprintf(w, "\n%-*s  %-8s  %-7s  %-9s  %-24s  %s\n", width, "CUSTOM TOOL", "STATE", "VERSION", "LANGUAGE", "CREATOR", "LAST ERROR")
	for _, t := range list {
		ver := "-"
		if t.Live > 0 {
			ver = fmt.Sprintf("v%d", t.Live)
		}
		if t.Pending > 0 {
			ver += fmt.Sprintf(" (v%d pending)", t.Pending)
		}
		lastErr := t.LastError
		if lastErr != "" && !t.LastErrorAt.IsZero() {
			lastErr = t.LastErrorAt.Local().Format("2006-01-02 15:04") + " " + lastErr
		}
		fmt.Fprintf(w, "%-*s  %-8s  %-7s  %-9s  %-24s  %s\n", width, t.Name, t.State, ver, t.Language, invisible.Escape(t.Creator), invisible.Escape(lastErr))
	}
}

// runCustomTool is show, approve, reject, rollback and remove of one
// custom tool.
func runCustomTool(ctx context.Context, path, action, name, want string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	return withClient(path, stderr, env, func(c *admin.Client) error {
		if action == "show" {
			d, err := c.CustomTool(ctx, name)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, d)
			}
			// Every character shows (invisible.Escape): the digest an
			// owner approves is of exactly what they read here.
			fmt.Fprintf(stdout, "%s v%d %s (%s) by %s, %s", d.Name, d.Version, d.Digest, d.State, invisible.Escape(d.Author), d.Language)
			if d.Network {
				fmt.Fprint(stdout, ", with network")
			}
			if d.Pending > 0 && d.Version == d.Pending {
				fmt.Fprint(stdout, " — waiting for approval")
			}
			fmt.Fprintf(stdout, "\ndescription: %s\nparameters: %s\n--- code ---\n%s\n", invisible.Escape(d.Description),
				invisible.Escape(string(d.Parameters)), invisible.Escape(strings.TrimRight(d.Code, "\n")))
			if d.LastError != "" {
				fmt.Fprintf(stdout, "--- note ---\n%s\n", invisible.Escape(d.LastError))
			}
			if d.Pending > 0 && d.Version == d.Pending {
				fmt.Fprintf(stdout, "--- end ---\napprove this version: agentctl tools approve %s %s\n", d.Name, d.Digest)
			}
			return nil
		}
		t, err := c.CustomToolAction(ctx, name, action, want)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(stdout, t)
		}
		switch action {
		case "approve":
			fmt.Fprintf(stdout, "approved: %s v%d is live\n", t.Name, t.Live)
		case "reject":
			fmt.Fprintf(stdout, "rejected: %s (state %s)\n", t.Name, t.State)
		case "rollback":
			fmt.Fprintf(stdout, "rolled back: %s v%d is live\n", t.Name, t.Live)
		case "remove":
			fmt.Fprintf(stdout, "removed: %s\n", t.Name)
		}
		return nil
	})
}
