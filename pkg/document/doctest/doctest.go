// Package doctest makes real office files for tests and benchmarks: Word,
// Excel and PowerPoint packages as Office writes them (minimal, but with
// the content types, relationships and parts Office needs to open them)
// and PDFs whose text, CJK included, poppler's pdftotext extracts.
//
//	data := doctest.DOCX([]string{"# 季度报告", "收入增长 12%"}, [][]string{{"地区", "收入"}, {"华东", "1200"}})
//	pdf := doctest.PDF([]string{"季度报告 第1页", "第2页"})
package doctest

import (
	"archive/zip"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Namespaces and relationship types of the packages.
const (
	nsW      = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
	nsR      = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
	nsS      = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
	nsP      = "http://schemas.openxmlformats.org/presentationml/2006/main"
	nsA      = "http://schemas.openxmlformats.org/drawingml/2006/main"
	nsRels   = "http://schemas.openxmlformats.org/package/2006/relationships"
	nsCT     = "http://schemas.openxmlformats.org/package/2006/content-types"
	relBase  = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
	xmlDecl  = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n"
	ctBase   = "application/vnd.openxmlformats-officedocument."
	relsType = "application/vnd.openxmlformats-package.relationships+xml"
)

// part is one file of a package.
type part struct{ name, body string }

// pack zips parts in order (deflated, as Office writes them).
func pack(parts []part) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range parts {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: p.name, Method: zip.Deflate})
		if err != nil {
			panic(err) // writing to memory does not fail
		}
		if _, err := w.Write([]byte(p.body)); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// esc escapes s for XML text and attribute values, dropping characters
