package main

import (
	"bufio"
	"bytes"
	"maps"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// notLinked are packages agentctl (an admin client, doctor and the config)
// must not link: the daemon and the conversation machinery behind it. A
// path also excludes the packages below it.
var notLinked = []string{
	"agent/pkg/daemon",
	"agent/pkg/assistant",
	"agent/pkg/channel",
}

// TestDoesNotLinkTheDaemon lists agentctl's dependencies (not its tests')
// with the go tool, under the build tags and cgo setting of this test
// binary, and names the import chain to any package of notLinked.
func TestDoesNotLinkTheDaemon(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool to list the dependencies with: %v", err)
	}
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}
	env := os.Environ()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "-tags":
				args = append(args, "-tags", s.Value)
			case "CGO_ENABLED", "GOOS", "GOARCH":
				env = append(env, s.Key+"="+s.Value)
			}
		}
	}
	cmd := exec.Command(goTool, append(args, ".")...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}

	imports := map[string][]string{} // package -> its imports
	root := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		imports[f[0]] = f[1:]
		root = f[0] // -deps lists the named package last
	}
	if root != "agent/cmd/agentctl" {
		t.Fatalf("go list -deps ended with %q, want agent/cmd/agentctl:\n%s", root, out)
	}
	for _, p := range slices.Sorted(maps.Keys(imports)) {
		if slices.ContainsFunc(notLinked, func(n string) bool { return p == n || strings.HasPrefix(p, n+"/") }) {
			t.Errorf("agentctl links %s: %s", p, strings.Join(chain(imports, root, p), " -> "))
		}
	}
}

// chain is a shortest import path from root to p.
func chain(imports map[string][]string, root, p string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == p {
			var out []string
			for ; cur != ""; cur = prev[cur] {
				out = append(out, cur)
			}
			slices.Reverse(out)
			return out
		}
		for _, next := range imports[cur] {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return []string{p}
}
