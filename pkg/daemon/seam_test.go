package daemon

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"agent/pkg/channel/builtin"
)

// goList runs go list with the build tags of the tests.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-tags", "sqlite_fts5,whisper"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, out)
	}
	return strings.Fields(string(out))
}

// The host knows no channel: none of the channels' packages is under
// pkg/daemon, directly or through another package; the list comes from
// cmd/agent.
func TestDaemonDependsOnNoChannel(t *testing.T) {
	var channels []string
	for _, p := range goList(t, "-f", `{{join .Imports "\n"}}`, "agent/pkg/channel/builtin") {
		if strings.HasPrefix(p, "agent/pkg/channel/") {
			channels = append(channels, p)
		}
	}
	if len(channels) < 3 {
		t.Fatalf("the list of channels imports %v: expected the channels' packages", channels)
	}
	deps := goList(t, "-deps", "agent/pkg/daemon")
	for _, c := range channels {
		if slices.Contains(deps, c) {
			t.Errorf("pkg/daemon depends on the channel package %s", c)
		}
	}
}

// No channel's name appears in the daemon's code: not in an identifier,
// not in a string (the admin socket, "admin", is the daemon's own).
func TestDaemonNamesNoChannel(t *testing.T) {
	var names []string
	for _, b := range builtin.Channels() {
		if b.Name != "admin" && b.Name != "channels" {
			for _, n := range []string{strings.ToLower(b.Name), strings.ReplaceAll(strings.ToLower(b.Name), "_", "")} {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			var text string
			switch n := n.(type) {
			case *ast.Ident:
				text = n.Name
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					text = n.Value
				}
			default:
				return true
			}
			for _, name := range names {
				if strings.Contains(strings.ToLower(text), name) {
					t.Errorf("%s: %q names the %s channel", fset.Position(n.Pos()), text, name)
				}
			}
			return true
		})
	}
}
