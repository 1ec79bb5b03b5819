package document

import (
	"strings"
	"unicode/utf8"
)

// cellText makes s fit in one Markdown table cell: line breaks become
// "<br>", tabs and runs of spaces one space, "|" is escaped, and it is cut
// at max runes with "…".
func cellText(s string, max int) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	var b strings.Builder
	n, space := 0, false
	for _, r := range s {
		if n >= max {
			b.WriteString("…")
			break
		}
		switch r {
		case '\r':
			continue
		case '\n':
			b.WriteString("<br>")
			space = false
			n++
			continue
		case ' ', '\t', '\u00a0', '\f', '\v':
			if !space {
				b.WriteByte(' ')
				space = true
				n++
			}
			continue
		case '|':
			b.WriteString(`\|`)
		default:
			b.WriteRune(r)
		}
		space = false
		n++
	}
	return b.String()
}

// mdRow writes cells (already cellText) as a Markdown table row.
func mdRow(cells []string) string {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cells {
		b.WriteByte(' ')
		b.WriteString(c)
		b.WriteString(" |")
	}
	return b.String()
}

// mdSep is the header separator row of a Markdown table of n columns.
func mdSep(n int) string {
	return "|" + strings.Repeat(" --- |", max(n, 1))
}

// writeTable writes rows as a Markdown table (first row the header) to t,
// padding rows to the widest, with a blank line before and after.
func writeTable(t *textBuf, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	width := 0
	for _, r := range rows {
		width = max(width, len(r))
	}
	if width == 0 {
		return
	}
	t.line("")
	for i, r := range rows {
		for len(r) < width {
			r = append(r, "")
		}
		t.line(mdRow(r))
		if i == 0 {
			t.line(mdSep(width))
		}
	}
	t.line("")
}

// colName is the spreadsheet name of the 0-based column i: A, Z, AA.
func colName(i int) string {
	var b []byte
	for i++; i > 0; i = (i - 1) / 26 {
		b = append([]byte{byte('A' + (i-1)%26)}, b...)
	}
	return string(b)
}

// truncRunes returns s cut to at most n runes.
func truncRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return s[:i]
}
