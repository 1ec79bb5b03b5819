package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"agent/pkg/admin"
	"agent/pkg/config"
)

const jobsUsage = `usage: agentctl jobs list
       agentctl jobs add --owner USER (--cron "SPEC" | --at TIME) [--tz ZONE] [--channel C] [--to U] [--name N] [--prompt] TEXT
       agentctl jobs rm ID
USER is a user scope such as wecom:alice; the job is delivered to that user unless --channel/--to say otherwise.
SPEC has 5 fields (minute hour day-of-month month day-of-week), e.g. "0 9 * * 1"; TIME is ISO 8601, e.g. 2025-03-01T08:00.
--prompt makes TEXT a task the assistant runs as USER at that time; its answer is sent.
`

// runJobs is `agentctl jobs list|add|rm`.
func runJobs(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, jobsUsage)
		return 2
	}
	fs := flag.NewFlagSet("jobs "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, jobsUsage) }
	var spec admin.JobSpec
	fs.StringVar(&spec.Owner, "owner", "", "user scope that owns the job (wecom:alice)")
	fs.StringVar(&spec.Channel, "channel", "", "deliver on this channel (default the owner's)")
	fs.StringVar(&spec.To, "to", "", "deliver to this recipient (default the owner)")
	fs.StringVar(&spec.Name, "name", "", "a short name")
	fs.StringVar(&spec.Cron, "cron", "", "recurring: 5-field cron expression")
	fs.StringVar(&spec.At, "at", "", "once: ISO 8601 time")
	fs.StringVar(&spec.TZ, "tz", "", "IANA time zone (default agent.timezone)")
	prompt := fs.Bool("prompt", false, "TEXT is a task for the assistant, not a message")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	switch args[0] {
	case "list":
		if fs.NArg() != 0 {
			fs.Usage()
			return 2
		}
		return withClient(path, stderr, env, func(c *admin.Client) error {
			list, err := c.Jobs(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, list)
			}
			writeJobs(stdout, list)
			return nil
		})
	case "add":
		text := strings.Join(fs.Args(), " ")
		if spec.Owner == "" || strings.TrimSpace(text) == "" || (spec.Cron == "") == (spec.At == "") {
			fs.Usage()
			return 2
		}
		if *prompt {
			spec.Prompt = text
		} else {
			spec.Text = text
		}
		return withClient(path, stderr, env, func(c *admin.Client) error {
			j, err := c.AddJob(ctx, spec)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(j)
			}
			fmt.Fprintf(stdout, "added #%d, next run %s\n", j.ID, when(j.Next, j.TZ))
			return nil
		})
	case "rm", "remove":
		if fs.NArg() != 1 {
			fs.Usage()
			return 2
		}
		id, ok := parseID(fs.Arg(0))
		if !ok {
			fmt.Fprintf(stderr, "agentctl jobs rm: %q is not a job id\n", fs.Arg(0))
			return 2
		}
		return withClient(path, stderr, env, func(c *admin.Client) error {
			j, err := c.RemoveJob(ctx, id)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(j)
			}
			fmt.Fprintf(stdout, "removed #%d (%s): %s\n", j.ID, j.Owner, j.Payload)
			return nil
		})
	}
	fs.Usage()
	return 2
}

func when(t time.Time, tz string) string {
	if t.IsZero() {
		return "-"
	}
	if loc, err := time.LoadLocation(tz); err == nil {
		t = t.In(loc)
	}
	return t.Format("2006-01-02 15:04 MST")
}

// writeJobs prints one line per job.
func writeJobs(w io.Writer, list []admin.Job) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no jobs")
		return
	}
	fmt.Fprintf(w, "%-5s %-8s %-20s %-22s %-20s %-8s %-4s %s\n", "ID", "STATE", "OWNER", "SCHEDULE", "NEXT", "LAST", "FAIL", "ACTION")
	for _, j := range list {
		sched := j.Spec
		if j.Kind == "at" {
			if t, err := time.Parse(time.RFC3339, j.Spec); err == nil {
				sched = "at " + when(t, j.TZ)
			}
		}
		action := j.Action + ": " + j.Payload
		if len([]rune(action)) > 60 {
			action = string([]rune(action)[:60]) + "…"
		}
		fmt.Fprintf(w, "%-5d %-8s %-20s %-22s %-20s %-8s %-4d %s\n", j.ID, j.State, j.Owner, sched, when(j.Next, j.TZ), j.LastStatus, j.Failures, action)
		if j.LastError != "" {
			fmt.Fprintf(w, "      last error: %s\n", j.LastError)
		}
	}
}
