package document

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxSharedStrings bounds the shared strings kept; cells naming a later
// one read as empty.
const maxSharedStrings = 1 << 20

// xlsxSheetRef is a sheet as the workbook lists it.
type xlsxSheetRef struct {
	name, rid string
}

// extractXLSX reads every sheet of a workbook, in the workbook's order, as
// a Markdown table (the first row the header), one Part per sheet. Cells
// show their cached values (formulas are not evaluated), dates and
// percentages formatted as their number formats say; charts, images,
// comments and merged-cell layout are not read.
func extractXLSX(ctx context.Context, data []byte, lim limits) (*Doc, error) {
	const what = "an Excel workbook (.xlsx)"
	a, wb, rels, err := openPackage(ctx, data, lim, what, "xl/workbook.xml", "workbook")
	if err != nil {
		return nil, err
	}
	sheets, date1904, err := xlsxWorkbook(a, wb)
	if err != nil {
		return nil, err
	}
	if len(sheets) == 0 {
		return nil, errors.New("the workbook lists no sheets")
	}
	dir := path.Dir(wb) + "/"
	ssName := relByType(rels, "/sharedStrings")
	if ssName == "" {
		ssName = dir + "sharedStrings.xml"
	}
	shared, err := xlsxShared(a, ssName)
	if err != nil {
		return nil, err
	}
	stylesName := relByType(rels, "/styles")
	if stylesName == "" {
		stylesName = dir + "styles.xml"
	}
	sr := &sheetReader{shared: shared, formats: xlsxFormats(a, stylesName), date1904: date1904, lim: lim}
	b := budget{left: lim.docRunes}
	d := &Doc{Kind: KindXLSX, Unit: UnitSheet}
	byID := relsByID(rels)
	for _, s := range sheets {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t := b.part(lim)
		unfinished := false
		target, typ := byID[s.rid].target, byID[s.rid].typ
		switch {
		case strings.HasSuffix(typ, "/chartsheet"):
			t.line("(a chart sheet: it has no cells)")
		case target == "" || !a.has(target):
			t.line("(this sheet's cells are missing from the file)")
		default:
			unfinished, err = sr.read(a, target, t)
			if err != nil {
				return nil, err
			}
		}
		d.Parts = append(d.Parts, t.finish("Sheet: "+s.name, unfinished))
		b.done(t)
	}
	return d, nil
}

// xlsxWorkbook reads the sheet list and the date system of workbook.xml.
func xlsxWorkbook(a *archive, name string) (sheets []xlsxSheetRef, date1904 bool, err error) {
	x, err := a.xml(name, a.lim.smallBytes)
	if err != nil {
		return nil, false, err
	}
	defer x.Close()
	for {
		tok, err := x.next()
		if err == io.EOF || err == errTokens {
			return sheets, date1904, nil
		}
		if err != nil {
			return nil, false, err
		}
		e, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch e.Name.Local {
		case "workbookPr":
			v := attr(e, "date1904")
			date1904 = v == "1" || v == "true"
		case "sheet":
			if len(sheets) >= a.lim.entries {
				continue
			}
			n := attr(e, "name")
			if n == "" {
				n = "Sheet" + strconv.Itoa(len(sheets)+1)
			}
			sheets = append(sheets, xlsxSheetRef{name: n, rid: relAttr(e, "id")})
		}
	}
}

// xlsxShared reads the shared strings: the text of each <si>, its rich
// text runs joined, phonetic guides (rPh) left out, each cut a little past
// the cell limit. A missing part is no strings.
func xlsxShared(a *archive, name string) ([]string, error) {
	if !a.has(name) {
		return nil, nil
	}
	x, err := a.xml(name, a.lim.entryBytes)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	var (
		out  []string
		cur  *textBuf
		inT  int
		stop bool
	)
	for !stop {
		tok, err := x.next()
		if err == io.EOF || err == errTokens {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "si":
				cur = &textBuf{limit: a.lim.cellRunes + 1}
			case "rPh":
				if err := x.skip(); err != nil {
					if err == errTokens {
						stop = true
						break
					}
					return nil, err
				}
			case "t":
				inT++
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "t":
				inT = max(0, inT-1)
			case "si":
				if cur != nil {
					out = append(out, cur.sb.String())
					cur = nil
				}
				stop = len(out) >= maxSharedStrings
			}
		case xml.CharData:
			if cur != nil && inT > 0 {
				cur.write(string(t))
			}
		}
	}
	return out, nil
}

// Number formats that change how a cell's number reads.
const (
	fmtPlain = iota
	fmtDate
	fmtPercent
)

