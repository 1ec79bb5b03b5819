// Package shell is the exec tool: a shell command the model writes, run
// with /bin/sh -c in the caller's sandbox (pkg/sandbox) with the caller's
// own folder as the working directory. The result is the exit status,
// stdout and stderr (capped, with a notice) and the files the run created,
// changed or deleted in that folder.
package shell

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"agent/pkg/sandbox"
	"agent/pkg/tools"
	"agent/pkg/workspace"
)

// Runner runs sandboxed commands (*sandbox.Sandbox).
type Runner interface {
	Run(ctx context.Context, spec sandbox.Spec) (*sandbox.Result, error)
}

// Spaces is what exec needs of the workspace (*workspace.Spaces).
type Spaces interface {
	View(call tools.Call) (workspace.View, error)
}

// Config of the exec tool.
type Config struct {
	Runner Runner
	Spaces Spaces
	// Timeout is a run's wall time and the most timeout_s may ask
	// (sandbox.timeout).
	Timeout time.Duration
	// Network says whether runs may ask for the network (sandbox.network
	// = "on"); only then does the tool take a network argument.
	Network bool
	// Python names the interpreter in the description.
	Python string
	// Skill mounts a skill's folder (and its credentials) for a run that
	// names one; nil: the skill argument is refused.
	Skill  func(call tools.Call, name string) (Mount, error)
	Logger *slog.Logger
}

// Mount is what a skill adds to a run: its folder read-only at
// /skills/NAME, the files and variables configured for it.
type Mount struct {
	Binds []sandbox.Bind
	Files []sandbox.DataFile
	Env   []string
}

// Bounds of the arguments.
const (
	MaxCommand = 64 << 10
	MaxStdin   = 1 << 20
	// maxListed is how many files of each kind the result names.
	maxListed = 30
	// maxSnapshot bounds the entries compared before and after a run.
	maxSnapshot = 20_000
)

// Args of exec. Network is offered only when the config allows it.
type Args struct {
	Command  string `json:"command" desc:"run with /bin/sh -c"`
	Stdin    string `json:"stdin,omitempty" desc:"standard input"`
	TimeoutS int    `json:"timeout_s,omitempty" desc:"seconds, at most the default"`
	Skill    string `json:"skill,omitempty" desc:"a skill whose scripts run: mounted at /skills/NAME with its credentials"`
}

// NetArgs are Args with the network switch.
type NetArgs struct {
	Args
	Network bool `json:"network,omitempty" desc:"true to give this run network access (off by default)"`
}

// Tool returns the exec tool.
func Tool(cfg Config) tools.Tool {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = sandbox.DefaultLimits.Timeout
	}
	py := "python3"
	if cfg.Python != "" {
		py = "python3 (" + filepath.Base(cfg.Python) + ")"
	}
	desc := fmt.Sprintf("Run a shell command in a sandbox, in your folder (/work; shared/ read-only at /shared), with %s and the usual command-line tools; limits %d s, memory, output. Returns exit status, stdout, stderr and changed files.", py, int(cfg.Timeout/time.Second))
	schema := tools.SchemaFor[Args]()
	if cfg.Network {
		desc += " The network is off unless you pass network: true."
		schema = tools.SchemaFor[NetArgs]()
	} else {
		desc += " There is no network."
	}
	return tools.Tool{
		Name:        "exec",
		Description: desc,
		Schema:      schema,
		Handler:     cfg.run,
	}
}

func (cfg Config) run(ctx context.Context, call tools.Call) (string, error) {
	var a NetArgs
	var err error
	if cfg.Network {
		a, err = tools.Decode[NetArgs](call.Args)
	} else {
		a.Args, err = tools.Decode[Args](call.Args)
	}
	if err != nil {
		return "", err
	}
	switch {
	case strings.TrimSpace(a.Command) == "":
		return "", fmt.Errorf("%w: command is empty", tools.ErrBadArgs)
	case len(a.Command) > MaxCommand:
		return "", fmt.Errorf("%w: command is %d bytes; at most %d (write a script file and run it)", tools.ErrBadArgs, len(a.Command), MaxCommand)
	case strings.IndexByte(a.Command, 0) >= 0:
		return "", fmt.Errorf("%w: command contains a NUL byte", tools.ErrBadArgs)
	case len(a.Stdin) > MaxStdin:
		return "", fmt.Errorf("%w: stdin is %d bytes; at most %d (write it to a file instead)", tools.ErrBadArgs, len(a.Stdin), MaxStdin)
	case a.TimeoutS < 0:
		return "", fmt.Errorf("%w: timeout_s must be positive", tools.ErrBadArgs)
	}
	timeout := cfg.Timeout
	var notes []string
	if a.TimeoutS > 0 {
		if t := time.Duration(a.TimeoutS) * time.Second; t < timeout {
			timeout = t
		} else if t > timeout {
			notes = append(notes, fmt.Sprintf("timeout_s %d is over the limit; %d s applied", a.TimeoutS, int(cfg.Timeout/time.Second)))
		}
	}
	v, err := cfg.Spaces.View(call)
	if err != nil {
		// A folder over its quota (or a disk down to its reserve) runs
		// nothing: the file tools free room (delete_file).
		return "", err
	}
	before := snapshot(v.Work)
	spec := v.Spec("/bin/sh", "-c", a.Command)
	if a.Skill != "" {
		if cfg.Skill == nil {
			return "", fmt.Errorf("%w: skill: there are no skills on this box", tools.ErrBadArgs)
		}
		m, err := cfg.Skill(call, a.Skill)
		if err != nil {
			return "", err
		}
		spec.Binds = append(spec.Binds, m.Binds...)
		spec.Files, spec.Env = m.Files, m.Env
	}
	spec.Stdin = []byte(a.Stdin)
	spec.Network = a.Network && cfg.Network
	spec.Limits.Timeout = timeout
	res, err := cfg.Runner.Run(ctx, spec)
	if err != nil {
		cfg.Logger.Error("exec: sandbox failed", "scope", v.Scope, "err", err)
		if errors.Is(err, sandbox.ErrUnavailable) {
			return "", fmt.Errorf("the sandbox failed, nothing ran: %v", err)
		}
		return "", err
	}
	after := snapshot(v.Work)
	cfg.Logger.Info("exec", "scope", v.Scope, "exit", res.Exit, "limit", string(res.Limit), "took", res.Elapsed.Round(time.Millisecond),
		"stdout_bytes", int64(len(res.Stdout))+res.StdoutDropped, "stderr_bytes", int64(len(res.Stderr))+res.StderrDropped, "network", res.Network, "skill", a.Skill)
	return Format(res, diff(before, after), notes), nil
}

