package customtool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"agent/pkg/clip"
	"agent/pkg/sandbox"
	"agent/pkg/tools"
	"agent/pkg/workspace"
)

// Runner runs sandboxed commands (*sandbox.Sandbox).
type Runner interface {
	Run(ctx context.Context, spec sandbox.Spec) (*sandbox.Result, error)
}

// Spaces is what a call needs of the workspace (*workspace.Spaces).
type Spaces interface {
	View(call tools.Call) (workspace.View, error)
}

// pyMain runs a Python tool: the code is argv[1], the tool's name argv[2],
// the arguments a JSON object on stdin. The code runs as a module named
// after the tool with the arguments in the global "args"; when it defines
// a function of the tool's name, that is called with the arguments as
// keyword arguments and what it returns is the result (a string as it is,
// anything else as JSON). What the code prints is part of the result.
const pyMain = `import json, sys
def _main():
    src, name = sys.argv[1], sys.argv[2]
    raw = sys.stdin.read()
    args = json.loads(raw) if raw.strip() else {}
    g = {"__name__": "tool_" + name, "__builtins__": __builtins__, "args": args}
    exec(compile(src, name + ".py", "exec"), g)
    f = g.get(name)
    if callable(f):
        r = f(**args)
        if r is not None:
            if not isinstance(r, str):
                r = json.dumps(r, ensure_ascii=False, default=str)
            sys.stdout.write(r)
_main()
`

// maxArgs bounds the arguments of one call (stdin).
const maxArgs = 256 << 10

// maxEnvArg bounds one ARG_ variable; longer values are only on stdin.
const maxEnvArg = 4 << 10

// spec builds the sandbox run of ver called with args by the caller whose
// view v is: the caller's folder at /work (their own files, as exec sees
// them), shared/ read-only, the arguments on stdin and, for top-level
// strings, numbers and booleans, as ARG_<name> variables.
func spec(name string, ver Version, v workspace.View, args json.RawMessage) sandbox.Spec {
	var argv []string
	switch ver.Language {
	case LangShell:
		argv = []string{"/bin/sh", "-c", ver.Code, name}
	default:
		argv = []string{"python3", "-I", "-c", pyMain, ver.Code, name}
	}
	sp := v.Spec(argv...)
	sp.Stdin = args
	sp.Network = ver.Network
	sp.Env = argEnv(args)
	return sp
}

// argEnv turns the top-level scalars of args into ARG_<name> variables
// (sorted; values with NUL or over 4 KiB left out: they are on stdin).
func argEnv(args json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if propRE.MatchString(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var env []string
	for _, k := range keys {
		raw := m[k]
		var val string
		var s string
		var f float64
		var b bool
		switch {
		case json.Unmarshal(raw, &s) == nil:
			val = s
		case json.Unmarshal(raw, &f) == nil:
			val = strings.TrimSpace(string(raw))
		case json.Unmarshal(raw, &b) == nil:
			val = strconv.FormatBool(b)
		default:
			continue
		}
		if len(val) > maxEnvArg || strings.IndexByte(val, 0) >= 0 {
			continue
		}
		env = append(env, "ARG_"+k+"="+val)
	}
	return env
}

// checkArgs checks the call's arguments against the schema's top level:
// an object, at most 256 KiB, with every required property.
func checkArgs(name string, ver Version, args json.RawMessage) error {
	if len(args) > maxArgs {
		return fmt.Errorf("%w for tool %q: %d bytes of arguments; at most %d (put large data in a file)", tools.ErrBadArgs, name, len(args), maxArgs)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(args, &got); err != nil {
		return fmt.Errorf("%w for tool %q: %v", tools.ErrBadArgs, name, err)
	}
	var schema struct {
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(ver.Parameters, &schema)
	var missing []string
	for _, r := range schema.Required {
		if _, ok := got[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w for tool %q: missing %s", tools.ErrBadArgs, name, strings.Join(missing, ", "))
	}
	return nil
}

// ErrFailed is wrapped when a tool's code failed: a non-zero exit or a
// limit (time, memory, output...).
var ErrFailed = errors.New("custom tool failed")

// result turns a run into the tool's answer: stdout when it exited 0,
// else an error with the exit status or the limit and the end of stderr.
func result(name string, res *sandbox.Result) (string, error) {
	tail := func() string {
		s := strings.TrimSpace(valid(res.Stderr))
		if len(s) > 2000 {
			s = "..." + s[len(s)-2000:]
			s = strings.ToValidUTF8(s, "")
		}
		if s == "" {
			return ""
		}
		return "\nstderr:\n" + s
	}
	if res.Limit != sandbox.LimitNone {
		return "", fmt.Errorf("%w: %s was stopped: over the %s limit (%s) after %.1f s%s", ErrFailed, name, res.Limit, res.Detail, res.Elapsed.Seconds(), tail())
	}
	if res.Exit != 0 {
		out := ""
		if s := strings.TrimSpace(valid(res.Stdout)); s != "" {
			out = "\nstdout:\n" + clip.Bytes(s, 1000)
		}
		return "", fmt.Errorf("%w: %s exited with status %d%s%s", ErrFailed, name, res.Exit, tail(), out)
	}
	out := valid(res.Stdout)
	if strings.TrimSpace(out) == "" {
		return "(the tool printed nothing)", nil
	}
	return out, nil
}

func valid(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
