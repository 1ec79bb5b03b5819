// Command agentctl is the operator's tool: `agentctl doctor` diagnoses an
// installation (daemon up or down), `agentctl status` asks the running
// daemon over its admin socket.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"agent/pkg/admin"
	"agent/pkg/buildinfo"
	"agent/pkg/config"
	"agent/pkg/doctor"
	"agent/pkg/localmodels"
	"agent/pkg/onnxrt"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

const usage = `usage: agentctl [-config PATH] [--json] COMMAND

commands:
  doctor [-v]   check config, state dir, database, runtimes, models, LLM, daemon, disk, memory
  status        the running daemon's health, components and memory use
  reload        make the daemon re-read its configuration (like SIGHUP)
  models verify check the configured model files' SHA-256 sums
  send [--channel admin] --to USER TEXT
                run TEXT through the daemon's conversation pipeline as USER and print the replies
  sessions      list conversations
  memory list [--scope S] [--history] | search [--scope S] QUERY | forget ID
                long-term memory: list, search (hybrid), forget a fact with its history
  tools list|reload  MCP servers, custom tools and every tool; reload re-reads [mcp_servers]
  tools show|approve|reject|rollback|remove NAME
                a custom tool (create_tool): read its code, approve or reject its pending version,
                go back to the previous version, delete it
  skills list | install PATH_OR_TARBALL | enable NAME | disable NAME
                Agent Skills: where each comes from and whether it is offered; install shows SHA-256 sums
  pair list | approve CODE | revoke USER
                DM pairing: strangers waiting with a code, approved users
  jobs list | add --owner USER (--cron SPEC | --at TIME) [--prompt] TEXT | rm ID
                scheduled jobs: list all, add one, remove one
  egress [--hours N] [--json]
                what left the box: connections and bytes by purpose and host, refusals, redactions
  cache list | clear [ID]
                voice and hardware commands answered without the model: list, clear one or all
  fleet status | home USER BOX | move USER BOX
                fleet mode: the boxes and where each user is homed; home a user; move a user
                (memory and sessions go along, messages wait and keep their order)
  console [end] print a one-time sign-in link for the web console (the operator); end signs all out
  version       print the version
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("agentctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	configPath := fs.String("config", "", "configuration file (default ./config.toml, else /etc/agent/config.toml)")
	asJSON := fs.Bool("json", false, "machine-readable output")
	showVersion := fs.Bool("version", false, "print the version")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, buildinfo.String("agentctl"))
		return 0
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	path := config.Find(*configPath, env)
	switch cmd {
	case "doctor":
		return runDoctor(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "status":
		return runStatus(ctx, path, *asJSON, stdout, stderr, env)
	case "reload":
		return withClient(path, stderr, env, func(c *admin.Client) error {
			if err := c.Reload(ctx); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "reloaded")
			return nil
		})
	case "models":
		if len(rest) != 1 || rest[0] != "verify" {
			fmt.Fprintln(stderr, "usage: agentctl models verify")
			return 2
		}
		return runModelsVerify(path, *asJSON, stdout, stderr, env)
	case "send":
		return runSend(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "sessions":
		return withClient(path, stderr, env, func(c *admin.Client) error {
			ss, err := c.Sessions(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(stdout, ss)
			}
			fmt.Fprintf(stdout, "%-6s %-6s %-8s %-17s %s\n", "ID", "OPEN", "MESSAGES", "LAST ACTIVITY", "KEY")
			for _, s := range ss {
				fmt.Fprintf(stdout, "%-6d %-6s %-8d %-17s %s\n", s.ID, yesNo(s.Open), s.Messages, s.LastActivity.Local().Format("2006-01-02 15:04"), s.Key)
			}
			return nil
		})
	case "memory":
		return runMemory(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "tools":
		return runTools(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "skills":
		return runSkills(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "pair":
		return runPair(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "jobs":
		return runJobs(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "console":
		return runConsole(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "egress":
		return runEgress(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "cache":
		return runCache(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "fleet":
		return runFleet(ctx, path, rest, *asJSON, stdout, stderr, env)
	case "version":
		fmt.Fprintln(stdout, buildinfo.String("agentctl"))
		return 0
	default:
		fmt.Fprintf(stderr, "agentctl: unknown command %q\n", cmd)
		fs.Usage()
		return 2
	}
}

func runDoctor(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	verbose := fs.Bool("v", false, "also print the effective configuration (secrets redacted)")
	jsonFlag := fs.Bool("json", false, "machine-readable output")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	asJSON = asJSON || *jsonFlag
	cfg, warns, err := config.Load(path, env)
	e := doctor.Env{ConfigPath: path, Config: cfg, ConfigErr: err, Warnings: warns, ExeDir: onnxrt.ExeDir()}
	if err != nil {
		e.Config = nil
	}
	results := doctor.Run(ctx, doctor.Checks(e), 60*time.Second)
	if asJSON {
		doctor.WriteJSON(stdout, results)
	} else {
		doctor.WriteText(stdout, results)
		if *verbose && e.Config != nil {
			fmt.Fprintf(stdout, "\n# effective configuration (%s, secrets redacted)\n%s", e.Config.Path, e.Config.Redacted())
		}
	}
	if doctor.Failed(results) {
		return 1
	}
	return 0
}

func runStatus(ctx context.Context, path string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	return withClient(path, stderr, env, func(c *admin.Client) error {
		st, err := c.Status(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(stdout, st)
		}
		health := "healthy"
		if !st.Healthy {
			health = "UNHEALTHY"
		}
		fmt.Fprintf(stdout, "agent %s  pid %d  up %s  %s  RSS %d MiB\nlisten %s  state %s  config %s\n",
			st.Version, st.PID, st.Uptime, health, st.RSSBytes>>20, st.Listen, st.StateDir, st.ConfigPath)
		for _, ch := range st.Checks {
			fmt.Fprintf(stdout, "  %-9s %-16s %s\n", ch.Status, ch.Name, ch.Detail)
		}
		for name, state := range st.Components {
			fmt.Fprintf(stdout, "  component %-12s %s\n", name, state)
		}
		if h := st.Held; h != nil {
			if h.Turns == 0 {
				fmt.Fprintf(stdout, "held turns: none\n")
			} else {
				fmt.Fprintf(stdout, "held turns: %d in %d conversation(s), oldest %s (waiting for the model service; answered when it is back)\n",
					h.Turns, h.Conversations, h.Oldest.Local().Format("2006-01-02 15:04:05"))
			}
		}
		if m := st.Memory; m != nil {
			mode := "semantic + keyword"
			if !m.Semantic {
				mode = "keyword only (no embedding model)"
			}
			fmt.Fprintf(stdout, "memory: %d facts, %s", m.Facts, mode)
			if m.Unembedded > 0 && m.Semantic {
				fmt.Fprintf(stdout, "; embedding %d of them in the background (%d%% done)", m.Unembedded, 100*(m.Facts-m.Unembedded)/max(1, m.Facts))
			}
			fmt.Fprintln(stdout)
		}
		if !st.Healthy {
			return errors.New("daemon is unhealthy")
		}
		return nil
	})
}

// withClient loads just enough configuration to find the admin socket.
func withClient(path string, stderr io.Writer, env config.Env, fn func(*admin.Client) error) int {
	cfg, _, err := config.Load(path, env)
	if err != nil {
		fmt.Fprintf(stderr, "agentctl: %v\n", err)
		return config.ExitConfig
	}
	if err := fn(admin.NewClient(cfg.Server.AdminSocket)); err != nil {
		fmt.Fprintf(stderr, "agentctl: %v\n", err)
		if errors.Is(err, admin.ErrNotRunning) {
			fmt.Fprintln(stderr, "agentctl: start it with systemctl start agent (or make run)")
			return 3
		}
		return 1
	}
	return 0
}

func runModelsVerify(path string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	cfg, _, err := config.Load(path, env)
	if err != nil {
		fmt.Fprintf(stderr, "agentctl: %v\n", err)
		return config.ExitConfig
	}
	vs := localmodels.Verify(cfg)
	bad := false
	for _, v := range vs {
		bad = bad || v.Status == "mismatch" || v.Status == "missing"
	}
	if asJSON {
		printJSON(stdout, vs)
	} else {
		for _, v := range vs {
			fmt.Fprintf(stdout, "%-8s  %s  %s\n", v.Status, v.Path, v.Detail)
		}
	}
	if bad {
		return 1
	}
	return 0
}

func runSend(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	channel := fs.String("channel", "admin", "channel to speak on (only admin can be driven from here)")
	to := fs.String("to", "", "user the message comes from (the conversation's owner)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	text := strings.Join(fs.Args(), " ")
	if *to == "" || strings.TrimSpace(text) == "" {
		fmt.Fprintln(stderr, "usage: agentctl send [--channel admin] --to USER TEXT")
		return 2
	}
	return withClient(path, stderr, env, func(c *admin.Client) error {
		res, err := c.Send(ctx, admin.SendRequest{Channel: *channel, To: *to, Text: text})
		if err != nil {
			return err
		}
		if asJSON {
			return json.NewEncoder(stdout).Encode(res)
		}
		for _, r := range res.Replies {
			fmt.Fprintln(stdout, r)
		}
		return nil
	})
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

const memoryUsage = `usage: agentctl memory list [--scope SCOPE] [--history] [--limit N]
       agentctl memory search [--scope SCOPE] [--limit N] QUERY
       agentctl memory forget ID
