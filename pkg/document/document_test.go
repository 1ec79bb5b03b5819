package document

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"

	"agent/pkg/document/doctest"
)

// extractOK extracts data of kind, failing the test on an error.
func extractOK(t *testing.T, kind string, data []byte) *Doc {
	t.Helper()
	d, err := Extract(context.Background(), kind, data)
	if err != nil {
		t.Fatalf("Extract(%s): %v", kind, err)
	}
	if d.Kind != kind {
		t.Fatalf("Kind = %q, want %q", d.Kind, kind)
	}
	return d
}

// contains fails the test unless text holds every want, in order.
func contains(t *testing.T, text string, want ...string) {
	t.Helper()
	rest := text
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("missing (or out of order) %q in:\n%s", w, text)
		}
		rest = rest[i+len(w):]
	}
}

// gbk encodes s as GBK (GB18030) bytes.
func gbk(t *testing.T, s string) []byte {
	t.Helper()
	b, err := simplifiedchinese.GB18030.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKind(t *testing.T) {
	docx := doctest.DOCX([]string{"x"}, nil)
	xlsx := doctest.XLSX(nil)
	pptx := doctest.PPTX([]string{"x"})
	tests := []struct {
		name string
		head []byte
		want string
	}{
		{"a.pdf", nil, KindPDF},
		{"A.DOCX", nil, KindDOCX},
		{"dir/b.xlsx", nil, KindXLSX},
		{`C:\x\c.pptx`, nil, KindPPTX},
		{"d.csv", nil, KindCSV},
		{"d.tsv", nil, KindCSV},
		{"e.htm", nil, KindHTML},
		{"f.md", nil, KindMarkdown},
		{"g.log", nil, KindText},
		{"h.json", nil, KindText},
		{"report", []byte("%PDF-1.7\n"), KindPDF},
		{"upload.bin", docx, KindDOCX},
		{"upload", xlsx, KindXLSX},
		{"upload", pptx, KindPPTX},
		{"page", []byte("\xef\xbb\xbf  <!DOCTYPE html><html>"), KindHTML},
		{"page", []byte("<HTML><body>"), KindHTML},
		{"notes", []byte("hello\nworld"), KindText},
		{"notes.dat", gbk(t, "你好，世界"), KindText},
		{"utf16", []byte("\xff\xfeh\x00i\x00"), KindText},
	}
	for _, tt := range tests {
		got, err := Kind(tt.name, tt.head)
		if err != nil || got != tt.want {
			t.Errorf("Kind(%q) = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestKindRefuses(t *testing.T) {
	tests := []struct {
		name string
		head []byte
		want string
	}{
		{"old.doc", nil, "save it as .docx"},
		{"old.xls", []byte("\xd0\xcf\x11\xe0"), "save it as .xlsx"},
		{"photo.png", []byte("\x89PNG\r\n\x1a\n"), "an image"},
		{"blob", []byte("\x00\x01\x02binary"), "not recognized"},
		{"x.zip", nil, "zip archive"},
		{"y", []byte("PK\x03\x04\x14\x00\x00\x00mimetypeapplication/epub+zip"), "without Word, Excel or PowerPoint"},
	}
	for _, tt := range tests {
		_, err := Kind(tt.name, tt.head)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "Word (.docx)") {
			t.Errorf("Kind(%q) error = %v; want ErrUnsupported saying %q and naming the supported types", tt.name, err, tt.want)
		}
	}
}

func TestDOCX(t *testing.T) {
	data := doctest.DOCX([]string{
		"# 季度报告",
		"## 收入",
		"本季度收入增长 12%。\n第二行\t制表",
		"",
		"",
		"Plain | pipe",
	}, [][]string{{"地区", "收入"}, {"华东", "1,200"}, {"华北|北京"}})
	d := extractOK(t, KindDOCX, data)
	if len(d.Parts) != 1 || d.Unit != "" || d.Parts[0].Label != "" {
		t.Fatalf("want one flat part, got %+v", d)
	}
	text := d.Parts[0].Text
	contains(t, text,
		"# 季度报告\n",
		"## 收入\n",
		"本季度收入增长 12%。\n第二行\t制表\n",
		"\nPlain | pipe\n",
		"\n| 地区 | 收入 |\n| --- | --- |\n| 华东 | 1,200 |\n| 华北\\|北京 |  |",
	)
	if strings.Contains(text, "\n\n\n") {
		t.Errorf("runs of empty paragraphs should become one empty line:\n%q", text)
	}
	out, err := Render(d, "", 0)
	if err != nil || out != text {
		t.Errorf("Render of a flat document = %q, %v; want the text without a marker", out, err)
	}
}

func TestDOCXStructures(t *testing.T) {
	// Hand-written parts: a localized heading style (id "1", name
	// "heading 1"), a list, a text box in mc:AlternateContent (read once),
	// a field code, deleted text, a nested table and a merged cell.
	doc := `<?xml version="1.0"?><w:document xmlns:w="urn:w" xmlns:mc="urn:mc"><w:body>
<w:p><w:pPr><w:pStyle w:val="1"/></w:pPr><w:r><w:t>标题一</w:t></w:r></w:p>
<w:p><w:pPr><w:pStyle w:val="MyHeading"/></w:pPr><w:r><w:t>Based on heading 2</w:t></w:r></w:p>
<w:p><w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs><w:numPr><w:ilvl w:val="1"/><w:numId w:val="3"/></w:numPr></w:pPr><w:r><w:t>item</w:t></w:r></w:p>
<w:p><w:r><w:t xml:space="preserve">before </w:t></w:r><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:txbxContent><w:p><w:r><w:t>in the box</w:t></w:r></w:p></w:txbxContent></mc:Choice><mc:Fallback><w:txbxContent><w:p><w:r><w:t>in the box</w:t></w:r></w:p></w:txbxContent></mc:Fallback></mc:AlternateContent></w:r><w:r><w:instrText>PAGE \* MERGEFORMAT</w:instrText></w:r><w:del><w:r><w:delText>gone</w:delText></w:r></w:del><w:r><w:t>after</w:t></w:r></w:p>
<w:tbl><w:tr><w:tc><w:tcPr><w:gridSpan w:val="2"/></w:tcPr><w:p><w:r><w:t>wide</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>c</w:t></w:r></w:p></w:tc></w:tr>
<w:tr><w:tc><w:p><w:r><w:t>a</w:t></w:r></w:p><w:p><w:r><w:t>a2</w:t></w:r></w:p></w:tc><w:tc><w:tbl><w:tr><w:tc><w:p><w:r><w:t>n1</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>n2</w:t></w:r></w:p></w:tc></w:tr></w:tbl><w:p/></w:tc><w:tc><w:p><w:r><w:t>z</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
</w:body></w:document>`
	styles := `<w:styles xmlns:w="urn:w"><w:style w:type="paragraph" w:styleId="1"><w:name w:val="heading 1"/></w:style>
<w:style w:type="paragraph" w:styleId="2"><w:name w:val="heading 2"/></w:style>
<w:style w:type="paragraph" w:styleId="MyHeading"><w:name w:val="My Heading"/><w:basedOn w:val="2"/></w:style></w:styles>`
	data := zipOf(t, map[string]string{
		"[Content_Types].xml":          `<Types/>`,
		"_rels/.rels":                  `<Relationships><Relationship Id="rId1" Type="x/officeDocument" Target="/word/document.xml"/></Relationships>`,
		"word/_rels/document.xml.rels": `<Relationships><Relationship Id="rId1" Type="x/styles" Target="styles.xml"/></Relationships>`,
		"word/document.xml":            doc,
		"word/styles.xml":              styles,
	})
	text := extractOK(t, KindDOCX, data).Parts[0].Text
	contains(t, text, "# 标题一\n", "## Based on heading 2\n", "  - item\n", "in the box\n", "before after\n",
		"| wide |  | c |\n| --- | --- | --- |\n| a<br>a2 | n1 \\| n2 | z |")
	if strings.Count(text, "in the box") != 1 || strings.Contains(text, "gone") || strings.Contains(text, "PAGE") {
		t.Errorf("fallback, deleted text or field code leaked:\n%s", text)
	}
}

func TestXLSX(t *testing.T) {
	data := doctest.XLSX([]doctest.Sheet{
		{Name: "预算", Rows: [][]string{
			{"项目", "金额", "备注"},
			{"房租", "1200.5", ""},
			{},
			{"水电", "-30", "每月|固定"},
		}},
		{Name: "Empty"},
		{Name: "Wide", Rows: [][]string{{"", "", "C1", "", "E1"}, {"", "", "", "D2"}}},
	})
	d := extractOK(t, KindXLSX, data)
	if d.Unit != UnitSheet || len(d.Parts) != 3 {
		t.Fatalf("want 3 sheets, got %d (unit %q)", len(d.Parts), d.Unit)
	}
	if got := d.Parts[0].Label; got != "Sheet: 预算" {
		t.Errorf("label = %q", got)
	}
	if got, want := d.Parts[0].Text, "| 项目 | 金额 | 备注 |\n| --- | --- | --- |\n| 房租 | 1200.5 |  |\n| 水电 | -30 | 每月\\|固定 |"; got != want {
		t.Errorf("sheet 1:\n got %q\nwant %q", got, want)
	}
	if got := d.Parts[1].Text; got != "(empty sheet)" {
		t.Errorf("sheet 2 = %q", got)
	}
	// Columns A and B are empty everywhere and dropped; D1 stays empty.
	if got, want := d.Parts[2].Text, "| C1 |  | E1 |\n| --- | --- | --- |\n|  | D2 |  |"; got != want {
		t.Errorf("sheet 3:\n got %q\nwant %q", got, want)
	}
	out, err := Render(d, "1,3", 0)
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "--- Sheet: 预算 (1 of 3) ---\n| 项目", "\n\n--- Sheet: Wide (3 of 3) ---\n| C1")
	if strings.Contains(out, "Empty") {
		t.Errorf("sheet 2 was not asked for:\n%s", out)
	}
}

func TestXLSXCellTypes(t *testing.T) {
	sheet := `<worksheet xmlns="urn:s"><dimension ref="A1:H2"/><sheetData>
<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="inlineStr"><is><r><t>in</t></r><r><t>line</t></r></is></c><c r="C1" t="str"><f>A1&amp;"!"</f><v>富文本!</v></c>
<c r="D1" t="b"><v>1</v></c><c r="E1" t="e"><v>#DIV/0!</v></c><c r="F1"><v>0.10000000000000001</v></c><c r="G1" s="1"><v>45292</v></c><c r="H1" s="2"><v>0.125</v></c></row>
<row r="2"><c t="s"><v>1</v></c><c><v>1E+20</v></c><c s="3"><v>45292.75</v></c><c t="s"><v>99</v></c></row>
</sheetData></worksheet>`
	shared := `<sst xmlns="urn:s"><si><r><t>富</t></r><r><t>文本</t></r><rPh><t>ふ</t></rPh></si><si><t>no ref</t></si></sst>`
	styles := `<styleSheet xmlns="urn:s"><numFmts><numFmt numFmtId="164" formatCode="yyyy&quot;年&quot;m&quot;月&quot;d&quot;日&quot; hh:mm"/></numFmts>
<cellStyleXfs><xf numFmtId="14"/></cellStyleXfs>
<cellXfs><xf numFmtId="0"/><xf numFmtId="14"/><xf numFmtId="10"/><xf numFmtId="164"/></cellXfs></styleSheet>`
	data := zipOf(t, map[string]string{
		"_rels/.rels":                `<Relationships><Relationship Id="r" Type="x/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
		"xl/workbook.xml":            `<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="T" r:id="rId9"/></sheets></workbook>`,
		"xl/_rels/workbook.xml.rels": `<Relationships><Relationship Id="rId9" Type="x/worksheet" Target="/xl/worksheets/data.xml"/><Relationship Id="s" Type="x/sharedStrings" Target="sharedStrings.xml"/><Relationship Id="st" Type="x/styles" Target="styles.xml"/></Relationships>`,
		"xl/worksheets/data.xml":     sheet,
		"xl/sharedStrings.xml":       shared,
		"xl/styles.xml":              styles,
	})
	d := extractOK(t, KindXLSX, data)
	want := "| 富文本 | inline | 富文本! | TRUE | #DIV/0! | 0.1 | 2024-01-01 | 12.5% |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- |\n" +
		"| no ref | 1e+20 | 2024-01-01 18:00:00 |  |  |  |  |  |"
	if got := d.Parts[0].Text; got != want {
		t.Errorf("cells:\n got %q\nwant %q", got, want)
	}
}

func TestXLSXRowAndColumnLimits(t *testing.T) {
	var rows [][]string
	for i := range 30 {
		row := make([]string, 8)
		for j := range row {
			row[j] = colName(j) + itoa(i+1)
		}
		rows = append(rows, row)
	}
	lim := defaultLimits
	lim.rows, lim.cols = 10, 5
	d, err := extract(context.Background(), KindXLSX, doctest.XLSX([]doctest.Sheet{{Name: "Big", Rows: rows}}), lim)
	if err != nil {
		t.Fatal(err)
	}
	text := d.Parts[0].Text
	contains(t, text, "| A1 | B1 | C1 | D1 | E1 |\n", "| A10 | B10 | C10 | D10 | E10 |\n",
		"(showing the first 10 rows with data; the sheet spans A1:H30)\n", "(columns after E are not shown)")
	if strings.Contains(text, "A11") || strings.Contains(text, "F1") {
		t.Errorf("limits not applied:\n%s", text)
	}
}

func TestPPTX(t *testing.T) {
	data := doctest.PPTX([]string{"季度报告\n收入增长 12%\n\n下一步：扩张", "第二页", ""})
	d := extractOK(t, KindPPTX, data)
	if d.Unit != UnitSlide || len(d.Parts) != 3 {
		t.Fatalf("want 3 slides, got %+v", d)
	}
	if got, want := d.Parts[0].Text, "# 季度报告\n收入增长 12%\n下一步：扩张"; got != want {
		t.Errorf("slide 1:\n got %q\nwant %q", got, want)
	}
	if d.Parts[1].Label != "Slide 2" || d.Parts[1].Text != "# 第二页" {
		t.Errorf("slide 2 = %+v", d.Parts[1])
	}
	out, err := Render(d, "2-", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := "--- Slide 2 of 3 ---\n# 第二页\n\n--- Slide 3 of 3 ---\n(no text on this slide)"; out != want {
		t.Errorf("Render:\n got %q\nwant %q", out, want)
	}
}

func TestPPTXOrderNotesAndTables(t *testing.T) {
	ns := `xmlns:p="urn:p" xmlns:a="urn:a" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	slide := func(body string) string {
		return `<p:sld ` + ns + `><p:cSld><p:spTree>` + body + `</p:spTree></p:cSld></p:sld>`
	}
	sp := func(ph, text string) string {
		return `<p:sp><p:nvSpPr><p:nvPr>` + ph + `</p:nvPr></p:nvSpPr><p:txBody><a:p><a:r><a:t>` + text + `</a:t></a:r><a:br/><a:fld type="x"><a:t>!</a:t></a:fld></a:p></p:txBody></p:sp>`
	}
	data := zipOf(t, map[string]string{
		"_rels/.rels":                     `<Relationships><Relationship Id="1" Type="x/officeDocument" Target="ppt/presentation.xml"/></Relationships>`,
		"ppt/presentation.xml":            `<p:presentation ` + ns + `><p:sldIdLst><p:sldId id="256" r:id="rB"/><p:sldId id="257" r:id="rA"/></p:sldIdLst></p:presentation>`,
		"ppt/_rels/presentation.xml.rels": `<Relationships><Relationship Id="rA" Type="x/slide" Target="slides/slide1.xml"/><Relationship Id="rB" Type="x/slide" Target="slides/slide2.xml"/></Relationships>`,
		"ppt/slides/slide1.xml":           slide(sp(`<p:ph type="ctrTitle"/>`, "Later") + sp(`<p:ph type="sldNum"/>`, "7")),
		"ppt/slides/slide2.xml": slide(sp("", "First") + `<p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tr><a:tc><a:txBody><a:p><a:r><a:t>k</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>v</a:t></a:r></a:p></a:txBody></a:tc></a:tr>` +
			`<a:tr><a:tc><a:txBody><a:p><a:r><a:t>1</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>2</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic></p:graphicFrame>`),
		"ppt/slides/_rels/slide2.xml.rels": `<Relationships><Relationship Id="n" Type="x/notesSlide" Target="../notesSlides/notesSlide1.xml"/></Relationships>`,
		"ppt/notesSlides/notesSlide1.xml":  `<p:notes ` + ns + `><p:cSld><p:spTree>` + sp(`<p:ph type="sldImg"/>`, "image") + sp(`<p:ph type="body"/>`, "讲稿") + `</p:spTree></p:cSld></p:notes>`,
	})
	d := extractOK(t, KindPPTX, data)
	if len(d.Parts) != 2 {
		t.Fatalf("want 2 slides, got %d", len(d.Parts))
	}
	if got, want := d.Parts[0].Text, "First\n!\n\n| k | v |\n| --- | --- |\n| 1 | 2 |\n\nNotes:\n讲稿\n!"; got != want {
		t.Errorf("slide 1 (slide2.xml by the list's order):\n got %q\nwant %q", got, want)
	}
	if got, want := d.Parts[1].Text, "# Later !"; got != want {
		t.Errorf("slide 2:\n got %q\nwant %q", got, want)
	}
}

func TestCSV(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"comma with BOM", []byte("\xef\xbb\xbf名称,数量\r\n苹果,3\r\n\"香蕉, 大\",\"5\"\"\"\n"),
			"| 名称 | 数量 |\n| --- | --- |\n| 苹果 | 3 |\n| 香蕉, 大 | 5\" |"},
		{"tab", []byte("a\tb\tc\n1\t2\n"), "| a | b | c |\n| --- | --- | --- |\n| 1 | 2 |  |"},
		{"semicolon", []byte("x;y\n1,5;2\n"), "| x | y |\n| --- | --- |\n| 1,5 | 2 |"},
		{"GBK", gbk(t, "城市,人口\n北京,2189万\n"), "| 城市 | 人口 |\n| --- | --- |\n| 北京 | 2189万 |"},
		{"lazy quotes and blank lines", []byte("a,b\n\n1,x\"y\n,,\n2|3,\"multi\nline\"\n"),
			"| a | b |\n| --- | --- |\n| 1 | x\"y |\n| 2\\|3 | multi<br>line |"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := extractOK(t, KindCSV, tt.data)
			if got := d.Parts[0].Text; got != tt.want {
				t.Errorf("\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestCSVRowLimit(t *testing.T) {
	var b strings.Builder
	for i := range 50 {
		b.WriteString("r" + itoa(i) + ",v\n")
	}
	lim := defaultLimits
	lim.rows = 5
	d, err := extract(context.Background(), KindCSV, []byte(b.String()), lim)
	if err != nil {
		t.Fatal(err)
	}
	contains(t, d.Parts[0].Text, "| r4 | v |", "(showing the first 5 of 50 rows)")
}

func TestHTML(t *testing.T) {
	page := `<!DOCTYPE html><html><head><title>Site title</title><style>body{color:red}</style>
<script>var x = "<p>not text</p>";</script></head><body>
<nav><ul><li><a href="/">Home</a></li><li>About</li></ul></nav>
<header><div hidden>secret</div><span aria-hidden="true">★</span></header>
<main><h1>季度   报告</h1><p>收入
   增长 <b>12%</b>&nbsp;本季度。</p>
<h3>Details</h3>
<ul><li>one</li><li>two<ol><li>sub a</li><li>sub b</li></ol></li><li><p>para item</p></li></ul>
<table><tr><th>地区</th><th>收入</th></tr><tr><td>华东<td>1,200<tr><td>华北<br>北京</td><td>9|9</td></tr></table>
<pre>  code
    indented</pre>
<svg><text>drawn</text></svg><noscript>enable js</noscript><template><p>tmpl</p></template>
<iframe src="x">frame</iframe><p>end</p></main></body></html>`
	d := extractOK(t, KindHTML, []byte(page))
	text := d.Parts[0].Text
	contains(t, text, "# 季度 报告\n", "收入 增长 12% 本季度。\n", "### Details\n", "- one\n- two\n  1. sub a\n  2. sub b\n", "- para item\n",
		"| 地区 | 收入 |\n| --- | --- |\n| 华东 | 1,200 |\n| 华北<br>北京 | 9\\|9 |\n", "  code\n    indented\n", "end")
	for _, noise := range []string{"Site title", "color", "not text", "Home", "About", "secret", "★", "drawn", "enable js", "tmpl", "frame"} {
		if strings.Contains(text, noise) {
			t.Errorf("noise %q in:\n%s", noise, text)
		}
	}
}

func TestHTMLCharsets(t *testing.T) {
	body := "<p>你好，世界</p>"
	tests := []struct {
		name string
		data []byte
	}{
		{"meta charset gbk", append([]byte(`<html><head><meta charset="gbk"></head><body>`), gbk(t, body)...)},
		{"http-equiv gb2312", append([]byte(`<meta http-equiv="Content-Type" content="text/html; charset=gb2312">`), gbk(t, body)...)},
		{"no meta, not UTF-8", gbk(t, "<html><body>"+body)},
		{"labelled UTF-8 but GBK", append([]byte(`<meta charset="utf-8">`), gbk(t, body)...)},
		{"UTF-8", []byte(`<meta charset="utf-8">` + body)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := extractOK(t, KindHTML, tt.data).Parts[0].Text; got != "你好，世界" {
				t.Errorf("got %q", got)
			}
		})
	}
	latin := append([]byte(`<meta charset="iso-8859-1"><p>caf`), 0xe9, '<', '/', 'p', '>')
	if got := extractOK(t, KindHTML, latin).Parts[0].Text; got != "café" {
		t.Errorf("latin-1: got %q", got)
	}
}

func TestHTMLLayoutTable(t *testing.T) {
	page := `<table><tr><td><h2>Menu</h2><table><tr><td>a</td><td>b</td></tr></table></td></tr><tr><td>Body text</td></tr></table>`
	text := extractOK(t, KindHTML, []byte(page)).Parts[0].Text
	contains(t, text, "## Menu\n", "| a | b |\n", "Body text")
	if strings.Contains(text, "| ## Menu") {
		t.Errorf("a layout table became Markdown:\n%s", text)
	}
}

func TestText(t *testing.T) {
	d := extractOK(t, KindMarkdown, []byte("\xef\xbb\xbf# 标题\r\n\r\n正文\n"))
	if got := d.Parts[0].Text; got != "# 标题\n\n正文" {
		t.Errorf("markdown: %q", got)
	}
	if got := extractOK(t, KindText, gbk(t, "中文日志\n")).Parts[0].Text; got != "中文日志" {
		t.Errorf("GBK text: %q", got)
	}
	utf16 := []byte{0xff, 0xfe, 'h', 0, 'i', 0, 0x2d, 0x4e}
	if got := extractOK(t, KindText, utf16).Parts[0].Text; got != "hi中" {
		t.Errorf("UTF-16: %q", got)
	}
	if _, err := Extract(context.Background(), KindText, []byte("a\x00b")); err == nil || !strings.Contains(err.Error(), "binary") {
		t.Errorf("binary text: %v", err)
	}
}

func TestTextOverLimitIsCounted(t *testing.T) {
	text := strings.Repeat("字", MaxChars+500)
	d := extractOK(t, KindText, []byte(text))
	p := d.Parts[0]
	if n := utf8.RuneCountInString(p.Text); n != MaxChars || p.Omitted != 500 {
		t.Fatalf("kept %d runes, omitted %d; want %d and 500", n, p.Omitted, MaxChars)
	}
	out, err := Render(d, "", MaxChars)
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "[truncated: 500 more characters")
}

func TestExtractPDFAndUnknownKinds(t *testing.T) {
	if _, err := Extract(context.Background(), KindPDF, doctest.PDF([]string{"x"})); err == nil || !strings.Contains(err.Error(), "pdftotext") {
		t.Errorf("pdf: %v", err)
	}
	if _, err := Extract(context.Background(), "rtf", []byte("{\\rtf1}")); !errors.Is(err, ErrUnsupported) {
		t.Errorf("rtf: %v", err)
	}
}

// itoa is strconv.Itoa, short for tests.
func itoa(i int) string { return strconv.Itoa(i) }

// TestOfficeSuiteFiles reads files an office suite wrote (LibreOffice
// 7.4, from testdata/libreoffice: rich.docx from rich.html, data.xlsx from
// data.csv, slides.pptx from a doctest.PPTX file re-saved), with their own
// styles, numbering, date formats and layouts:
//
//	soffice --headless --convert-to 'docx:MS Word 2007 XML' rich.html
//	soffice --headless --infilter='CSV:44,34,76,1,,0,false,true' --convert-to 'xlsx:Calc MS Excel 2007 XML' data.csv
//	soffice --headless --convert-to 'pptx:Impress MS PowerPoint 2007 XML' slides.pptx
func TestOfficeSuiteFiles(t *testing.T) {
	tests := []struct {
		file, kind, want string
	}{
		{"rich.docx", KindDOCX, "# 季度报告\n本季度收入增长 12%，利润率提升。\n## 要点\n- 华东市场扩张\n- 新产品上线\n1. 第一步\n2. 第二步\n\n" +
			"| 地区 | 收入 |\n| --- | --- |\n| 华东 | 1,200 |\n| 华北 | 980 |\n\n结论：继续投入。"},
		{"data.xlsx", KindXLSX, "--- Sheet: data (1 of 1) ---\n| 日期 | 项目 | 金额 | 占比 |\n| --- | --- | --- | --- |\n" +
			"| 2024-01-15 | 房租 | 1200.5 | 12.5% |\n| 2024-02-01 | 水电 | -30 | 3% |"},
		{"slides.pptx", KindPPTX, "--- Slide 1 of 2 ---\n# 季度报告\n收入增长 12%\n下一步\n\n--- Slide 2 of 2 ---\n# 第二页"},
		// The sources read the same.
		{"rich.html", KindHTML, "# 季度报告\n\n本季度收入增长 12%，利润率提升。\n\n## 要点\n\n- 华东市场扩张\n- 新产品上线\n1. 第一步\n2. 第二步\n\n" +
			"| 地区 | 收入 |\n| --- | --- |\n| 华东 | 1,200 |\n| 华北 | 980 |\n\n结论：继续投入。"},
		{"data.csv", KindCSV, "| 日期 | 项目 | 金额 | 占比 |\n| --- | --- | --- | --- |\n| 2024-01-15 | 房租 | 1200.5 | 12.5% |\n| 2024-02-01 | 水电 | -30 | 3% |"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/libreoffice/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if k, err := Kind("upload", data[:min(len(data), 4096)]); k != tt.kind && tt.kind != KindCSV {
				t.Errorf("sniffed %q, %v; want %q", k, err, tt.kind)
			}
			out, err := Render(extractOK(t, tt.kind, data), "", 0)
			if err != nil || out != tt.want {
				t.Errorf("got %q, %v\nwant %q", out, err, tt.want)
			}
		})
	}
}

func TestDOCXNumbering(t *testing.T) {
	item := func(num, lvl, text string) string {
		return `<w:p><w:pPr><w:numPr><w:ilvl w:val="` + lvl + `"/><w:numId w:val="` + num + `"/></w:numPr></w:pPr><w:r><w:t>` + text + `</w:t></w:r></w:p>`
	}
	doc := `<w:document xmlns:w="urn:w"><w:body>` + item("5", "0", "a") + item("5", "1", "b") + item("5", "1", "c") + item("5", "0", "d") +
		item("5", "1", "e") + item("7", "0", "dot") + item("0", "0", "not a list") + item("9", "0", "unknown list") + `</w:body></w:document>`
	numbering := `<w:numbering xmlns:w="urn:w">
<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/></w:lvl><w:lvl w:ilvl="1"><w:numFmt w:val="lowerLetter"/></w:lvl></w:abstractNum>
<w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/></w:lvl></w:abstractNum>
<w:num w:numId="5"><w:abstractNumId w:val="0"/></w:num><w:num w:numId="7"><w:abstractNumId w:val="1"/><w:lvlOverride w:ilvl="0"><w:lvl w:ilvl="0"><w:start w:val="9"/></w:lvl></w:lvlOverride></w:num></w:numbering>`
	data := zipOf(t, map[string]string{"word/document.xml": doc, "word/numbering.xml": numbering})
	got := extractOK(t, KindDOCX, data).Parts[0].Text
	want := "1. a\n  1. b\n  2. c\n2. d\n  1. e\n- dot\nnot a list\n- unknown list"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
