package document

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"agent/pkg/document/doctest"
)

// zipOf packs files (name -> content) into a zip archive, in name order,
// deflated.
func zipOf(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, files[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bombStream returns a raw deflate stream of prefix followed by mib MiB of
// the byte fill, without compressing all of it: one flushed (so byte
// aligned) MiB repeated, then an empty final block.
func bombStream(t testing.TB, prefix string, fill byte, mib int) []byte {
	t.Helper()
	deflate := func(data []byte) []byte {
		var b bytes.Buffer
		fw, err := flate.NewWriter(&b, flate.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(data)
		fw.Flush()
		return b.Bytes()
	}
	out := deflate([]byte(prefix))
	one := deflate(bytes.Repeat([]byte{fill}, 1<<20))
	for range mib {
		out = append(out, one...)
	}
	return append(out, 0x01, 0x00, 0x00, 0xff, 0xff) // final empty stored block
}

// zipWithRaw is zipOf plus one entry whose deflated bytes and declared
// unpacked size are given.
func zipWithRaw(t testing.TB, files map[string]string, name string, raw []byte, declared uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for n, body := range files {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, body)
	}
	w, err := zw.CreateRaw(&zip.FileHeader{Name: name, Method: zip.Deflate, CompressedSize64: uint64(len(raw)), UncompressedSize64: declared})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(raw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// docxRels are the package parts of a DOCX around word/document.xml.
var docxRels = map[string]string{
	"[Content_Types].xml": `<Types/>`,
	"_rels/.rels":         `<Relationships><Relationship Id="rId1" Type="x/officeDocument" Target="word/document.xml"/></Relationships>`,
}

func TestZipBomb(t *testing.T) {
	const prefix = `<w:document xmlns:w="urn:w"><w:body><w:p><w:r><w:t>`
	raw := bombStream(t, prefix, 'a', 1024) // 1 GiB of "a" in about 1 MiB
	if len(raw) > 4<<20 {
		t.Fatalf("bomb is %d bytes compressed", len(raw))
	}
	t.Run("declared", func(t *testing.T) {
		data := zipWithRaw(t, docxRels, "word/document.xml", raw, uint64(len(prefix))+1<<30)
		_, err := Extract(context.Background(), KindDOCX, data)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "too large when unpacked") {
			t.Fatalf("want a too-large error, got %v", err)
		}
	})
	t.Run("size understated", func(t *testing.T) {
		// The archive claims 4 KiB: reading stops there, as damaged.
		data := zipWithRaw(t, docxRels, "word/document.xml", raw, 4096)
		if _, err := Extract(context.Background(), KindDOCX, data); err == nil {
			t.Fatal("a lying archive was read without error")
		}
	})
	t.Run("zeros", func(t *testing.T) {
		data := zipWithRaw(t, docxRels, "word/document.xml", bombStream(t, "", 0, 1024), 1<<30)
		if _, err := Extract(context.Background(), KindDOCX, data); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("want ErrTooLarge, got %v", err)
		}
	})
}

func TestUnpackedTotalLimit(t *testing.T) {
	big := strings.Repeat("<row><c><v>1</v></c></row>", 20000) // ~500 KB a sheet
	var sheets []doctest.Sheet
	for range 3 {
		sheets = append(sheets, doctest.Sheet{Name: "S", Rows: [][]string{{"x"}}})
	}
	data := doctest.XLSX(sheets)
	_ = big
	lim := defaultLimits
	lim.totalBytes = 2000 // the workbook, rels and styles fit; the sheets do not
	_, err := extract(context.Background(), KindXLSX, data, lim)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "too large when unpacked") {
		t.Fatalf("want the total limit, got %v", err)
	}

	// The counting reader stops an entry that unpacks past what it
	// declared, or past the archive's total.
	a := &archive{lim: limits{totalBytes: 150}}
	r := &boundedReader{rc: io.NopCloser(strings.NewReader(strings.Repeat("x", 200))), a: a, name: "part", limit: 100}
	if _, err := io.ReadAll(r); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("entry limit: %v", err)
	}
	r = &boundedReader{rc: io.NopCloser(strings.NewReader(strings.Repeat("x", 90))), a: a, name: "part", limit: 100}
	if _, err := io.ReadAll(r); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "in all") {
		t.Fatalf("total limit: %v", err)
	}
}