// xlsxFormats reads, for each cell format (the s attribute of a cell, an
// index into cellXfs), whether it shows a date or a percentage. A missing
// or unreadable styles part leaves every number plain.
func xlsxFormats(a *archive, name string) []uint8 {
	if !a.has(name) {
		return nil
	}
	x, err := a.xml(name, a.lim.smallBytes)
	if err != nil {
		return nil
	}
	defer x.Close()
	custom := map[int]string{}
	var out []uint8
	inXfs := 0
	for {
		tok, err := x.next()
		if err != nil {
			return out
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "numFmt":
				if id, err := strconv.Atoi(attr(t, "numFmtId")); err == nil {
					custom[id] = attr(t, "formatCode")
				}
			case "cellXfs":
				inXfs++
			case "xf":
				if inXfs > 0 && len(out) < 1<<16 {
					id, _ := strconv.Atoi(attr(t, "numFmtId"))
					code, ok := custom[id]
					out = append(out, numFormat(id, code, ok))
				}
			}
		case xml.EndElement:
			if t.Name.Local == "cellXfs" {
				inXfs = max(0, inXfs-1)
			}
		}
	}
}

// numFormat classifies the number format id (custom code when the
// workbook defines it).
func numFormat(id int, code string, custom bool) uint8 {
	if !custom {
		switch {
		case id == 9 || id == 10:
			return fmtPercent
		case id >= 14 && id <= 22, id >= 27 && id <= 36, id >= 45 && id <= 47, id >= 50 && id <= 58:
			return fmtDate
		}
		return fmtPlain
	}
	// Drop quoted text, escaped characters and [colour]/[$-locale]
	// sections, then look for date/time letters or a percent sign.
	var b strings.Builder
	quoted := false
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '\\' || c == '_' || c == '*':
			i++
		case c == '[':
			j := strings.IndexByte(code[i:], ']')
			if j < 0 {
				i = len(code)
				break
			}
			if sec := strings.ToLower(code[i+1 : i+j]); sec == "h" || sec == "hh" || sec == "m" || sec == "mm" || sec == "s" || sec == "ss" {
				b.WriteString(sec)
			}
			i += j
		default:
			b.WriteByte(c)
		}
	}
	s := strings.ToLower(b.String())
	if s == "general" || s == "@" {
		return fmtPlain
	}
	if strings.ContainsAny(s, "ymdhs") {
		return fmtDate
	}
	if strings.Contains(s, "%") {
		return fmtPercent
	}
	return fmtPlain
}

// sheetReader reads worksheets of one workbook.
type sheetReader struct {
	shared   []string
	formats  []uint8
	date1904 bool
	lim      limits
}

// read writes the worksheet name as a Markdown table to t; unfinished
// reports a stop at the token budget.
func (sr *sheetReader) read(a *archive, name string, t *textBuf) (unfinished bool, err error) {
	x, err := a.xml(name, sr.lim.entryBytes)
	if err != nil {
		return false, err
	}
	defer x.Close()
	var (
		rows      [][]string
		row       []string
		rowHas    bool
		more      bool // a non-empty row past the row limit
		colsCut   bool
		dimension string
		col       = -1 // column of the open cell
		cellType  string
		cellStyle int
		inCell    bool
		inV, inT  int
		val       = &textBuf{}
		held      int // runes of the cells in rows and row
	)
	lim := sr.lim
	endRow := func() {
		if rowHas {
			if len(rows) < lim.rows {
				rows = append(rows, row)
			} else {
				more = true
			}
		}
		row, rowHas, col = nil, false, -1
	}
loop:
	for !more {
		tok, err := x.next()
		switch {
		case err == io.EOF:
			break loop
		case err == errTokens:
			unfinished = true
			break loop
		case err != nil:
			return false, err
		}
		switch e := tok.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "dimension":
				dimension = attr(e, "ref")
			case "row":
				row, rowHas, col = nil, false, -1
			case "c":
				inCell = true
				if c, ok := cellCol(attr(e, "r")); ok {
					col = c
				} else {
					col++
				}
				cellType = attr(e, "t")
				cellStyle, _ = strconv.Atoi(attr(e, "s"))
				*val = textBuf{limit: lim.cellRunes + 1}
			case "v":
				inV++
			case "t":
				inT++
			case "rPh":
				if err := x.skip(); err != nil {
					if err == errTokens {
						unfinished = true
						break loop
					}
					return false, err
				}
			}
		case xml.EndElement:
			switch e.Name.Local {
			case "v":
				inV = max(0, inV-1)
			case "t":
				inT = max(0, inT-1)
			case "c":
				if !inCell {
					continue
				}
				inCell = false
				v := sr.value(cellType, cellStyle, val.sb.String())
				if v == "" {
					continue
				}
				if col >= lim.cols {
					colsCut = true
					continue
				}
				for len(row) <= col {
					row = append(row, "")
				}
				row[col] = cellText(v, lim.cellRunes)
				rowHas = true
				// Cells one shared string fills by the thousand would
				// otherwise all be held: stop once the sheet holds more
				// than its part can show (nothing, when the document's
				// budget is spent).
				if held += utf8.RuneCountInString(row[col]); held > t.limit {
					unfinished = true
					break loop
				}
			case "row":
				endRow()
			}
		case xml.CharData:
			if inCell && (inV > 0 || inT > 0) {
				val.write(string(e))
			}
		}
	}
	if rowHas { // a row the budget or a missing end left open
		endRow()
	}
	if len(rows) == 0 {
		t.line("(empty sheet)")
		return unfinished, nil
	}
	// Drop the columns empty in every row on the left.
	first := lim.cols
	for _, r := range rows {
		for i, c := range r {
			if c != "" {
				first = min(first, i)
				break
			}
		}
	}
	for i, r := range rows {
		rows[i] = r[min(first, len(r)):]
	}
	writeTable(t, rows)
	switch {
	case more && dimension != "":
		t.line("(showing the first " + thousands(lim.rows) + " rows with data; the sheet spans " + dimension + ")")
	case more:
		t.line("(showing the first " + thousands(lim.rows) + " rows with data; more rows follow)")
	}
	if colsCut {
		t.line("(columns after " + colName(lim.cols-1) + " are not shown)")
	}
	return unfinished, nil
}

