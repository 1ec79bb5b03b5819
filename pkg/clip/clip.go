// Package clip shortens text for logs, errors, prompts and messages
// without splitting a UTF-8 character: the one place for what several
// packages each did by hand (some cut in the middle of a character).
package clip

import (
	"strings"
	"unicode/utf8"
)

// Bytes returns s cut to at most n bytes on a character boundary.
func Bytes(s string, n int) string {
	if n < 0 {
		n = 0
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// String returns s cut to at most n bytes (on a character boundary) with
// "…" appended when it was cut.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Bytes(s, n) + "…"
}

// Line is String on s with its whitespace runs (newlines included)
// collapsed to single spaces: one line for a log or a report.
func Line(s string, n int) string {
	return String(strings.Join(strings.Fields(s), " "), n)
}
