package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

type mod = struct{ Path string }

// fixture: app -> mid -> low -> leaf, app -> leaf, mid -> fmt, low -> x.org/y/z
// (module x.org/y), plus a lone package.
func fixture() []listed {
	proj, third := &mod{"ex"}, &mod{"x.org/y"}
	return []listed{
		{ImportPath: "fmt", Standard: true},
		{ImportPath: "x.org/y/z", Module: third, DepOnly: true},
		{ImportPath: "ex/leaf", Module: proj},
		{ImportPath: "ex/lone", Module: proj, Imports: []string{"fmt"}},
		{ImportPath: "ex/low", Module: proj, Imports: []string{"ex/leaf", "x.org/y/z"}},
		{ImportPath: "ex/mid", Module: proj, Imports: []string{"ex/low", "fmt"}},
		{ImportPath: "ex/app", Module: proj, Imports: []string{"ex/leaf", "ex/mid"}},
	}
}

func TestFloorsCountTheLongestWayDown(t *testing.T) {
	g := newGraph(fixture())
	for p, want := range map[string]int{"ex/leaf": 1, "ex/lone": 1, "ex/low": 2, "ex/mid": 3, "ex/app": 4} {
		if got := g.floor[p]; got != want {
			t.Errorf("floor[%s] = %d, want %d", p, got, want)
		}
	}
	got := longestChain(g.project, g.floor, g.next)
	if want := []string{"ex/app", "ex/mid", "ex/low", "ex/leaf"}; !slices.Equal(got, want) {
		t.Errorf("longest chain = %v, want %v", got, want)
	}
}

func TestReportCountsOnlyProjectPackagesAndEdges(t *testing.T) {
	var b bytes.Buffer
	g := newGraph(fixture())
	g.report(&b, false)
	if err := g.reportUnder(&b, "ex/mid"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"module ex\n", "packages: 5\n", "internal import edges: 4\n",
		"longest chain: 4 packages\n", "floors: 4 ", "  floor 1: 2\n",
		"under ex/mid (floor 3):\n  project packages: 2\n    ex/leaf\n    ex/low\n  third-party modules: 1\n    x.org/y\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if err := g.reportUnder(&b, "ex/none"); err == nil {
		t.Error("reportUnder of an unknown package: no error")
	}
}
