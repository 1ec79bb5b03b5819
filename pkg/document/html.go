package document

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/simplifiedchinese"
)

// htmlSkipped are elements whose content is not text for a reader:
// scripts, styles, the head, embedded documents and graphics, navigation
// menus and form drop-downs.
var htmlSkipped = map[string]bool{
	"script": true, "style": true, "noscript": true, "template": true, "head": true,
	"title": true, "svg": true, "math": true, "iframe": true, "object": true,
	"embed": true, "canvas": true, "audio": true, "video": true, "nav": true,
	"select": true, "button": true, "datalist": true, "frameset": true, "noembed": true,
	"noframes": true,
}

// htmlVoid are elements without content or end tag.
var htmlVoid = map[string]bool{
	"area": true, "base": true, "br": true, "col": true, "embed": true, "hr": true,
	"img": true, "input": true, "link": true, "meta": true, "param": true,
	"source": true, "track": true, "wbr": true,
}

// htmlBlocks are elements that start and end a line.
var htmlBlocks = map[string]bool{
	"address": true, "article": true, "aside": true, "blockquote": true, "body": true,
	"center": true, "dd": true, "details": true, "dialog": true, "dir": true, "div": true,
	"dl": true, "dt": true, "fieldset": true, "figcaption": true, "figure": true,
	"footer": true, "form": true, "header": true, "hgroup": true, "html": true,
	"legend": true, "main": true, "menu": true, "ol": true, "ul": true, "pre": true,
	"section": true, "summary": true, "caption": true, "option": true, "tbody": true,
	"thead": true, "tfoot": true, "li": true, "p": true,
}

// extractHTML reads an HTML page as text: scripts, styles, the head,
// navigation and hidden elements dropped, block elements on lines of
// their own, headings as "#" lines, list items as "- " or "1. ", data
// tables as Markdown (layout tables as lines), whitespace collapsed
// outside <pre>. The encoding is the byte order mark's, else the
// <meta> charset's, else UTF-8, else GB18030.
func extractHTML(ctx context.Context, data []byte, lim limits) (*Doc, error) {
	if isBinary(data) {
		return nil, errors.New("the file is binary, not HTML")
	}
	text := decodeHTML(data)
	if HTMLShape(text).MaxTagAttrs > MaxTagAttrs {
		return nil, ErrHostileHTML
	}
	z := html.NewTokenizer(strings.NewReader(text))
	z.SetMaxBuf(16 << 20)
	b := budget{left: lim.docRunes}
	w := &htmlWalker{lim: lim, out: b.part(lim)}
	w.blocks = []*htmlBlock{{out: w.out, limit: lim.partRunes}}
	unfinished := false
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() != io.EOF {
				unfinished = true // a token over the buffer limit
			}
			break
		}
		w.token(z, tt)
	}
	for len(w.tables) > 0 {
		w.endTable()
	}
	w.blocks[0].flush()
	return &Doc{Kind: KindHTML, Parts: []Part{w.out.finish("", unfinished)}}, nil
}

// decodeHTML returns the page as UTF-8: by its byte order mark, else its
// <meta charset> or http-equiv Content-Type (a page labelled UTF-8 or a
// Chinese charset that is not valid UTF-8 is read as GB18030), else as
// UTF-8 when valid, else GB18030.
func decodeHTML(data []byte) string { return Decode(data, "", true) }

