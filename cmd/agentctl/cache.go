package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"agent/pkg/admin"
	"agent/pkg/config"
)

// runCache lists or clears the command cache (voice and hardware commands
// answered without the model).
func runCache(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	usage := func() int {
		fmt.Fprintln(stderr, "usage: agentctl cache list | clear [ID]")
		return 2
	}
	if len(args) == 0 {
		return usage()
	}
	switch args[0] {
	case "list":
		if len(args) != 1 {
			return usage()
		}
		return withClient(path, stderr, env, func(c *admin.Client) error {
			list, err := c.Cache(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, list)
			}
			fmt.Fprintf(stdout, "%-5s %-22s %-9s %-5s %-17s %-20s %s\n", "ID", "WHO", "PROFILE", "HITS", "EXPIRES", "TOOL", "UTTERANCE -> REPLY")
			for _, e := range list {
				who := e.Channel + ":" + e.Sender
				if e.Device != "" {
					who += "/" + e.Device
				}
				fmt.Fprintf(stdout, "%-5d %-22s %-9s %-5d %-17s %-20s %q -> %q\n", e.ID, who, e.Profile, e.Hits,
					e.Expires.Local().Format("2006-01-02 15:04"), e.Tool, e.Utterance, e.Reply)
			}
			if len(list) == 0 {
				fmt.Fprintln(stdout, "(empty)")
			}
			return nil
		})
	case "clear":
		var id int64
		switch len(args) {
		case 1:
		case 2:
			n, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || n <= 0 {
				return usage()
			}
			id = n
		default:
			return usage()
		}
		return withClient(path, stderr, env, func(c *admin.Client) error {
			n, err := c.ClearCache(ctx, id)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "cleared %d entr%s\n", n, map[bool]string{true: "y", false: "ies"}[n == 1])
			return nil
		})
	}
	return usage()
}
