package document

import (
	"context"
	"encoding/xml"
	"io"
	"path"
	"strconv"
	"strings"
)

// extractDOCX reads word/document.xml (the main part the package names):
// one line per paragraph, headings as "#" lines, list items as "- ",
// tables as Markdown. Headers, footers, footnotes, comments and images
// are not read.
func extractDOCX(ctx context.Context, data []byte, lim limits) (*Doc, error) {
	const what = "a Word document (.docx)"
	a, main, rels, err := openPackage(ctx, data, lim, what, "word/document.xml", "document")
	if err != nil {
		return nil, err
	}
	stylesName := relByType(rels, "/styles")
	if stylesName == "" {
		stylesName = path.Dir(main) + "/styles.xml"
	}
	numberingName := relByType(rels, "/numbering")
	if numberingName == "" {
		numberingName = path.Dir(main) + "/numbering.xml"
	}
	b := budget{left: lim.docRunes}
	w := &docxWalker{
		out:      b.part(lim),
		headings: docxHeadings(a, stylesName),
		lists:    docxNumbering(a, numberingName),
		counters: map[string]*[9]int{},
		lim:      lim,
	}
	x, err := a.xml(main, lim.entryBytes)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	unfinished, err := w.run(x)
	if err != nil {
		return nil, err
	}
	return &Doc{Kind: KindDOCX, Parts: []Part{w.out.finish("", unfinished)}}, nil
}

// docxWalker turns the token stream of a document part into text.
type docxWalker struct {
	out      *textBuf
	headings map[string]int           // paragraph style id -> heading level
	lists    map[string]*[9]docxLevel // list (numId) -> its levels
	counters map[string]*[9]int       // list -> last number given per level
	lim      limits

	paras  []*docxPara  // open paragraphs (text boxes nest them)
	tables []*docxTable // open tables (tables nest in cells)
	inRun  int          // depth of w:r
	inText int          // depth of w:t
	inPPr  int          // depth of w:pPr
}

// docxPara is a paragraph being read.
type docxPara struct {
	text    *textBuf
	heading int // 1..6, 0 for none
	list    bool
	numID   string // the list, when list
	level   int    // list nesting
}

// docxLevel is one level of a numbered or bulleted list.
type docxLevel struct {
	ordered bool // numbered ("1."), not bullets
	start   int
}

// docxTable is a table being read.
type docxTable struct {
	rows int      // rows written so far
	row  []string // cells of the open row
	cell []string // paragraphs of the open cell
	in   bool     // a cell is open
	// cellBytes counts the open cell's text, to stop collecting what
	// cellText would cut.
	cellBytes int
	span      int // the open cell's gridSpan
}

// run reads the document; unfinished reports a stop at the token budget.
func (w *docxWalker) run(x *xmlStream) (unfinished bool, err error) {
	for {
		tok, err := x.next()
		if err == io.EOF {
			break
		}
		if err == errTokens {
			unfinished = true
			break
		}
		if err != nil {
			return false, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if err := w.start(x, t); err != nil {
				if err == errTokens {
					unfinished = true
					break
				}
				return false, err
			}
		case xml.EndElement:
			w.end(t)
		case xml.CharData:
			if w.inText > 0 && len(w.paras) > 0 {
				w.paras[len(w.paras)-1].text.write(string(t))
			}
		}
		if unfinished {
			break
		}
	}
	for len(w.paras) > 0 { // flush what a stop left open
		w.end(xml.EndElement{Name: xml.Name{Local: "p"}})
	}
	return unfinished, nil
}