// Decode returns a body fetched from the web as UTF-8. A byte order mark
// decides first; then charset, the label the server declared (the
// Content-Type charset parameter; "" when none); then, for HTML, the
// page's <meta> declaration; else UTF-8 when the bytes are valid UTF-8,
// else GB18030 (a superset of GBK and GB2312, which Chinese sites serve
// often without saying so). A page labelled UTF-8 or a Chinese charset
// whose bytes are not valid UTF-8 is read as GB18030 too.
func Decode(data []byte, charset string, isHTML bool) string {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) || bytes.HasPrefix(data, []byte("\xff\xfe")) || bytes.HasPrefix(data, []byte("\xfe\xff")) {
		return decodeText(data)
	}
	label := strings.TrimSpace(charset)
	if isHTML && (label == "" || isLatin1(label)) {
		// Servers that default to ISO-8859-1 (Tomcat, old Apache) while
		// the page says GBK are common: a <meta> label then wins.
		if meta := metaCharset(data[:min(len(data), 4096)]); meta != "" {
			label = meta
		}
	}
	if label == "" {
		return decodeText(data)
	}
	enc, err := htmlindex.Get(label)
	if err != nil {
		return decodeText(data)
	}
	switch name, _ := htmlindex.Name(enc); name {
	case "utf-8", "utf-16le", "utf-16be": // UTF-16 without a BOM is a wrong label
		return decodeText(data)
	case "gbk", "gb18030":
		return decodeWith(simplifiedchinese.GB18030, data)
	}
	return decodeWith(enc, data)
}

// indexFold is the byte index of the first match of sub (ASCII) in s,
// ignoring ASCII case, or -1.
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		match := true
		for j := 0; j < len(sub); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

// isLatin1 reports whether label names ISO-8859-1 or windows-1252 (the
// same decoder in the WHATWG encoding standard).
func isLatin1(label string) bool {
	enc, err := htmlindex.Get(label)
	if err != nil {
		return false
	}
	name, _ := htmlindex.Name(enc)
	return name == "windows-1252"
}

// metaCharset returns the charset a page's <meta> declares in head, or "".
func metaCharset(head []byte) string {
	z := html.NewTokenizer(bytes.NewReader(head))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return ""
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		if string(name) != "meta" || !hasAttr {
			continue
		}
		var charset, content string
		equiv := false
		for more := true; more; {
			var k, v []byte
			k, v, more = z.TagAttr()
			switch strings.ToLower(string(k)) {
			case "charset":
				charset = string(v)
			case "http-equiv":
				equiv = strings.EqualFold(string(v), "content-type")
			case "content":
				content = string(v)
			}
		}
		if charset != "" {
			return strings.TrimSpace(charset)
		}
		if equiv {
			// Not strings.ToLower: on invalid UTF-8 it changes lengths,
			// and the index would not fit content.
			if i := indexFold(content, "charset="); i >= 0 {
				cs := strings.Trim(content[i+len("charset="):], ` "';`)
				if j := strings.IndexAny(cs, " ;\"'"); j >= 0 {
					cs = cs[:j]
				}
				return cs
			}
		}
	}
}

// htmlBlock collects a line at a time into out: the page's text, or a
// table cell's.
type htmlBlock struct {
	out    *textBuf
	limit  int // runes of one line
	cur    strings.Builder
	curN   int
	space  bool   // a space is pending before the next word
	prefix string // written before the line's text ("## ", "- ")
}

// text adds text; outside pre, runs of whitespace become one space.
func (b *htmlBlock) text(s string, pre bool) {
	for _, r := range s {
		switch {
		case pre && r == '\n':
			b.flush()
			continue
		case pre && r == '\r':
			continue
		case !pre && unicode.IsSpace(r):
			b.space = b.curN > 0
			continue
		}
		if b.curN >= b.limit {
			b.out.omitted++
			continue
		}
		if b.space {
			b.cur.WriteByte(' ')
			b.curN++
			b.space = false
		}
		b.cur.WriteRune(r)
		b.curN++
	}
}

// flush ends the line, writing it (with its prefix) when it has text; a
// line without text keeps its prefix for the next ("<li><p>x" is "- x").
func (b *htmlBlock) flush() {
	if b.curN == 0 {
		b.space = false
		return
	}
	b.out.line(b.prefix + b.cur.String())
	b.cur.Reset()
	b.curN, b.space, b.prefix = 0, false, ""
}

// blank ends the line and leaves an empty line.
func (b *htmlBlock) blank() {
	b.flush()
	b.out.line("")
}

