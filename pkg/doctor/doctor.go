// Package doctor diagnoses an installation from the outside: it needs no
// running daemon, changes nothing, and bounds every probe in time. Each check
// yields one line: `ok|warn|fail  NAME  detail  fix: command`.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Level of a finding.
type Level string

const (
	OK   Level = "ok"
	Warn Level = "warn"
	Fail Level = "fail"
)

// Result is one check's finding.
type Result struct {
	Level  Level  `json:"level"`
	Name   string `json:"name"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Check is one diagnosis. It must honour ctx.
type Check struct {
	Name string
	Run  func(ctx context.Context) Result
}

// Run executes the checks in order, each with at most timeout, and never
// lets one hang or panic take the others down.
func Run(ctx context.Context, checks []Check, timeout time.Duration) []Result {
	out := make([]Result, 0, len(checks))
	for _, c := range checks {
		out = append(out, runOne(ctx, c, timeout))
	}
	return out
}

func runOne(ctx context.Context, c Check, timeout time.Duration) Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- Result{Level: Fail, Detail: fmt.Sprintf("check crashed: %v", p)}
			}
		}()
		done <- c.Run(ctx)
	}()
	var r Result
	select {
	case r = <-done:
	case <-ctx.Done():
		r = Result{Level: Fail, Detail: fmt.Sprintf("no answer within %s", timeout)}
	}
	r.Name = c.Name
	return r
}

// Failed reports whether any result is a failure.
func Failed(rs []Result) bool {
	for _, r := range rs {
		if r.Level == Fail {
			return true
		}
	}
	return false
}

// WriteText prints one aligned line per result.
func WriteText(w io.Writer, rs []Result) error {
	width := 0
	for _, r := range rs {
		width = max(width, len(r.Name))
	}
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%-4s  %-*s  %s", r.Level, width, r.Name, oneLine(r.Detail))
		if r.Fix != "" {
			fmt.Fprintf(&b, "  fix: %s", oneLine(r.Fix))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON prints {"ok":bool,"checks":[...]}.
func WriteJSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		OK     bool     `json:"ok"`
		Checks []Result `json:"checks"`
	}{!Failed(rs), rs})
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// Summary counts results by level, e.g. "9 ok, 1 warn, 0 fail".
func Summary(rs []Result) string {
	n := map[Level]int{}
	for _, r := range rs {
		n[r.Level]++
	}
	keys := []Level{OK, Warn, Fail}
	parts := make([]string, 0, 3)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(parts, ", ")
}