// Format writes a run's result for the model.
func Format(res *sandbox.Result, ch Changes, notes []string) string {
	var b strings.Builder
	if res.Limit != sandbox.LimitNone {
		fmt.Fprintf(&b, "STOPPED: over the %s limit (%s) after %.1f s; output so far is below.\n", res.Limit, res.Detail, res.Elapsed.Seconds())
		if res.Exit >= 0 {
			fmt.Fprintf(&b, "exit status: %d\n", res.Exit)
		}
	} else {
		fmt.Fprintf(&b, "exit status: %d (%.2f s)\n", res.Exit, res.Elapsed.Seconds())
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	stream(&b, "stdout", res.Stdout, res.StdoutDropped)
	stream(&b, "stderr", res.Stderr, res.StderrDropped)
	ch.write(&b)
	return strings.TrimRight(b.String(), "\n")
}

func stream(b *strings.Builder, name string, data []byte, dropped int64) {
	if len(data) == 0 && dropped == 0 {
		return
	}
	s := string(data)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	fmt.Fprintf(b, "%s:\n%s", name, s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteByte('\n')
	}
	if dropped > 0 {
		fmt.Fprintf(b, "[%s cut: %d more bytes not shown; write large output to a file and read parts of it]\n", name, dropped)
	}
}

// entry is what a snapshot keeps of a file.
type entry struct {
	size  int64
	mtime time.Time
	dir   bool
}

// snapshot maps the folder's paths (relative, slash-separated) to their
// size and modification time; nil when the folder holds more than
// maxSnapshot entries (too many to compare). It walks through an os.Root:
// a directory another run swaps for a link meanwhile does not lead it
// out of the folder.
func snapshot(dir string) map[string]entry {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	m := map[string]entry{}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return nil
		}
		if len(m) >= maxSnapshot {
			return fs.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		m[p] = entry{size: fi.Size(), mtime: fi.ModTime(), dir: d.IsDir()}
		return nil
	})
	if err != nil || len(m) >= maxSnapshot {
		return nil
	}
	return m
}

// Changes are the files a run created, changed and deleted.
type Changes struct {
	Created, Changed, Deleted []string
	Unknown                   bool // the folder was too large to compare
	sizes                     map[string]int64
}

func diff(before, after map[string]entry) Changes {
	if before == nil || after == nil {
		return Changes{Unknown: true}
	}
	c := Changes{sizes: map[string]int64{}}
	for p, a := range after {
		if a.dir {
			continue
		}
		c.sizes[p] = a.size
		b, ok := before[p]
		switch {
		case !ok || b.dir:
			c.Created = append(c.Created, p)
		case b.size != a.size || !b.mtime.Equal(a.mtime):
			c.Changed = append(c.Changed, p)
		}
	}
	for p, b := range before {
		if _, ok := after[p]; !ok && !b.dir {
			c.Deleted = append(c.Deleted, p)
		}
	}
	slices.Sort(c.Created)
	slices.Sort(c.Changed)
	slices.Sort(c.Deleted)
	return c
}

func (c Changes) write(b *strings.Builder) {
	if c.Unknown {
		b.WriteString("files: your folder holds too many files to list what changed\n")
		return
	}
	list := func(what string, ps []string, size bool) {
		if len(ps) == 0 {
			return
		}
		fmt.Fprintf(b, "files %s:", what)
		for i, p := range ps {
			if i == maxListed {
				fmt.Fprintf(b, " ... and %d more", len(ps)-maxListed)
				break
			}
			if size {
				fmt.Fprintf(b, " %s (%s)", p, human(c.sizes[p]))
			} else {
				fmt.Fprintf(b, " %s", p)
			}
			if i < len(ps)-1 && i < maxListed-1 {
				b.WriteByte(',')
			}
		}
		b.WriteByte('\n')
	}
	list("created", c.Created, true)
	list("changed", c.Changed, true)
	list("deleted", c.Deleted, false)
}

func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