// htmlTable is a table being read.
type htmlTable struct {
	rows   [][]string // cells' text
	row    []string
	inRow  bool
	cell   *htmlBlock // the open cell
	layout bool       // holds a table or heading: laid out, not data
	total  int        // rows with text, kept or not
	held   int        // bytes of the kept rows' cells
}

// htmlList is an open list.
type htmlList struct {
	ordered bool
	n       int
}

// htmlWalker turns the token stream of a page into text.
type htmlWalker struct {
	lim       limits
	out       *textBuf
	blocks    []*htmlBlock // [0] the page; then open table cells
	tables    []*htmlTable
	lists     []htmlList
	skip      string // the skipped element open, "" for none
	skipDepth int
	pre       int
}

// block returns the innermost block text goes to.
func (w *htmlWalker) block() *htmlBlock { return w.blocks[len(w.blocks)-1] }

// token handles one token.
func (w *htmlWalker) token(z *html.Tokenizer, tt html.TokenType) {
	switch tt {
	case html.TextToken:
		if w.skip == "" {
			w.block().text(string(z.Text()), w.pre > 0)
		}
	case html.StartTagToken, html.SelfClosingTagToken:
		name, hasAttr := z.TagName()
		tag := string(name)
		void := htmlVoid[tag] || tt == html.SelfClosingTagToken
		if w.skip != "" {
			switch {
			case tag == w.skip && !void:
				w.skipDepth++
			case w.skip == "head" && (tag == "body" || htmlBlocks[tag] || tag == "table" || isHeading(tag)):
				w.skip, w.skipDepth = "", 0 // the body began without </head>
				w.start(tag, false)
			}
			return
		}
		if !void && (htmlSkipped[tag] || hasAttr && hidden(z)) {
			w.skip, w.skipDepth = tag, 1
			return
		}
		w.start(tag, void)
	case html.EndTagToken:
		name, _ := z.TagName()
		tag := string(name)
		if w.skip != "" {
			if tag == w.skip {
				if w.skipDepth--; w.skipDepth == 0 {
					w.skip = ""
				}
			}
			return
		}
		w.end(tag)
	}
}

// hidden reports whether the tag's attributes hide it (hidden,
// aria-hidden="true", style display:none).
func hidden(z *html.Tokenizer) bool {
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch string(k) {
		case "hidden":
			return true
		case "aria-hidden":
			if string(v) == "true" {
				return true
			}
		case "style":
			s := strings.ReplaceAll(strings.ToLower(string(v)), " ", "")
			if strings.Contains(s, "display:none") || strings.Contains(s, "visibility:hidden") {
				return true
			}
		}
	}
	return false
}

// isHeading reports whether tag is h1..h6.
func isHeading(tag string) bool {
	return len(tag) == 2 && tag[0] == 'h' && tag[1] >= '1' && tag[1] <= '6'
}

// start handles a start tag.
func (w *htmlWalker) start(tag string, void bool) {
	b := w.block()
	switch {
	case tag == "br":
		if w.pre > 0 {
			b.text("\n", true)
		} else {
			b.flush()
		}
	case tag == "hr":
		b.blank()
	case isHeading(tag):
		b.blank()
		b.prefix = strings.Repeat("#", int(tag[1]-'0')) + " "
		if t := w.table(); t != nil {
			t.layout = true
		}
	case tag == "ul" || tag == "ol" || tag == "menu":
		b.flush()
		if len(w.lists) < 32 {
			w.lists = append(w.lists, htmlList{ordered: tag == "ol"})
		}
	case tag == "li":
		b.flush()
		indent, marker := "", "- "
		if n := len(w.lists); n > 0 {
			indent = strings.Repeat("  ", n-1)
			if l := &w.lists[n-1]; l.ordered {
				l.n++
				marker = strconv.Itoa(l.n) + ". "
			}
		}
		b.prefix = indent + marker
	case tag == "pre":
		b.flush()
		w.pre++
	case tag == "p":
		b.blank()
	case tag == "table":
		b.blank()
		if t := w.table(); t != nil {
			t.layout = true
		}
		if len(w.tables) >= 32 { // deeper tables read as text
			return
		}
		w.tables = append(w.tables, &htmlTable{})
	case tag == "tr":
		if t := w.table(); t != nil {
			w.endRow(t)
			t.inRow = true
		} else {
			b.flush()
		}
	case tag == "td" || tag == "th":
		t := w.table()
		if t == nil {
			b.flush()
			return
		}
		w.endCell(t)
		t.inRow = true
		t.cell = &htmlBlock{out: &textBuf{limit: w.lim.cellRunes + 1}, limit: w.lim.cellRunes + 1}
		w.blocks = append(w.blocks, t.cell)
	case htmlBlocks[tag]:
		b.flush()
	}
}

