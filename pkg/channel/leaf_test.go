package channel

import (
	"os/exec"
	"strings"
	"testing"
)

// The seam stays a leaf: pkg/channel and pkg/turn build on the standard
// library and pkg/turn only, whatever a channel or the pipeline needs.
func TestSeamImportsOnlyTheStandardLibraryAndTurn(t *testing.T) {
	for _, pkg := range []string{"agent/pkg/channel", "agent/pkg/turn"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep != pkg && dep != "agent/pkg/turn" {
				t.Errorf("%s depends on %s: the seam may use the standard library and agent/pkg/turn only", pkg, dep)
			}
		}
	}
}
