package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"agent/pkg/admin"
	"agent/pkg/config"
)

// runEgress prints what left the box: connections and bytes by purpose
// and destination over the last hours (24 by default), refusals, and the
// values [privacy] redact kept from the model.
func runEgress(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("egress", flag.ContinueOnError)
	fs.SetOutput(stderr)
	hours := fs.Int("hours", 24, "how many hours back (1 to 168)")
	jsonFlag := fs.Bool("json", false, "machine-readable output")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: agentctl egress [--hours N] [--json]")
		return 2
	}
	return withClient(path, stderr, env, func(c *admin.Client) error {
		rep, err := c.Egress(ctx, *hours)
		if err != nil {
			return err
		}
		if asJSON || *jsonFlag {
			return printJSON(stdout, rep)
		}
		fmt.Fprintf(stdout, "outbound connections since %s\n", rep.Since.Local().Format("2006-01-02 15:04"))
		if len(rep.Rules) == 0 {
			fmt.Fprintln(stdout, "egress_allow: not enforced")
		} else {
			fmt.Fprintf(stdout, "egress_allow: %s\n", strings.Join(rep.Rules, ", "))
		}
		fmt.Fprintf(stdout, "%-10s %-40s %7s %8s %12s %12s\n", "PURPOSE", "HOST", "CONNS", "REFUSED", "SENT", "RECEIVED")
		for _, e := range rep.Destinations {
			fmt.Fprintf(stdout, "%-10s %-40s %7d %8d %12d %12d\n", e.Purpose, e.Host, e.Conns, e.Refused, e.BytesOut, e.BytesIn)
		}
		if len(rep.Destinations) == 0 {
			fmt.Fprintln(stdout, "(none)")
		}
		if len(rep.Redactions) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(rep.Redactions)) {
				parts = append(parts, fmt.Sprintf("%s %d", k, rep.Redactions[k]))
			}
			fmt.Fprintf(stdout, "kept from the model ([privacy] redact): %s\n", strings.Join(parts, ", "))
		}
		return nil
	})
}