// end handles an end tag.
func (w *htmlWalker) end(tag string) {
	b := w.block()
	switch {
	case isHeading(tag):
		b.blank()
	case tag == "ul" || tag == "ol" || tag == "menu":
		b.flush()
		if len(w.lists) > 0 {
			w.lists = w.lists[:len(w.lists)-1]
		}
	case tag == "pre":
		b.flush()
		w.pre = max(0, w.pre-1)
	case tag == "p":
		b.blank()
	case tag == "td" || tag == "th":
		if t := w.table(); t != nil {
			w.endCell(t)
		}
	case tag == "tr":
		if t := w.table(); t != nil {
			w.endRow(t)
		}
	case tag == "table":
		if len(w.tables) > 0 {
			w.endTable()
		}
	case htmlBlocks[tag]:
		b.flush()
	}
}

// table returns the innermost open table, or nil.
func (w *htmlWalker) table() *htmlTable {
	if len(w.tables) == 0 {
		return nil
	}
	return w.tables[len(w.tables)-1]
}

// endCell closes t's open cell, if any.
func (w *htmlWalker) endCell(t *htmlTable) {
	if t.cell == nil {
		return
	}
	t.cell.flush()
	for len(w.blocks) > 1 && w.blocks[len(w.blocks)-1] != t.cell {
		w.blocks = w.blocks[:len(w.blocks)-1]
	}
	if len(w.blocks) > 1 {
		w.blocks = w.blocks[:len(w.blocks)-1]
	}
	if len(t.row) < w.lim.cols {
		t.row = append(t.row, t.cell.out.text())
	}
	t.cell = nil
}

// endRow closes t's open row, if any, keeping it when it has text.
func (w *htmlWalker) endRow(t *htmlTable) {
	w.endCell(t)
	if !t.inRow {
		return
	}
	t.inRow = false
	for _, c := range t.row {
		if c != "" {
			t.total++
			if len(t.rows) < w.lim.rows && t.held <= w.lim.partRunes {
				t.rows = append(t.rows, t.row)
				for _, c := range t.row {
					t.held += len(c)
				}
			}
			break
		}
	}
	t.row = nil
}

// endTable closes the innermost table and writes it to the block around
// it: as Markdown when it is a data table of two or more columns, else
// as lines.
func (w *htmlWalker) endTable() {
	t := w.table()
	w.endRow(t)
	w.tables = w.tables[:len(w.tables)-1]
	b := w.block()
	b.flush()
	width := 0
	for _, r := range t.rows {
		width = max(width, len(r))
	}
	if width >= 2 && !t.layout {
		rows := make([][]string, len(t.rows))
		for i, r := range t.rows {
			rows[i] = make([]string, len(r))
			for j, c := range r {
				rows[i][j] = cellText(c, w.lim.cellRunes)
			}
		}
		writeTable(b.out, rows)
	} else {
		for _, r := range t.rows {
			for _, c := range r {
				for l := range strings.SplitSeq(c, "\n") {
					b.out.line(l)
				}
			}
		}
		b.out.line("")
	}
	if t.total > len(t.rows) {
		b.out.line("(table: showing the first " + thousands(len(t.rows)) + " of " + thousands(t.total) + " rows)")
	}
}
