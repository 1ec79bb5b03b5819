package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"agent/pkg/admin"
	"agent/pkg/config"
)

// runFleet shows the fleet, homes a user or moves one (fleet mode).
func runFleet(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	usage := func() int {
		fmt.Fprintln(stderr, "usage: agentctl fleet status | home USER BOX | move USER BOX")
		return 2
	}
	if len(args) == 0 {
		return usage()
	}
	switch args[0] {
	case "status":
		if len(args) != 1 {
			return usage()
		}
		return withClient(path, stderr, env, func(c *admin.Client) error {
			v, err := c.FleetStatus(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, v)
			}
			fmt.Fprintf(stdout, "this box: %s (NATS %s)\n\n", v.Box, map[bool]string{true: "connected", false: "NOT connected"}[v.Connected])
			fmt.Fprintf(stdout, "%-16s %-8s %-8s %-8s %-9s %-6s %-6s %s\n", "BOX", "HEALTHY", "INGRESS", "RSS", "QUEUED", "LAG", "SEEN", "VERSION")
			for _, b := range v.Boxes {
				fmt.Fprintf(stdout, "%-16s %-8s %-8s %-8s %-9d %-6d %-6s %s\n", b.Box, yesNo(b.Healthy), yesNo(b.Ingress),
					fmt.Sprintf("%.0fM", float64(b.RSSBytes)/(1<<20)), b.QueueDepth, b.Lag, ago(time.Since(b.At)), b.Version)
			}
			fmt.Fprintf(stdout, "\n%-32s %-16s %s\n", "USER", "HOME", "")
			for _, h := range v.Homes {
				note := ""
				if h.Moving {
					note = "moving from " + h.From
				}
				fmt.Fprintf(stdout, "%-32s %-16s %s\n", h.User, h.Box, note)
			}
			if v.More {
				fmt.Fprintln(stdout, "(more homes not listed)")
			}
			return nil
		})
	case "home", "move":
		if len(args) != 3 {
			return usage()
		}
		req := admin.FleetRequest{User: args[1], Box: args[2]}
		return withClient(path, stderr, env, func(c *admin.Client) error {
			if args[0] == "home" {
				h, err := c.FleetHome(ctx, req)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(stdout, h)
				}
				fmt.Fprintf(stdout, "%s is homed on %s (nothing moved: agentctl fleet move takes memory, sessions, files, jobs and pairing along)\n", h.User, h.Box)
				return nil
			}
			m, err := c.FleetMove(ctx, req)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, m)
			}
			if m.From == m.To {
				fmt.Fprintf(stdout, "%s is on %s already\n", req.User, m.To)
				return nil
			}
			fmt.Fprintf(stdout, "moved %s from %s to %s in %.1fs (%d bytes of memory, sessions, jobs and pairing; %d bytes of files)\n", req.User, m.From, m.To, m.Seconds, m.Bytes, m.FileBytes)
			if m.PurgeErr != "" {
				fmt.Fprintf(stdout, "warning: %s still holds a copy: %s\n", m.From, m.PurgeErr)
			}
			return nil
		})
	}
	return usage()
}

func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%dh", int(d.Hours()))
}
