// Package textsplit cuts a message into chunks a channel accepts: at most
// a number of bytes each, valid UTF-8, cut where a reader expects a break
// (a paragraph, a line, a sentence, a word) rather than mid-word.
package textsplit

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// sentenceEnds are the sentence breaks Split prefers after line breaks.
var sentenceEnds = [...]string{". ", "! ", "? ", "。", "！", "？"}

// Split cuts text into chunks of at most maxBytes bytes for sending. It cuts at
// the last paragraph break ("\n\n") in a chunk, else the last line break,
// else the last sentence end (". ", "! ", "? ", "。", "！", "？"), else the
// last space, else at a rune boundary; a break is used only if it keeps at
// least a quarter of the chunk, so a short paragraph does not waste a
// message. Whitespace around cuts is dropped, CRLF becomes LF, invalid UTF-8
// becomes U+FFFD, and no chunk is empty; everything else is kept in order.
// A maxBytes below utf8.UTFMax is raised to it so every rune fits.
func Split(text string, maxBytes int) []string {
	maxBytes = max(maxBytes, utf8.UTFMax)
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	rest := strings.TrimRightFunc(strings.TrimLeft(text, "\r\n"), unicode.IsSpace)
	var out []string
	for len(rest) > maxBytes {
		p := cut(rest, maxBytes)
		if chunk := strings.TrimRightFunc(rest[:p], unicode.IsSpace); chunk != "" {
			out = append(out, chunk)
		}
		rest = strings.TrimLeft(rest[p:], "\r\n")
	}
	if rest != "" {
		out = append(out, rest)
	}
	return out
}

// cut returns where to end the next chunk of s (len(s) > maxBytes, s
// valid UTF-8): 0 < cut <= maxBytes, on a rune boundary.
func cut(s string, maxBytes int) int {
	limit := maxBytes
	for limit > 0 && !utf8.RuneStart(s[limit]) {
		limit--
	}
	w := s[:limit]
	floor := limit / 4
	if i := strings.LastIndex(w, "\n\n"); i+2 > floor && i >= 0 {
		return i + 2
	}
	if i := strings.LastIndexByte(w, '\n'); i+1 > floor && i >= 0 {
		return i + 1
	}
	best := -1
	for _, sep := range sentenceEnds {
		if i := strings.LastIndex(w, sep); i >= 0 && i+len(sep) > best {
			best = i + len(sep)
		}
	}
	if best > floor {
		return best
	}
	if i := strings.LastIndexAny(w, " \t"); i+1 > floor && i >= 0 {
		return i + 1
	}
	return limit
}
