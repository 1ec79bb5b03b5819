package config

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Problem is one reason a configuration is invalid.
type Problem struct {
	Key    string // dotted key, e.g. "llm.timeout" or "agent.owners[1]"; "" for a syntax error
	Reason string
	Line   int // 1-based line in the file; 0 when unknown
}

// Error is returned (as *Error) by Load and Parse for any configuration that
// cannot be used: missing or unreadable file, bad syntax, wrong types, invalid
// values. It always holds at least one Problem.
type Error struct {
	File     string
	Problems []Problem

	err error // underlying cause (e.g. fs.ErrNotExist), for errors.Is
}

// Error lists every problem, one per line, as "<file>:<line>: <key>: <reason>"
// (the line is omitted when unknown, the key when there is none).
func (e *Error) Error() string {
	if len(e.Problems) == 0 {
		return format(e.File, 0, "", "invalid configuration")
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = format(e.File, p.Line, p.Key, p.Reason)
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the underlying cause, if any (fs.ErrNotExist for a missing
// file, fs.ErrPermission for an unreadable one).
func (e *Error) Unwrap() error { return e.err }

// Warning is something worth telling the operator that does not stop the
// daemon: an unknown key, a deprecated key, an unset environment variable.
type Warning struct {
	File    string
	Key     string
	Message string
	Line    int // 1-based; 0 when unknown
}

// String formats the warning like a Problem: "<file>:<line>: <key>: <message>".
func (w Warning) String() string {
	return format(w.File, w.Line, w.Key, w.Message)
}

func format(file string, line int, key, reason string) string {
	var b strings.Builder
	if file != "" {
		b.WriteString(file)
		if line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(line))
		}
		b.WriteString(": ")
	} else if line > 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(line))
		b.WriteString(": ")
	}
	if key != "" {
		b.WriteString(key)
		b.WriteString(": ")
	}
	b.WriteString(reason)
	return b.String()
}

// byPosition orders findings as they appear in the file; those without a
// line come last. The sort is stable, so equal lines keep discovery order.
func byPosition(aLine, bLine int) int {
	switch {
	case aLine == bLine:
		return 0
	case aLine == 0:
		return 1
	case bLine == 0:
		return -1
	}
	return cmp.Compare(aLine, bLine)
}

func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int { return byPosition(a.Line, b.Line) })
}

func sortWarnings(ws []Warning) {
	slices.SortStableFunc(ws, func(a, b Warning) int { return byPosition(a.Line, b.Line) })
}
