package document

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/unicode"
)

// decodeText returns data as UTF-8: without a UTF-8 byte order mark,
// decoded from UTF-16 when it starts with a UTF-16 byte order mark, and
// decoded as GB18030 (a superset of GBK and GB2312) when it is not valid
// UTF-8. The result is valid UTF-8.
func decodeText(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\xef\xbb\xbf")):
		data = data[3:]
	case bytes.HasPrefix(data, []byte("\xff\xfe")):
		return decodeWith(unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM), data)
	case bytes.HasPrefix(data, []byte("\xfe\xff")):
		return decodeWith(unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM), data)
	}
	if utf8.Valid(data) {
		return string(data)
	}
	return decodeWith(simplifiedchinese.GB18030, data)
}

// decodeWith decodes data with enc; what cannot be decoded becomes U+FFFD.
func decodeWith(enc encoding.Encoding, data []byte) string {
	out, err := enc.NewDecoder().Bytes(data)
	if err != nil {
		return strings.ToValidUTF8(string(data), "\uFFFD")
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
}

// isBinary reports whether data (not UTF-16) holds NUL bytes in its first
// 8 KiB: a binary file, not text.
func isBinary(data []byte) bool {
	if bytes.HasPrefix(data, []byte("\xff\xfe")) || bytes.HasPrefix(data, []byte("\xfe\xff")) {
		return false
	}
	return bytes.IndexByte(data[:min(len(data), 8<<10)], 0) >= 0
}

// extractText reads Markdown or plain text as it is: decoded to UTF-8,
// line ends made "\n", one flat Part.
func extractText(kind string, data []byte, lim limits) (*Doc, error) {
	if isBinary(data) {
		return nil, errors.New("the file is binary, not text; read_document reads " + Supported)
	}
	s := decodeText(data)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	b := budget{left: lim.docRunes}
	t := b.part(lim)
	t.write(s)
	p := t.finish("", false)
	return &Doc{Kind: kind, Parts: []Part{p}}, nil
}

// maxCountedRows bounds the rows of a CSV file read only to be counted.
const maxCountedRows = 1 << 20

// extractCSV reads CSV or TSV (the delimiter guessed from the first line:
// tab, semicolon or comma) as a Markdown table, the first row the header,
// at most lim.rows rows and lim.cols columns with a notice of the rest.
// Quotes are read leniently and rows may differ in length.
func extractCSV(ctx context.Context, data []byte, lim limits) (*Doc, error) {
	if isBinary(data) {
		return nil, errors.New("the file is binary, not CSV text")
	}
	s := decodeText(data)
	r := csv.NewReader(strings.NewReader(s))
	r.Comma = sniffDelimiter(s)
	r.LazyQuotes = true
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	var (
		rows    [][]string
		total   int
		held    int  // bytes of the rows' cells
		more    bool // rows past maxCountedRows, not counted
		colsCut bool
		note    string
	)
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil { // rare: quotes are read leniently
			if len(rows) == 0 {
				return nil, errors.New("not CSV: " + err.Error())
			}
			note = "(the rest could not be read: " + err.Error() + ")"
			break
		}
		empty := true
		for _, f := range rec {
			if strings.TrimSpace(f) != "" {
				empty = false
				break
			}
		}
		if empty {
			continue
		}
		total++
		if total >= maxCountedRows {
			more = true
			break
		}
		if len(rows) >= lim.rows || held > lim.partRunes {
			continue // counted only: more than the part can show
		}
		if len(rec) > lim.cols {
			rec, colsCut = rec[:lim.cols], true
		}
		row := make([]string, len(rec))
		for i, f := range rec {
			row[i] = cellText(f, lim.cellRunes)
			held += len(row[i])
		}
		rows = append(rows, row)
	}
	b := budget{left: lim.docRunes}
	t := b.part(lim)
	if len(rows) == 0 {
		t.line("(no rows)")
	}
	writeTable(t, rows)
	switch {
	case more:
		t.line("(showing the first " + thousands(len(rows)) + " of more than " + thousands(total) + " rows)")
	case total > len(rows):
		t.line("(showing the first " + thousands(len(rows)) + " of " + thousands(total) + " rows)")
	}
	if colsCut {
		t.line("(columns after " + thousands(lim.cols) + " are not shown)")
	}
	if note != "" {
		t.line(note)
	}
	return &Doc{Kind: KindCSV, Parts: []Part{t.finish("", false)}}, nil
}

// sniffDelimiter picks the field delimiter of CSV text from its first
// line, outside quotes: the most frequent of tab, semicolon and comma
// (comma when none occurs).
func sniffDelimiter(s string) rune {
	line, _, _ := strings.Cut(s[:min(len(s), 64<<10)], "\n")
	counts := map[rune]int{}
	quoted := false
	for _, c := range line {
		switch c {
		case '"':
			quoted = !quoted
		case '\t', ';', ',':
			if !quoted {
				counts[c]++
			}
		}
	}
	best := ','
	for _, c := range []rune{'\t', ';'} {
		if counts[c] > counts[best] {
			best = c
		}
	}
	return best
}