func TestTooManyEntries(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range 10001 {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: "f" + itoa(i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	zw.Close()
	for _, kind := range []string{KindDOCX, KindXLSX, KindPPTX} {
		_, err := Extract(context.Background(), kind, buf.Bytes())
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 10,000 entries") {
			t.Errorf("%s: want a too-many-entries error, got %v", kind, err)
		}
	}
}

func TestMalformed(t *testing.T) {
	tests := []struct {
		name string
		kind string
		data []byte
		want string
	}{
		{"docx not a zip", KindDOCX, []byte("This is plain text named .docx"), "not a zip archive"},
		{"xlsx empty", KindXLSX, nil, "not a zip archive"},
		{"pdf named docx", KindDOCX, doctest.PDF([]string{"x"}), "the file is a PDF (.pdf) (named wrongly)"},
		{"old or encrypted", KindXLSX, []byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"), "password-protected"},
		{"damaged zip", KindPPTX, []byte("PK\x03\x04 and then nothing"), "damaged"},
		{"docx without document", KindDOCX, zipOf(t, map[string]string{"a.txt": "x"}), "no word/document.xml"},
		{"xlsx without workbook", KindXLSX, zipOf(t, map[string]string{"a.txt": "x"}), "no xl/workbook.xml"},
		{"word named xlsx", KindXLSX, doctest.DOCX([]string{"x"}, nil), "the file is a Word document (.docx)"},
		{"excel named pptx", KindPPTX, doctest.XLSX(nil), "the file is an Excel workbook (.xlsx)"},
		{"other root", KindDOCX, zipOf(t, map[string]string{"word/document.xml": `<html/>`}), "holds <html>, not <document>"},
		{"unclosed", KindDOCX, zipOf(t, map[string]string{"word/document.xml": `<w:document xmlns:w="urn:w"><w:body><w:p><w:r><w:t>hi`}), "not well-formed"},
		{"mismatched", KindDOCX, zipOf(t, map[string]string{"word/document.xml": `<w:document xmlns:w="urn:w"><b></w:document></b>`}), "not well-formed"},
		{"bad rels", KindDOCX, zipOf(t, map[string]string{"_rels/.rels": `<Relationships><Relationship`, "word/document.xml": `<a/>`}), "not well-formed"},
		{"utf-16 declared", KindDOCX, zipOf(t, map[string]string{"word/document.xml": `<?xml version="1.0" encoding="UTF-16"?><a/>`}), "encoding"},
		{"sheet malformed", KindXLSX, zipOf(t, map[string]string{
			"xl/workbook.xml":            `<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="A" r:id="r1"/></sheets></workbook>`,
			"xl/_rels/workbook.xml.rels": `<Relationships><Relationship Id="r1" Type="x/worksheet" Target="worksheets/sheet1.xml"/></Relationships>`,
			"xl/worksheets/sheet1.xml":   `<worksheet><sheetData><row><c><v>1</c></row>`,
		}), "sheet1.xml is not well-formed"},
		{"no sheets", KindXLSX, zipOf(t, map[string]string{"xl/workbook.xml": `<workbook/>`}), "lists no sheets"},
		{"deep", KindDOCX, zipOf(t, map[string]string{"word/document.xml": "<document>" + strings.Repeat("<x>", 300) + strings.Repeat("</x>", 300) + "</document>"}), "deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Extract(context.Background(), tt.kind, tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("want an error saying %q, got %v (%+v)", tt.want, err, d)
			}
			if !strings.HasPrefix(err.Error(), tt.kind+": ") {
				t.Errorf("error does not name the kind: %v", err)
			}
		})
	}
}

func TestMissingAndEscapingParts(t *testing.T) {
	data := zipOf(t, map[string]string{
		"xl/workbook.xml": `<workbook xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets>` +
			`<sheet name="Out" r:id="r1"/><sheet name="Gone" r:id="r2"/><sheet name="Chart" r:id="r3"/><sheet name="NoRel"/></sheets></workbook>`,
		"xl/_rels/workbook.xml.rels": `<Relationships><Relationship Id="r1" Type="x/worksheet" Target="../../../etc/passwd"/>` +
			`<Relationship Id="r2" Type="x/worksheet" Target="worksheets/none.xml"/><Relationship Id="r3" Type="x/chartsheet" Target="chartsheets/sheet1.xml"/></Relationships>`,
	})
	d := extractOK(t, KindXLSX, data)
	want := []string{"(this sheet's cells are missing from the file)", "(this sheet's cells are missing from the file)", "(a chart sheet: it has no cells)", "(this sheet's cells are missing from the file)"}
	for i, p := range d.Parts {
		if p.Text != want[i] {
			t.Errorf("sheet %d = %q, want %q", i+1, p.Text, want[i])
		}
	}
	if resolve("xl/", "../../../etc/passwd") != "etc/passwd" || resolve("", "/a/../../b") != "b" || resolve("ppt/slides/", "../media/x.png") != "ppt/media/x.png" {
		t.Error("resolve")
	}
}

