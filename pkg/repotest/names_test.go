package repotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// reviewName matches a name that says when a test was written (the review
// that found it: "TestReview22...", "review19Next", "BenchmarkReview21b")
// instead of what it checks.
var reviewName = regexp.MustCompile(`(?i)review_?\d`)

// skipDirs are folders with no source of this module in them.
var skipDirs = map[string]bool{"node_modules": true, "dist": true, "bin": true, "models": true, "testdata": true}

// TestTestsAreNamedForWhatTheyCheck walks the module and fails on a test
// file whose name contains "review", or a function or type in a test
// file whose name carries a review number (TestReview22..., review19Next):
// tests are named for the behaviour they pin.
func TestTestsAreNamedForWhatTheyCheck(t *testing.T) {
	root := moduleRoot(t)
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		n++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, p := range problems(rel, src) {
			t.Error(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no test file under %s: the walk looked in the wrong place", root)
	}
}

// problems lists what in the test file at path (relative to the module)
// is named for a review rather than for a behaviour.
func problems(path string, src []byte) []string {
	var out []string
	if strings.Contains(strings.ToLower(filepath.Base(path)), "review") {
		out = append(out, path+": a test file named for a review; name it for what its tests check")
	}
	f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.SkipObjectResolution)
	if err != nil {
		return append(out, path+": "+err.Error())
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && reviewName.MatchString(d.Name.Name) {
				out = append(out, path+": func "+d.Name.Name+" is named for a review; name it for what it checks")
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && reviewName.MatchString(ts.Name.Name) {
					out = append(out, path+": type "+ts.Name.Name+" is named for a review; name it for what it does")
				}
			}
		}
	}
	return out
}

// moduleRoot is the folder of go.mod at or above the test's working
// directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod at or above the test's working directory")
		}
		dir = parent
	}
}

func TestProblemsFindsReviewNames(t *testing.T) {
	for _, tc := range []struct {
		path, src string
		want      int
	}{
		{"pkg/a/fleet_test.go", "package a\nfunc TestMoveKeepsHeldTurns(t *testing.T) {}\nfunc TestAttackReviewedCodeCanHideLines(t *testing.T) {}\n", 0},
		{"pkg/a/fleet_review24_attack_test.go", "package a\n", 1},
		{"pkg/a/Review_test.go", "package a\n", 1},
		{"pkg/a/a_test.go", "package a\nfunc Test" + "Review2BotFlood(t *testing.T) {}\n", 1},
		{"pkg/a/a_test.go", "package a\nfunc Benchmark" + "Review21bCache(b *testing.B) {}\nfunc Fuzz" + "Review3(f *testing.F) {}\n", 2},
		{"pkg/a/a_test.go", "package a\ntype review19Next struct{}\nfunc review26SessionAlive() bool { return true }\n", 2},
		{"pkg/a/a_test.go", "package a\nfunc (review19Next) TestReview1() {}\n", 0},
	} {
		if got := problems(tc.path, []byte(tc.src)); len(got) != tc.want {
			t.Errorf("problems(%s, %q) = %q, want %d", tc.path, tc.src, got, tc.want)
		}
	}
}