// XML 1.0 cannot hold.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '&':
			b.WriteString("&amp;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\t' || r == '\n' || r == '\r':
			fmt.Fprintf(&b, "&#%d;", r)
		case r < 0x20 || r == 0xfffe || r == 0xffff || (r >= 0xd800 && r <= 0xdfff):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// contentTypes writes [Content_Types].xml with the defaults for rels and
// xml and one override per part name -> content type.
func contentTypes(overrides [][2]string) part {
	var b strings.Builder
	b.WriteString(xmlDecl + `<Types xmlns="` + nsCT + `">`)
	b.WriteString(`<Default Extension="rels" ContentType="` + relsType + `"/>`)
	b.WriteString(`<Default Extension="xml" ContentType="application/xml"/>`)
	for _, o := range overrides {
		b.WriteString(`<Override PartName="/` + o[0] + `" ContentType="` + o[1] + `"/>`)
	}
	b.WriteString(`</Types>`)
	return part{"[Content_Types].xml", b.String()}
}

// rels writes a relationships part: each entry is {type suffix, target};
// ids are rId1, rId2, ... in order.
func rels(name string, entries [][2]string) part {
	var b strings.Builder
	b.WriteString(xmlDecl + `<Relationships xmlns="` + nsRels + `">`)
	for i, e := range entries {
		fmt.Fprintf(&b, `<Relationship Id="rId%d" Type="%s%s" Target="%s"/>`, i+1, relBase, e[0], esc(e[1]))
	}
	b.WriteString(`</Relationships>`)
	return part{name, b.String()}
}

// DOCX returns a Word document: one paragraph per string ("\n" a line
// break, "\t" a tab; one starting with "# " ... "###### " is a heading of
// that level, Heading1..Heading6, without the marks), then, when table is
// not empty, a table of its rows.
func DOCX(paragraphs []string, table [][]string) []byte {
	var b strings.Builder
	b.WriteString(xmlDecl + `<w:document xmlns:w="` + nsW + `" xmlns:r="` + nsR + `"><w:body>`)
	for _, p := range paragraphs {
		b.WriteString(docxPara(p))
	}
	if len(table) > 0 {
		cols := 0
		for _, r := range table {
			cols = max(cols, len(r))
		}
		cols = max(cols, 1)
		b.WriteString(`<w:tbl><w:tblPr><w:tblStyle w:val="TableGrid"/><w:tblW w:w="0" w:type="auto"/></w:tblPr><w:tblGrid>`)
		for range cols {
			fmt.Fprintf(&b, `<w:gridCol w:w="%d"/>`, 9000/cols)
		}
		b.WriteString(`</w:tblGrid>`)
		for _, r := range table {
			b.WriteString(`<w:tr>`)
			for i := range cols {
				c := ""
				if i < len(r) {
					c = r[i]
				}
				fmt.Fprintf(&b, `<w:tc><w:tcPr><w:tcW w:w="%d" w:type="dxa"/></w:tcPr>%s</w:tc>`, 9000/cols, docxPara(c))
			}
			b.WriteString(`</w:tr>`)
		}
		b.WriteString(`</w:tbl><w:p/>`)
	}
	b.WriteString(`<w:sectPr><w:pgSz w:w="11906" w:h="16838"/><w:pgMar w:top="1440" w:right="1800" w:bottom="1440" w:left="1800" w:header="851" w:footer="992" w:gutter="0"/></w:sectPr>`)
	b.WriteString(`</w:body></w:document>`)
	return pack([]part{
		contentTypes([][2]string{
			{"word/document.xml", ctBase + "wordprocessingml.document.main+xml"},
			{"word/styles.xml", ctBase + "wordprocessingml.styles+xml"},
		}),
		rels("_rels/.rels", [][2]string{{"officeDocument", "word/document.xml"}}),
		rels("word/_rels/document.xml.rels", [][2]string{{"styles", "styles.xml"}}),
		{"word/document.xml", b.String()},
		{"word/styles.xml", docxStyles()},
	})
}

// docxPara writes one paragraph of DOCX.
func docxPara(p string) string {
	var b strings.Builder
	b.WriteString(`<w:p>`)
	level := 0
	for level < 6 && strings.HasPrefix(p[level:], "#") {
		level++
	}
	if level > 0 && strings.HasPrefix(p[level:], " ") {
		fmt.Fprintf(&b, `<w:pPr><w:pStyle w:val="Heading%d"/></w:pPr>`, level)
		p = p[level+1:]
	}
	if p != "" {
		b.WriteString(`<w:r>`)
		for i, line := range strings.Split(p, "\n") {
			if i > 0 {
				b.WriteString(`<w:br/>`)
			}
			for j, seg := range strings.Split(line, "\t") {
				if j > 0 {
					b.WriteString(`<w:tab/>`)
				}
				if seg != "" {
					b.WriteString(`<w:t xml:space="preserve">` + esc(seg) + `</w:t>`)
				}
			}
		}
		b.WriteString(`</w:r>`)
	}
	b.WriteString(`</w:p>`)
	return b.String()
}

// docxStyles writes word/styles.xml: Normal, Heading1..6 and TableGrid.
func docxStyles() string {
	var b strings.Builder
	b.WriteString(xmlDecl + `<w:styles xmlns:w="` + nsW + `">`)
	b.WriteString(`<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/><w:qFormat/></w:style>`)
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&b, `<w:style w:type="paragraph" w:styleId="Heading%d"><w:name w:val="heading %d"/><w:basedOn w:val="Normal"/><w:next w:val="Normal"/><w:qFormat/><w:pPr><w:keepNext/><w:outlineLvl w:val="%d"/></w:pPr><w:rPr><w:b/><w:sz w:val="%d"/></w:rPr></w:style>`, i, i, i-1, 40-4*i)
	}
	b.WriteString(`<w:style w:type="table" w:styleId="TableGrid"><w:name w:val="Table Grid"/><w:tblPr><w:tblBorders>`)
	for _, side := range []string{"top", "left", "bottom", "right", "insideH", "insideV"} {
		b.WriteString(`<w:` + side + ` w:val="single" w:sz="4" w:space="0" w:color="auto"/>`)
	}
	b.WriteString(`</w:tblBorders></w:tblPr></w:style></w:styles>`)
	return b.String()
}

// Sheet is one worksheet for XLSX.
type Sheet struct {
	// Name is the sheet's tab name (Excel allows 31 characters, none of
	// []:*?/\).
	Name string
	// Rows are the cells, row by row from A1; "" leaves a cell empty.
	Rows [][]string
}

