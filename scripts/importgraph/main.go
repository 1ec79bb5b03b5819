// Command importgraph measures the project's import graph: how many
// packages, how many project-internal import edges, the longest import chain
// and the floors it stands on (floor 1: a package that imports no project
// package; floor n: one above the highest floor it imports). Only non-test
// imports count, and only packages of the main module. With -pkg it also
// lists what stands under one package: the project packages and the
// third-party modules it pulls in, transitively.
//
//	go run ./scripts/importgraph [-dir DIR] [-tags TAGS] [-pkg agent/pkg/llm] [-floors] [PATTERN ...]
//
// PATTERN defaults to ./... ; -tags defaults to the Makefile's build tags.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "importgraph:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("importgraph", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".", "module directory to run go list in")
	tags := fs.String("tags", "sqlite_fts5,whisper", "build tags (the Makefile's)")
	pkg := fs.String("pkg", "", "also list the project packages and third-party modules under this package")
	floors := fs.Bool("floors", false, "also list every package by floor")
	if err := fs.Parse(args); err != nil {
		return err
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	pkgs, err := goList(*dir, *tags, patterns)
	if err != nil {
		return err
	}
	g := newGraph(pkgs)
	g.report(stdout, *floors)
	if *pkg != "" {
		return g.reportUnder(stdout, *pkg)
	}
	return nil
}

// listed is the part of `go list -json` this tool reads.
type listed struct {
	ImportPath string
	Standard   bool
	Imports    []string
	DepOnly    bool
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// goList lists the packages matched by patterns and everything they import
// (non-test imports only: -test is not given).
func goList(dir, tags string, patterns []string) ([]listed, error) {
	args := []string{"list", "-e", "-deps", "-json=ImportPath,Standard,Imports,DepOnly,Module,Error"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, patterns...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: decode: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// graph is the import graph of every listed package; project marks the main
// module's packages matched by the patterns.
type graph struct {
	module  string
	imports map[string][]string // every listed package -> its imports
	modOf   map[string]string   // non-standard package -> its module ("" if none)
	project []string            // sorted
	isProj  map[string]bool
	floor   map[string]int
	next    map[string]string // a project import on the package's longest chain down
}

func newGraph(pkgs []listed) *graph {
	g := &graph{imports: map[string][]string{}, modOf: map[string]string{}, isProj: map[string]bool{}}
	for _, p := range pkgs {
		if !p.DepOnly && p.Module != nil && g.module == "" {
			g.module = p.Module.Path
		}
	}
	for _, p := range pkgs {
		g.imports[p.ImportPath] = p.Imports
		if p.Standard {
			continue
		}
		if p.Module != nil {
			g.modOf[p.ImportPath] = p.Module.Path
		}
		if p.Module != nil && p.Module.Path == g.module && !p.DepOnly {
			g.project = append(g.project, p.ImportPath)
			g.isProj[p.ImportPath] = true
		}
	}
	sort.Strings(g.project)
	g.floor, g.next = floors(g.project, g.projectImports)
	return g
}

// projectImports is the sorted project packages p imports directly.
func (g *graph) projectImports(p string) []string {
	var out []string
	for _, q := range g.imports[p] {
		if g.isProj[q] {
			out = append(out, q)
		}
	}
	sort.Strings(out)
	return out
}

// floors gives each node its floor (1 + the highest floor among what it
// imports; 1 for a node importing none) and, for a node above floor 1, the
// import its longest chain goes through (the first in imports order among
// those on the highest floor). Go forbids import cycles, so the graph is a DAG.
func floors(nodes []string, imports func(string) []string) (floor map[string]int, next map[string]string) {
	floor, next = map[string]int{}, map[string]string{}
	var visit func(string) int
	visit = func(n string) int {
		if f, ok := floor[n]; ok {
			return f
		}
		floor[n] = 0 // in progress; a cycle (impossible in Go) would read 0
		f := 1
		for _, m := range imports(n) {
			if mf := visit(m) + 1; mf > f {
				f, next[n] = mf, m
			}
		}
		floor[n] = f
		return f
	}
	for _, n := range nodes {
		visit(n)
	}
	return floor, next
}

// longestChain is the chain from the first node (in nodes order) on the top
// floor down to floor 1.
func longestChain(nodes []string, floor map[string]int, next map[string]string) []string {
	top := ""
	for _, n := range nodes {
		if top == "" || floor[n] > floor[top] {
			top = n
		}
	}
	var chain []string
	for n := top; n != ""; n = next[n] {
		chain = append(chain, n)
	}
	return chain
}

func (g *graph) report(w io.Writer, byFloor bool) {
	edges := 0
	for _, p := range g.project {
		edges += len(g.projectImports(p))
	}
	chain := longestChain(g.project, g.floor, g.next)
	fmt.Fprintf(w, "module %s\n", g.module)
	fmt.Fprintf(w, "packages: %d\n", len(g.project))
	fmt.Fprintf(w, "internal import edges: %d\n", edges)
	fmt.Fprintf(w, "longest chain: %d packages\n", len(chain))
	for i, p := range chain {
		fmt.Fprintf(w, "  %s%s\n", strings.Repeat("  ", i), p)
	}
	levels := map[int][]string{}
	for _, p := range g.project {
		levels[g.floor[p]] = append(levels[g.floor[p]], p)
	}
	fmt.Fprintf(w, "floors: %d (packages on each)\n", len(levels))
	for f := 1; f <= len(levels); f++ {
		if byFloor {
			fmt.Fprintf(w, "  floor %d (%d): %s\n", f, len(levels[f]), strings.Join(levels[f], " "))
		} else {
			fmt.Fprintf(w, "  floor %d: %d\n", f, len(levels[f]))
		}
	}
}

// reportUnder lists the project packages and third-party modules pkg
// imports, transitively (pkg itself not counted).
func (g *graph) reportUnder(w io.Writer, pkg string) error {
	if _, ok := g.imports[pkg]; !ok {
		return fmt.Errorf("%s: not among the listed packages", pkg)
	}
	seen := map[string]bool{pkg: true}
	stack := []string{pkg}
	var proj []string
	mods := map[string]bool{}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, q := range g.imports[p] {
			if seen[q] || q == "C" {
				continue
			}
			seen[q] = true
			stack = append(stack, q)
			switch m, ok := g.modOf[q]; {
			case g.isProj[q] || (ok && m == g.module):
				proj = append(proj, q)
			case ok && m != "":
				mods[m] = true
			}
		}
	}
	sort.Strings(proj)
	var modList []string
	for m := range mods {
		modList = append(modList, m)
	}
	sort.Strings(modList)
	fmt.Fprintf(w, "under %s (floor %d):\n", pkg, g.floor[pkg])
	fmt.Fprintf(w, "  project packages: %d\n", len(proj))
	for _, p := range proj {
		fmt.Fprintf(w, "    %s\n", p)
	}
	fmt.Fprintf(w, "  third-party modules: %d\n", len(modList))
	for _, m := range modList {
		fmt.Fprintf(w, "    %s\n", m)
	}
	return nil
}