// start handles an element's start.
func (w *docxWalker) start(x *xmlStream, t xml.StartElement) error {
	var p *docxPara
	if len(w.paras) > 0 {
		p = w.paras[len(w.paras)-1]
	}
	switch t.Name.Local {
	case "Fallback", "instrText", "delText", "moveFrom", "del":
		// mc:Fallback repeats mc:Choice (text boxes twice); the rest is
		// field code or deleted text.
		return x.skip()
	case "p":
		w.paras = append(w.paras, &docxPara{text: &textBuf{limit: w.lim.partRunes}})
	case "pPr":
		w.inPPr++
	case "pStyle":
		if p != nil && w.inPPr > 0 {
			p.heading = w.headingOf(attr(t, "val"))
		}
	case "outlineLvl":
		if p != nil && w.inPPr > 0 {
			if n, err := strconv.Atoi(attr(t, "val")); err == nil && n >= 0 && n < 6 {
				p.heading = n + 1
			}
		}
	case "numPr":
		if p != nil && w.inPPr > 0 {
			p.list = true
		}
	case "numId":
		if p != nil && w.inPPr > 0 {
			p.numID = attr(t, "val")
			p.list = p.numID != "0" // numId 0 takes a style's list away
		}
	case "ilvl":
		if p != nil && w.inPPr > 0 {
			if n, err := strconv.Atoi(attr(t, "val")); err == nil && n >= 0 && n < 9 {
				p.level = n
			}
		}
	case "r":
		w.inRun++
	case "t":
		w.inText++
	case "tab":
		if p != nil && w.inRun > 0 {
			p.text.write("\t")
		}
	case "br", "cr":
		if p != nil && w.inRun > 0 {
			p.text.write("\n")
		}
	case "noBreakHyphen":
		if p != nil && w.inRun > 0 {
			p.text.write("-")
		}
	case "tbl":
		if len(w.tables) == 0 {
			w.out.line("")
		}
		w.tables = append(w.tables, &docxTable{})
	case "tr":
		if tb := w.table(); tb != nil {
			tb.row = tb.row[:0]
		}
	case "tc":
		if tb := w.table(); tb != nil {
			tb.cell, tb.in, tb.span, tb.cellBytes = nil, true, 1, 0
		}
	case "gridSpan":
		if tb := w.table(); tb != nil && tb.in {
			if n, err := strconv.Atoi(attr(t, "val")); err == nil && n > 1 {
				tb.span = min(n, w.lim.cols)
			}
		}
	}
	return nil
}

// table returns the innermost open table, or nil.
func (w *docxWalker) table() *docxTable {
	if len(w.tables) == 0 {
		return nil
	}
	return w.tables[len(w.tables)-1]
}

// end handles an element's end.
func (w *docxWalker) end(t xml.EndElement) {
	switch t.Name.Local {
	case "p":
		if len(w.paras) == 0 {
			return
		}
		p := w.paras[len(w.paras)-1]
		w.paras = w.paras[:len(w.paras)-1]
		w.emit(p)
	case "pPr":
		w.inPPr = max(0, w.inPPr-1)
	case "r":
		w.inRun = max(0, w.inRun-1)
	case "t":
		w.inText = max(0, w.inText-1)
	case "tc":
		tb := w.table()
		if tb == nil || !tb.in {
			return
		}
		if len(tb.row) < w.lim.cols {
			tb.row = append(tb.row, truncRunes(strings.Join(tb.cell, "\n"), w.lim.cellRunes+1))
			for i := 1; i < tb.span && len(tb.row) < w.lim.cols; i++ {
				tb.row = append(tb.row, "")
			}
		}
		tb.cell, tb.in = nil, false
	case "tr":
		tb := w.table()
		if tb == nil {
			return
		}
		if len(w.tables) == 1 {
			for i, c := range tb.row {
				tb.row[i] = cellText(c, w.lim.cellRunes)
			}
			w.out.line(mdRow(tb.row))
			if tb.rows == 0 {
				w.out.line(mdSep(len(tb.row)))
			}
		} else if parent := w.tables[len(w.tables)-2]; parent.in {
			// A nested table becomes lines of its parent's cell.
			if parent.cellBytes <= 4*w.lim.cellRunes {
				row := strings.ReplaceAll(strings.Join(tb.row, " | "), "\n", " ")
				parent.cell = append(parent.cell, row)
				parent.cellBytes += len(row)
			}
		}
		tb.rows++
		tb.row = tb.row[:0]
	case "tbl":
		if len(w.tables) == 0 {
			return
		}
		w.tables = w.tables[:len(w.tables)-1]
		if len(w.tables) == 0 {
			w.out.line("")
		}
	}
}

// emit writes a finished paragraph: to the open table cell, if any, else
// as a line of the output.
func (w *docxWalker) emit(p *docxPara) {
	s := strings.TrimRight(p.text.text(), " \t\n")
	if tb := w.table(); tb != nil {
		if tb.in && s != "" && tb.cellBytes <= 4*w.lim.cellRunes { // cellText cuts the rest
			tb.cell = append(tb.cell, truncRunes(s, w.lim.cellRunes+1))
			tb.cellBytes += len(s)
		}
		return
	}
	switch {
	case s == "":
	case p.heading > 0:
		s = strings.Repeat("#", p.heading) + " " + strings.ReplaceAll(s, "\n", " ")
	case p.list:
		s = strings.Repeat("  ", p.level) + w.listMark(p) + s
	}
	w.out.line(s)
	w.out.omitted += p.text.omitted
}