// XLSX returns an Excel workbook of the sheets (an empty "Sheet1" when
// there are none). Cells that read as plain decimal numbers are number
// cells; all other text is in the shared strings.
func XLSX(sheets []Sheet) []byte {
	if len(sheets) == 0 {
		sheets = []Sheet{{Name: "Sheet1"}}
	}
	var (
		shared []string
		index  = map[string]int{}
		refs   int
		parts  []part
		over   = [][2]string{{"xl/workbook.xml", ctBase + "spreadsheetml.sheet.main+xml"}}
		wbRels [][2]string
		wb     strings.Builder
	)
	wb.WriteString(xmlDecl + `<workbook xmlns="` + nsS + `" xmlns:r="` + nsR + `"><bookViews><workbookView/></bookViews><sheets>`)
	for i, s := range sheets {
		n := i + 1
		name := fmt.Sprintf("xl/worksheets/sheet%d.xml", n)
		over = append(over, [2]string{name, ctBase + "spreadsheetml.worksheet+xml"})
		wbRels = append(wbRels, [2]string{"worksheet", fmt.Sprintf("worksheets/sheet%d.xml", n)})
		fmt.Fprintf(&wb, `<sheet name="%s" sheetId="%d" r:id="rId%d"/>`, esc(s.Name), n, n)

		var sb strings.Builder
		cols := 1
		for _, r := range s.Rows {
			cols = max(cols, len(r))
		}
		sb.WriteString(xmlDecl + `<worksheet xmlns="` + nsS + `" xmlns:r="` + nsR + `">`)
		fmt.Fprintf(&sb, `<dimension ref="A1:%s%d"/>`, colName(cols-1), max(len(s.Rows), 1))
		sb.WriteString(`<sheetData>`)
		for ri, r := range s.Rows {
			fmt.Fprintf(&sb, `<row r="%d">`, ri+1)
			for ci, v := range r {
				if v == "" {
					continue
				}
				ref := colName(ci) + strconv.Itoa(ri+1)
				if isNumber(v) {
					fmt.Fprintf(&sb, `<c r="%s"><v>%s</v></c>`, ref, v)
					continue
				}
				k, ok := index[v]
				if !ok {
					k = len(shared)
					index[v] = k
					shared = append(shared, v)
				}
				refs++
				fmt.Fprintf(&sb, `<c r="%s" t="s"><v>%d</v></c>`, ref, k)
			}
			sb.WriteString(`</row>`)
		}
		sb.WriteString(`</sheetData><pageMargins left="0.7" right="0.7" top="0.75" bottom="0.75" header="0.3" footer="0.3"/></worksheet>`)
		parts = append(parts, part{name, sb.String()})
	}
	wb.WriteString(`</sheets></workbook>`)
	wbRels = append(wbRels, [2]string{"styles", "styles.xml"}, [2]string{"sharedStrings", "sharedStrings.xml"})
	over = append(over,
		[2]string{"xl/styles.xml", ctBase + "spreadsheetml.styles+xml"},
		[2]string{"xl/sharedStrings.xml", ctBase + "spreadsheetml.sharedStrings+xml"})

	var ss strings.Builder
	fmt.Fprintf(&ss, xmlDecl+`<sst xmlns="`+nsS+`" count="%d" uniqueCount="%d">`, refs, len(shared))
	for _, s := range shared {
		ss.WriteString(`<si><t xml:space="preserve">` + esc(s) + `</t></si>`)
	}
	ss.WriteString(`</sst>`)

	return pack(append([]part{
		contentTypes(over),
		rels("_rels/.rels", [][2]string{{"officeDocument", "xl/workbook.xml"}}),
		rels("xl/_rels/workbook.xml.rels", wbRels),
		{"xl/workbook.xml", wb.String()},
		{"xl/styles.xml", xlsxStyles},
		{"xl/sharedStrings.xml", ss.String()},
	}, parts...))
}

// xlsxStyles is the smallest styles part Excel accepts.
const xlsxStyles = xmlDecl + `<styleSheet xmlns="` + nsS + `">` +
	`<fonts count="1"><font><sz val="11"/><name val="Calibri"/><family val="2"/></font></fonts>` +
	`<fills count="2"><fill><patternFill patternType="none"/></fill><fill><patternFill patternType="gray125"/></fill></fills>` +
	`<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>` +
	`<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>` +
	`<cellXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/></cellXfs>` +
	`<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>` +
	`</styleSheet>`