func TestTokenBudgetKeepsWhatWasRead(t *testing.T) {
	var paras []string
	for i := range 500 {
		paras = append(paras, "paragraph "+itoa(i))
	}
	lim := defaultLimits
	lim.xmlTokens = 1000
	d, err := extract(context.Background(), KindDOCX, doctest.DOCX(paras, nil), lim)
	if err != nil {
		t.Fatal(err)
	}
	p := d.Parts[0]
	if !p.Unfinished || !strings.Contains(p.Text, "paragraph 0\n") || strings.Contains(p.Text, "paragraph 499") {
		t.Fatalf("want a partial, unfinished text; got unfinished=%v, %d runes", p.Unfinished, utf8.RuneCountInString(p.Text))
	}
	out, err := Render(d, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "\n\n[truncated: reading stopped at a size limit for one file; the rest of the document cannot be shown]")
}

func TestDocumentBudget(t *testing.T) {
	var slides []string
	for i := range 20 {
		slides = append(slides, "Slide "+itoa(i+1)+"\n"+strings.Repeat("文", 1000))
	}
	lim := defaultLimits
	lim.docRunes, lim.partRunes = 5000, 3000
	d, err := extract(context.Background(), KindPPTX, doctest.PPTX(slides), lim)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, p := range d.Parts {
		kept += utf8.RuneCountInString(p.Text)
	}
	if kept > 5000 || d.Parts[19].Text != "" || d.Parts[19].Omitted < 1000 {
		t.Fatalf("kept %d runes; last slide %+v", kept, d.Parts[19])
	}
	out, err := Render(d, "20", 0)
	if err != nil {
		t.Fatal(err)
	}
	contains(t, out, "--- Slide 20 of 20 ---\n(not extracted: the document is too long to read in full)", "[truncated: 1,012 more characters")
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		kind string
		data []byte
	}{
		{KindDOCX, doctest.DOCX([]string{"x"}, nil)},
		{KindXLSX, doctest.XLSX(nil)},
		{KindCSV, []byte("a,b\n")},
		{KindHTML, []byte("<p>x</p>")},
	} {
		if _, err := Extract(ctx, c.kind, c.data); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: want context.Canceled, got %v", c.kind, err)
		}
	}
}

func TestFileTooLarge(t *testing.T) {
	_, err := Extract(context.Background(), KindText, make([]byte, MaxFileBytes+1))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "50.0 MiB") {
		t.Fatalf("got %v", err)
	}
}

// Sheets past the document's budget build no cell text at all, however
// many cells name a long shared string.
func TestXLSXSheetsPastBudget(t *testing.T) {
	long := strings.Repeat("表", 2000)
	row := make([]string, 50)
	for i := range row {
		row[i] = long
	}
	var sheets []doctest.Sheet
	for i := range 40 {
		sheets = append(sheets, doctest.Sheet{Name: "S" + itoa(i), Rows: [][]string{row, row, row}})
	}
	lim := defaultLimits
	lim.partRunes, lim.docRunes = 5000, 12000
	d, err := extract(context.Background(), KindXLSX, doctest.XLSX(sheets), lim)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for i, p := range d.Parts {
		kept += utf8.RuneCountInString(p.Text)
		if i >= 3 && (p.Text != "" || !p.Unfinished) {
			t.Fatalf("sheet %d past the budget: %d runes, unfinished %v", i+1, utf8.RuneCountInString(p.Text), p.Unfinished)
		}
	}
	if kept > lim.docRunes {
		t.Fatalf("kept %d runes", kept)
	}
}

// One tag with a million attributes would cost a tokenizer hundreds of MB;
// it is refused before any is read. A page of many ordinary tags reads.
func TestTagWithTooManyAttributes(t *testing.T) {
	var b strings.Builder
	b.WriteString("<html><body><div ")
	for i := 0; b.Len() < 4<<20; i++ {
		fmt.Fprintf(&b, "a%d ", i)
	}
	b.WriteString(">x</div></body></html>")
	if _, err := Extract(context.Background(), KindHTML, []byte(b.String())); !errors.Is(err, ErrHostileHTML) {
		t.Fatalf("got %v, want ErrHostileHTML", err)
	}
	ok := strings.Repeat(`<p class="a" id="b" data-x='1 2 3' title="x > y">text</p>`, 20000)
	if _, err := Extract(context.Background(), KindHTML, []byte(ok)); err != nil {
		t.Fatal(err)
	}
}

func TestHTMLShape(t *testing.T) {
	cases := []struct {
		in   string
		want Shape
	}{
		{`<div><p>a</p><br><img src="x"><span/></div>`, Shape{Depth: 2, Elements: 7, Attrs: 1, MaxTagAttrs: 1}},
		{`</p></p></p>`, Shape{Depth: 0, Elements: 3}},
		{`<svg><style><g/><g/></style></svg>`, Shape{Depth: 2, Elements: 6}},
		{`<a x=">" b c d>`, Shape{Depth: 1, Elements: 1, Attrs: 4, MaxTagAttrs: 4}},
		{`a < b and c <3 d`, Shape{}},
		{`<div><div><div>`, Shape{Depth: 3, Elements: 3}},
	}
	for _, c := range cases {
		if got := HTMLShape(c.in); got != c.want {
			t.Errorf("HTMLShape(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}