A scope is a user ("wecom:alice") or a group chat ("group:wecom:CHATID"); without --scope every scope is listed or searched.
`

func runMemory(ctx context.Context, path string, args []string, asJSON bool, stdout, stderr io.Writer, env config.Env) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, memoryUsage)
		return 2
	}
	fs := flag.NewFlagSet("memory "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, memoryUsage) }
	scope := fs.String("scope", "", "only this user or group")
	limit := fs.Int("limit", 0, "at most this many facts")
	history := fs.Bool("history", false, "include superseded versions (list)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	q := admin.MemoryQuery{Scope: *scope, Limit: *limit, History: *history}
	print := func(facts []admin.Fact) error {
		if asJSON {
			return printJSON(stdout, facts)
		}
		if len(facts) == 0 {
			fmt.Fprintln(stdout, "no facts")
			return nil
		}
		fmt.Fprintf(stdout, "%-6s %-10s %-24s %s\n", "ID", "UPDATED", "SCOPE", "FACT")
		for _, f := range facts {
			text := f.Text
			if f.SupersededBy != 0 {
				text += fmt.Sprintf("  (replaced by #%d)", f.SupersededBy)
			}
			fmt.Fprintf(stdout, "%-6d %-10s %-24s %s\n", f.ID, f.Updated.Local().Format("2006-01-02"), f.Scope, text)
		}
		return nil
	}
	switch args[0] {
	case "list":
		if fs.NArg() != 0 {
			fs.Usage()
			return 2
		}
		return withClient(path, stderr, env, func(c *admin.Client) error {
			facts, err := c.MemoryList(ctx, q)
			if err != nil {
				return err
			}
			return print(facts)
		})
	case "search":
		q.Query = strings.Join(fs.Args(), " ")
		if strings.TrimSpace(q.Query) == "" {
			fs.Usage()
			return 2
		}
		return withClient(path, stderr, env, func(c *admin.Client) error {
			facts, err := c.MemorySearch(ctx, q)
			if err != nil {
				return err
			}
			return print(facts)
		})
	case "forget":
		if fs.NArg() != 1 {
			fs.Usage()
			return 2
		}
		id, ok := parseID(fs.Arg(0))
		if !ok {
			fmt.Fprintf(stderr, "agentctl memory forget: %q is not a fact id\n", fs.Arg(0))
			return 2
		}
		return withClient(path, stderr, env, func(c *admin.Client) error {
			f, err := c.MemoryForget(ctx, id)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(stdout).Encode(f)
			}
			fmt.Fprintf(stdout, "forgotten #%d (%s): %s\n", f.ID, f.Scope, f.Text)
			return nil
		})
	}
	fmt.Fprint(stderr, memoryUsage)
	return 2
}

// printJSON writes v indented, for --json.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseID reads a fact or job id as the assistant shows it ("#12" or
// "12"): a positive integer and nothing else.
func parseID(s string) (int64, bool) {
	id, err := strconv.ParseInt(strings.TrimPrefix(s, "#"), 10, 64)
	return id, err == nil && id > 0
}
