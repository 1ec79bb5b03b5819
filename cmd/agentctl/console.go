package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"agent/pkg/admin"
	"agent/pkg/config"
)

const consoleUsage = `usage: agentctl console        print a one-time sign-in link for the web console
       agentctl console end    sign every console session out (a leaked link or cookie)
The link works once, within two minutes, in a browser that reaches server.listen (on the box, or
through an SSH tunnel to the same port). It signs that browser in as the operator: voice and chat
as the admin channel, no token and no pairing. Only root and the service user can get one (the
admin socket is 0600).
`

// runConsole is `agentctl console [end]`.
func runConsole(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	switch {
	case len(args) == 0:
		return withClient(path, stderr, env, func(c *admin.Client) error {
			l, err := c.ConsoleLink(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, l)
			}
			// The link alone on stdout (xdg-open "$(agentctl console)"),
			// what to do with it on stderr.
			fmt.Fprintln(stdout, l.URL)
			left := time.Until(l.ExpiresAt).Round(time.Second).String()
			if strings.HasSuffix(left, "m0s") {
				left = strings.TrimSuffix(left, "0s") // "2m0s" -> "2m"
			}
			fmt.Fprintf(stderr, "Open it in a browser within %s; it works once and signs that browser in as the operator.\n", left)
			if !l.Voice {
				fmt.Fprintln(stderr, "voice.enabled is false: the console shows status only.")
			}
			return nil
		})
	case len(args) == 1 && args[0] == "end":
		return withClient(path, stderr, env, func(c *admin.Client) error {
			e, err := c.ConsoleEnd(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, e)
			}
			fmt.Fprintf(stdout, "ended %d console session(s), closed %d voice connection(s)\n", e.Sessions, e.Connections)
			return nil
		})
	}
	fmt.Fprint(stderr, consoleUsage)
	return 2
}