// value is the text of a cell of type typ and style index style whose
// <v> (or inline string) is v.
func (sr *sheetReader) value(typ string, style int, v string) string {
	switch typ {
	case "s":
		i, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || i < 0 || i >= len(sr.shared) {
			return ""
		}
		return sr.shared[i]
	case "b":
		switch strings.TrimSpace(v) {
		case "1", "true":
			return "TRUE"
		case "0", "false":
			return "FALSE"
		}
		return v
	case "inlineStr", "str", "e", "d":
		return v
	}
	f := fmtPlain
	if style >= 0 && style < len(sr.formats) {
		f = int(sr.formats[style])
	}
	return formatNumber(v, f, sr.date1904)
}

// cellCol returns the 0-based column of a cell reference ("C5" -> 2).
func cellCol(ref string) (int, bool) {
	col, n := 0, 0
	for _, c := range ref {
		switch {
		case c >= 'A' && c <= 'Z':
			col = col*26 + int(c-'A'+1)
		case c >= 'a' && c <= 'z':
			col = col*26 + int(c-'a'+1)
		case c == '$':
			continue
		default:
			return col - 1, n > 0 && n <= 3
		}
		n++
		if n > 3 {
			return 0, false
		}
	}
	return col - 1, n > 0 && n <= 3
}

// formatNumber writes the number v as a spreadsheet shows it: 15
// significant digits, a date or time for a date format, a percentage for
// a percent format; v itself when it is not a number.
func formatNumber(v string, format int, date1904 bool) string {
	v = strings.TrimSpace(v)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return v
	}
	switch format {
	case fmtDate:
		if s, ok := serialDate(f, date1904); ok {
			return s
		}
	case fmtPercent:
		return plainNumber(f*100) + "%"
	}
	return plainNumber(f)
}

// plainNumber formats f with at most 15 significant digits, without an
// exponent for ordinary magnitudes.
func plainNumber(f float64) string {
	g, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 15, 64), 64)
	if a := math.Abs(g); a != 0 && (a >= 1e15 || a < 1e-6) {
		return strconv.FormatFloat(g, 'g', -1, 64)
	}
	return strconv.FormatFloat(g, 'f', -1, 64)
}

// serialDate turns a spreadsheet date serial into "2006-01-02", "15:04:05"
// or "2006-01-02 15:04:05".
func serialDate(f float64, date1904 bool) (string, bool) {
	if f < 0 || f > 2958466 {
		return "", false
	}
	days := math.Floor(f)
	secs := int64(math.Round((f - days) * 86400))
	if secs >= 86400 {
		days++
		secs -= 86400
	}
	var base time.Time
	switch {
	case date1904:
		base = time.Date(1904, 1, 1, 0, 0, 0, 0, time.UTC)
	case days >= 61:
		base = time.Date(1899, 12, 30, 0, 0, 0, 0, time.UTC) // 1900 was no leap year, Excel says it was
	case days == 60:
		return "1900-02-29", true
	default:
		base = time.Date(1899, 12, 31, 0, 0, 0, 0, time.UTC)
	}
	t := base.AddDate(0, 0, int(days)).Add(time.Duration(secs) * time.Second)
	switch {
	case days == 0 && !date1904:
		return t.Format("15:04:05"), true
	case secs == 0:
		return t.Format("2006-01-02"), true
	}
	return t.Format("2006-01-02 15:04:05"), true
}