// listMark is the mark of a list paragraph: "- " for bullets, "3. " for
// the third item of a numbered level (counting on across the document, a
// shallower item restarting the deeper levels).
func (w *docxWalker) listMark(p *docxPara) string {
	levels := w.lists[p.numID]
	if levels == nil || !levels[p.level].ordered {
		return "- "
	}
	c := w.counters[p.numID]
	if c == nil {
		if len(w.counters) >= 10000 {
			return "- "
		}
		c = &[9]int{}
		w.counters[p.numID] = c
	}
	if c[p.level] == 0 {
		c[p.level] = levels[p.level].start
	} else {
		c[p.level]++
	}
	for i := p.level + 1; i < len(c); i++ {
		c[i] = 0
	}
	return strconv.Itoa(c[p.level]) + ". "
}

// docxNumbering reads word/numbering.xml: for each list (w:num, by its
// numId) whether each level is numbered and where it starts. Overrides of
// a list's levels are not read. A missing or unreadable part makes every
// list item a bullet.
func docxNumbering(a *archive, name string) map[string]*[9]docxLevel {
	out := map[string]*[9]docxLevel{}
	if !a.has(name) {
		return out
	}
	x, err := a.xml(name, a.lim.smallBytes)
	if err != nil {
		return out
	}
	defer x.Close()
	abstract := map[string]*[9]docxLevel{}
	var (
		cur   *[9]docxLevel // the abstractNum being read
		lvl   = -1
		numID string // the num being read
	)
	for {
		tok, err := x.next()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "abstractNum":
				cur = &[9]docxLevel{}
				for i := range cur {
					cur[i].start = 1
				}
				if len(abstract) < 10000 {
					abstract[attr(t, "abstractNumId")] = cur
				}
			case "lvl":
				lvl = -1
				if n, err := strconv.Atoi(attr(t, "ilvl")); err == nil && n >= 0 && n < 9 {
					lvl = n
				}
			case "start":
				if n, err := strconv.Atoi(attr(t, "val")); cur != nil && lvl >= 0 && err == nil && n >= 0 && n < 1e6 {
					cur[lvl].start = n
				}
			case "numFmt":
				if cur != nil && lvl >= 0 {
					v := attr(t, "val")
					cur[lvl].ordered = v != "bullet" && v != "none" && v != ""
				}
			case "num":
				numID = attr(t, "numId")
			case "abstractNumId":
				if numID != "" && len(out) < 10000 {
					out[numID] = abstract[attr(t, "val")]
				}
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "abstractNum":
				cur = nil
			case "lvl":
				lvl = -1
			case "num":
				numID = ""
			}
		}
	}
	for id, l := range out {
		if l == nil {
			delete(out, id)
		}
	}
	return out
}

// headingOf returns the heading level of the paragraph style id.
func (w *docxWalker) headingOf(id string) int {
	if n, ok := w.headings[id]; ok {
		return n
	}
	return headingName(id)
}

// headingName returns the heading level a style name or id means:
// "heading 2"/"Heading2" -> 2, "Title" -> 1; 0 for other styles.
func headingName(name string) int {
	s := strings.ToLower(strings.ReplaceAll(name, " ", ""))
	if s == "title" {
		return 1
	}
	if rest, ok := strings.CutPrefix(s, "heading"); ok {
		if n, err := strconv.Atoi(rest); err == nil && n >= 1 && n <= 9 {
			return min(n, 6)
		}
	}
	return 0
}

// docxHeadings reads the heading level of each paragraph style of
// word/styles.xml: by its name ("heading 1", English in every language of
// Word), its outline level, or the style it is based on. A missing or
// unreadable styles part gives no headings beyond the style ids'.
func docxHeadings(a *archive, name string) map[string]int {
	out := map[string]int{}
	if !a.has(name) {
		return out
	}
	x, err := a.xml(name, a.lim.smallBytes)
	if err != nil {
		return out
	}
	defer x.Close()
	based := map[string]string{}
	id, inPPr := "", 0
	for {
		tok, err := x.next()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "style":
				id = ""
				if typ := attr(t, "type"); typ == "" || typ == "paragraph" {
					id = attr(t, "styleId")
				}
			case "name":
				if id != "" {
					if n := headingName(attr(t, "val")); n > 0 {
						out[id] = n
					}
				}
			case "basedOn":
				if id != "" {
					based[id] = attr(t, "val")
				}
			case "pPr":
				inPPr++
			case "outlineLvl":
				if id != "" && inPPr > 0 {
					if _, named := out[id]; !named {
						if n, err := strconv.Atoi(attr(t, "val")); err == nil && n >= 0 && n < 6 {
							out[id] = n + 1
						}
					}
				}
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "style":
				id = ""
			case "pPr":
				inPPr = max(0, inPPr-1)
			}
		}
	}
	for id := range based {
		if _, ok := out[id]; ok {
			continue
		}
		b := id
		for range 8 {
			b = based[b]
			if n, ok := out[b]; ok {
				out[id] = n
				break
			}
			if b == "" {
				break
			}
		}
	}
	return out
}
