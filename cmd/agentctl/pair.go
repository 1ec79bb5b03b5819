package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"agent/pkg/admin"
	"agent/pkg/config"
)

const pairUsage = `usage: agentctl pair list
       agentctl pair approve CODE
       agentctl pair revoke USER
Under security.dm_policy = "pairing" a stranger gets a code once; approve it to let them talk to the agent.
USER is a principal such as "wecom:zhangsan".
`

// runPair is `agentctl pair list|approve CODE|revoke USER`.
func runPair(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, pairUsage)
		return 2
	}
	printOne := func(p admin.Pairing, verb string) error {
		if asJSON {
			return json.NewEncoder(stdout).Encode(p)
		}
		fmt.Fprintf(stdout, "%s %s\n", verb, p.User)
		return nil
	}
	switch {
	case args[0] == "list" && len(args) == 1:
		return withClient(path, stderr, env, func(c *admin.Client) error {
			list, err := c.PairList(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, list)
			}
			if len(list) == 0 {
				fmt.Fprintln(stdout, "no approved users and no pending codes")
				return nil
			}
			fmt.Fprintf(stdout, "%-9s %-10s %-17s %s\n", "STATE", "CODE", "SINCE", "USER")
			for _, p := range list {
				code := p.Code
				if code == "" {
					code = "-"
				}
				fmt.Fprintf(stdout, "%-9s %-10s %-17s %s\n", p.State, code, p.Since.Local().Format("2006-01-02 15:04"), p.User)
			}
			return nil
		})
	case args[0] == "approve" && len(args) == 2:
		return withClient(path, stderr, env, func(c *admin.Client) error {
			p, err := c.PairApprove(ctx, args[1])
			if err != nil {
				return err
			}
			return printOne(p, "approved")
		})
	case args[0] == "revoke" && len(args) == 2:
		return withClient(path, stderr, env, func(c *admin.Client) error {
			p, err := c.PairRevoke(ctx, args[1])
			if err != nil {
				return err
			}
			return printOne(p, "revoked")
		})
	}
	fmt.Fprint(stderr, pairUsage)
	return 2
}