// isNumber reports whether s is a plain decimal number as a number cell
// holds it: "-12", "3.5", "1e-3"; not "007" (leading zeros are text).
func isNumber(s string) bool {
	if len(s) > 20 {
		return false
	}
	i := 0
	if strings.HasPrefix(s, "-") {
		i = 1
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	start := i
	if n := digits(); n == 0 || n > 1 && s[start] == '0' {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// colName is the spreadsheet name of the 0-based column i: A, Z, AA.
func colName(i int) string {
	var b []byte
	for i++; i > 0; i = (i - 1) / 26 {
		b = append([]byte{byte('A' + (i-1)%26)}, b...)
	}
	return string(b)
}

// PPTX returns a PowerPoint presentation with one slide per string: its
// first line is the slide's title (a title placeholder), the other lines
// paragraphs of a text box below it.
func PPTX(slides []string) []byte {
	const ns = ` xmlns:a="` + nsA + `" xmlns:r="` + nsR + `" xmlns:p="` + nsP + `"`
	over := [][2]string{
		{"ppt/presentation.xml", ctBase + "presentationml.presentation.main+xml"},
		{"ppt/slideMasters/slideMaster1.xml", ctBase + "presentationml.slideMaster+xml"},
		{"ppt/slideLayouts/slideLayout1.xml", ctBase + "presentationml.slideLayout+xml"},
		{"ppt/theme/theme1.xml", ctBase + "theme+xml"},
		{"ppt/presProps.xml", ctBase + "presentationml.presProps+xml"},
		{"ppt/viewProps.xml", ctBase + "presentationml.viewProps+xml"},
		{"ppt/tableStyles.xml", ctBase + "presentationml.tableStyles+xml"},
	}
	presRels := [][2]string{{"slideMaster", "slideMasters/slideMaster1.xml"}}
	var pres strings.Builder
	pres.WriteString(xmlDecl + `<p:presentation` + ns + ` saveSubsetFonts="1">`)
	pres.WriteString(`<p:sldMasterIdLst><p:sldMasterId id="2147483648" r:id="rId1"/></p:sldMasterIdLst><p:sldIdLst>`)
	var parts []part
	for i, s := range slides {
		n := i + 1
		name := fmt.Sprintf("ppt/slides/slide%d.xml", n)
		over = append(over, [2]string{name, ctBase + "presentationml.slide+xml"})
		presRels = append(presRels, [2]string{"slide", fmt.Sprintf("slides/slide%d.xml", n)})
		fmt.Fprintf(&pres, `<p:sldId id="%d" r:id="rId%d"/>`, 255+n, n+1)

		title, body, _ := strings.Cut(s, "\n")
		var sb strings.Builder
		sb.WriteString(xmlDecl + `<p:sld` + ns + `><p:cSld><p:spTree>` + pptxGroup)
		sb.WriteString(`<p:sp><p:nvSpPr><p:cNvPr id="2" name="Title 1"/><p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr><p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr><p:spPr/>`)
		sb.WriteString(`<p:txBody><a:bodyPr/><a:lstStyle/>` + pptxPara(title) + `</p:txBody></p:sp>`)
		if body != "" {
			sb.WriteString(`<p:sp><p:nvSpPr><p:cNvPr id="3" name="TextBox 2"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr>`)
			sb.WriteString(`<p:spPr><a:xfrm><a:off x="457200" y="1600200"/><a:ext cx="8229600" cy="4525963"/></a:xfrm><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr>`)
			sb.WriteString(`<p:txBody><a:bodyPr wrap="square"/><a:lstStyle/>`)
			for _, line := range strings.Split(body, "\n") {
				sb.WriteString(pptxPara(line))
			}
			sb.WriteString(`</p:txBody></p:sp>`)
		}
		sb.WriteString(`</p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sld>`)
		parts = append(parts,
			part{name, sb.String()},
			rels(fmt.Sprintf("ppt/slides/_rels/slide%d.xml.rels", n), [][2]string{{"slideLayout", "../slideLayouts/slideLayout1.xml"}}))
	}
	pres.WriteString(`</p:sldIdLst><p:sldSz cx="9144000" cy="6858000" type="screen4x3"/><p:notesSz cx="6858000" cy="9144000"/></p:presentation>`)
	presRels = append(presRels,
		[2]string{"theme", "theme/theme1.xml"},
		[2]string{"presProps", "presProps.xml"},
		[2]string{"viewProps", "viewProps.xml"},
		[2]string{"tableStyles", "tableStyles.xml"})

	titlePh := `<p:sp><p:nvSpPr><p:cNvPr id="2" name="Title Placeholder 1"/><p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr><p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr>`
	master := xmlDecl + `<p:sldMaster` + ns + `><p:cSld><p:bg><p:bgRef idx="1001"><a:schemeClr val="bg1"/></p:bgRef></p:bg><p:spTree>` + pptxGroup +
		titlePh + `<p:spPr><a:xfrm><a:off x="457200" y="274638"/><a:ext cx="8229600" cy="1143000"/></a:xfrm><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr>` +
		`<p:txBody><a:bodyPr anchor="ctr"/><a:lstStyle/><a:p><a:endParaRPr lang="en-US"/></a:p></p:txBody></p:sp></p:spTree></p:cSld>` +
		`<p:clrMap bg1="lt1" tx1="dk1" bg2="lt2" tx2="dk2" accent1="accent1" accent2="accent2" accent3="accent3" accent4="accent4" accent5="accent5" accent6="accent6" hlink="hlink" folHlink="folHlink"/>` +
		`<p:sldLayoutIdLst><p:sldLayoutId id="2147483649" r:id="rId1"/></p:sldLayoutIdLst></p:sldMaster>`
	layout := xmlDecl + `<p:sldLayout` + ns + ` type="titleOnly" preserve="1"><p:cSld name="Title Only"><p:spTree>` + pptxGroup +
		titlePh + `<p:spPr/><p:txBody><a:bodyPr/><a:lstStyle/><a:p><a:endParaRPr lang="en-US"/></a:p></p:txBody></p:sp></p:spTree></p:cSld>` +
		`<p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sldLayout>`

	return pack(append([]part{
		contentTypes(over),
		rels("_rels/.rels", [][2]string{{"officeDocument", "ppt/presentation.xml"}}),
		rels("ppt/_rels/presentation.xml.rels", presRels),
		{"ppt/presentation.xml", pres.String()},
		{"ppt/slideMasters/slideMaster1.xml", master},
		rels("ppt/slideMasters/_rels/slideMaster1.xml.rels", [][2]string{{"slideLayout", "../slideLayouts/slideLayout1.xml"}, {"theme", "../theme/theme1.xml"}}),
		{"ppt/slideLayouts/slideLayout1.xml", layout},
		rels("ppt/slideLayouts/_rels/slideLayout1.xml.rels", [][2]string{{"slideMaster", "../slideMasters/slideMaster1.xml"}}),
		{"ppt/theme/theme1.xml", pptxTheme},
		{"ppt/presProps.xml", xmlDecl + `<p:presentationPr` + ns + `/>`},
		{"ppt/viewProps.xml", xmlDecl + `<p:viewPr` + ns + `/>`},
		{"ppt/tableStyles.xml", xmlDecl + `<a:tblStyleLst xmlns:a="` + nsA + `" def="{5C22544A-7EE6-4342-B048-85BDC9FD1C3A}"/>`},
	}, parts...))
}

// pptxGroup is the group properties every shape tree starts with.
const pptxGroup = `<p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr>` +
	`<p:grpSpPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="0" cy="0"/><a:chOff x="0" y="0"/><a:chExt cx="0" cy="0"/></a:xfrm></p:grpSpPr>`

// pptxPara writes one DrawingML paragraph.
func pptxPara(s string) string {
	if s == "" {
		return `<a:p><a:endParaRPr lang="en-US"/></a:p>`
	}
	return `<a:p><a:r><a:rPr lang="zh-CN" altLang="en-US"/><a:t>` + esc(s) + `</a:t></a:r></a:p>`
}

// pptxTheme is a minimal complete Office theme.
const pptxTheme = xmlDecl + `<a:theme xmlns:a="` + nsA + `" name="Office Theme"><a:themeElements>` +
	`<a:clrScheme name="Office"><a:dk1><a:sysClr val="windowText" lastClr="000000"/></a:dk1><a:lt1><a:sysClr val="window" lastClr="FFFFFF"/></a:lt1>` +
	`<a:dk2><a:srgbClr val="1F497D"/></a:dk2><a:lt2><a:srgbClr val="EEECE1"/></a:lt2><a:accent1><a:srgbClr val="4F81BD"/></a:accent1>` +
	`<a:accent2><a:srgbClr val="C0504D"/></a:accent2><a:accent3><a:srgbClr val="9BBB59"/></a:accent3><a:accent4><a:srgbClr val="8064A2"/></a:accent4>` +
	`<a:accent5><a:srgbClr val="4BACC6"/></a:accent5><a:accent6><a:srgbClr val="F79646"/></a:accent6><a:hlink><a:srgbClr val="0000FF"/></a:hlink>` +
	`<a:folHlink><a:srgbClr val="800080"/></a:folHlink></a:clrScheme>` +
	`<a:fontScheme name="Office"><a:majorFont><a:latin typeface="Calibri"/><a:ea typeface=""/><a:cs typeface=""/></a:majorFont>` +
	`<a:minorFont><a:latin typeface="Calibri"/><a:ea typeface=""/><a:cs typeface=""/></a:minorFont></a:fontScheme>` +
	`<a:fmtScheme name="Office"><a:fillStyleLst>` + pptxFill + pptxFill + pptxFill + `</a:fillStyleLst>` +
	`<a:lnStyleLst><a:ln w="9525">` + pptxFill + `</a:ln><a:ln w="25400">` + pptxFill + `</a:ln><a:ln w="38100">` + pptxFill + `</a:ln></a:lnStyleLst>` +
	`<a:effectStyleLst><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle></a:effectStyleLst>` +
	`<a:bgFillStyleLst>` + pptxFill + pptxFill + pptxFill + `</a:bgFillStyleLst></a:fmtScheme>` +
	`</a:themeElements><a:objectDefaults/><a:extraClrSchemeLst/></a:theme>`

// pptxFill is a theme's placeholder-colour solid fill.
const pptxFill = `<a:solidFill><a:schemeClr val="phClr"/></a:solidFill>`
