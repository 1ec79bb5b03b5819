package document

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"agent/pkg/document/doctest"
	"agent/pkg/nativetest"
)

func TestParsePages(t *testing.T) {
	tests := []struct {
		spec  string
		total int
		want  []int
	}{
		{"", 3, []int{1, 2, 3}},
		{"all", 2, []int{1, 2}},
		{"", 0, []int{}},
		{"3", 5, []int{3}},
		{"1-3", 5, []int{1, 2, 3}},
		{"2-", 5, []int{2, 3, 4, 5}},
		{"-2", 5, []int{1, 2}},
		{"1-3,7", 9, []int{1, 2, 3, 7}},
		{" 7 , 1 - 2 ,2", 9, []int{1, 2, 7}},
		{"1–2，4", 5, []int{1, 2, 4}},
		{"5-5", 5, []int{5}},
		{"1,,2,", 2, []int{1, 2}},
	}
	for _, tt := range tests {
		got, err := ParsePages(tt.spec, tt.total)
		if err != nil || !slices.Equal(got, tt.want) && len(got)+len(tt.want) > 0 {
			t.Errorf("ParsePages(%q, %d) = %v, %v; want %v", tt.spec, tt.total, got, err, tt.want)
		}
	}
}

func TestParsePagesErrors(t *testing.T) {
	tests := []struct {
		spec  string
		total int
		want  string
	}{
		{"9-10", 5, "pages 9-10: the document has 5 pages"},
		{"3-10", 5, "pages 3-10: the document has 5 pages (ask for 3-5)"},
		{"6", 5, "pages 6: the document has 5 pages"},
		{"0", 5, "pages 0: pages are numbered from 1"},
		{"5-3", 5, "pages 5-3: the range runs backwards; write 3-5"},
		{"abc", 5, `pages "abc": write page numbers or ranges such as 3, 1-3, 2- or 1-3,7`},
		{"1-2-3", 5, `pages "1-2-3"`},
		{"-", 5, `pages "-"`},
		{"+1", 5, `pages "+1"`},
		{"99999999999999999999", 5, "write page numbers"},
		{",", 5, "no pages selected"},
		{"1", 0, "pages 1: the document has no pages"},
		{strings.Repeat("1,", 200), 5, "too long"},
	}
	for _, tt := range tests {
		_, err := ParsePages(tt.spec, tt.total)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePages(%q, %d) error = %v; want %q", tt.spec, tt.total, err, tt.want)
		}
	}
}

// pagesDoc is a document of n pages, each "page I" and fill runes of x.
func pagesDoc(n, fill int) *Doc {
	d := &Doc{Kind: KindPDF, Unit: UnitPage}
	for i := range n {
		d.Parts = append(d.Parts, Part{Label: "Page " + itoa(i+1), Text: "page " + itoa(i+1) + "\n" + strings.Repeat("x", fill)})
	}
	return d
}

func TestRenderMarkersAndSelection(t *testing.T) {
	d := pagesDoc(12, 3)
	out, err := Render(d, "3,5", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := "--- Page 3 of 12 ---\npage 3\nxxx\n\n--- Page 5 of 12 ---\npage 5\nxxx"; out != want {
		t.Errorf("got %q\nwant %q", out, want)
	}
	if _, err := Render(d, "13", 0); err == nil || err.Error() != "pages 13: the document has 12 pages" {
		t.Errorf("out of range: %v", err)
	}
	sheets := &Doc{Kind: KindXLSX, Unit: UnitSheet, Parts: []Part{{Label: "Sheet: A", Text: "a"}, {Label: "Sheet: Budget", Text: "b"}}}
	out, _ = Render(sheets, "2", 0)
	if out != "--- Sheet: Budget (2 of 2) ---\nb" {
		t.Errorf("sheet marker: %q", out)
	}
	if _, err := Render(sheets, "3", 0); err == nil || !strings.Contains(err.Error(), "the document has 2 sheets") {
		t.Errorf("sheets error: %v", err)
	}
	flat := &Doc{Kind: KindDOCX, Parts: []Part{{Text: "body"}}}
	if out, err := Render(flat, "1", 0); err != nil || out != "body" {
		t.Errorf("flat with pages 1: %q, %v", out, err)
	}
	if _, err := Render(flat, "2", 0); err == nil || !strings.Contains(err.Error(), "one text without pages") {
		t.Errorf("flat with pages 2: %v", err)
	}
	if out, _ := Render(&Doc{Kind: KindDOCX, Parts: []Part{{}}}, "", 0); out != "(the document has no text)" {
		t.Errorf("empty flat: %q", out)
	}
	if _, err := Render(nil, "", 0); err == nil {
		t.Error("nil document rendered")
	}
}

func TestRenderTruncation(t *testing.T) {
	d := pagesDoc(12, 5000)
	out, err := Render(d, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	body, notice, ok := strings.Cut(out, "\n\n[truncated: ")
	if !ok {
		t.Fatalf("no notice:\n%s", out[len(out)-300:])
	}
	if n := utf8.RuneCountInString(body); n > DefaultMaxChars {
		t.Errorf("shown %d runes, over %d", n, DefaultMaxChars)
	}
	full, _ := Render(d, "", MaxChars)
	left := utf8.RuneCountInString(full) - utf8.RuneCountInString(body)
	if want := thousands(left) + " more characters; ask for pages 4-12 or a larger max_chars (up to 100,000)]"; notice != want {
		t.Errorf("notice %q\nwant    %q", notice, want)
	}
	if !strings.HasPrefix(body, "--- Page 1 of 12 ---\npage 1\n") || !strings.Contains(body, "--- Page 4 of 12 ---") {
		t.Errorf("body does not hold pages 1-4: ...%s", body[len(body)-100:])
	}

	// A cut inside the first page asks for the pages after it.
	out, _ = Render(pagesDoc(3, 30000), "", 1000)
	if !strings.HasSuffix(out, "; ask for pages 2-3 or a larger max_chars (up to 100,000)]") {
		t.Errorf("first page cut: %s", out[len(out)-120:])
	}
	// A selection's rest keeps its gaps; at the limit there is no larger max_chars.
	out, _ = Render(pagesDoc(12, 40000), "1-3,7", MaxChars+5)
	if !strings.HasSuffix(out, "; ask for pages 3,7]") {
		t.Errorf("selection rest: %s", out[len(out)-120:])
	}
	// A flat document.
	flat := &Doc{Kind: KindText, Parts: []Part{{Text: strings.Repeat("字", 500)}}}
	out, _ = Render(flat, "", 100)
	if !strings.HasSuffix(out, "\n\n[truncated: 400 more characters; ask for a larger max_chars (up to 100,000)]") || utf8.RuneCountInString(out) > 200 {
		t.Errorf("flat: %q", out)
	}
	flat.Parts[0] = Part{Text: strings.Repeat("字", MaxChars), Omitted: 7}
	out, _ = Render(flat, "", MaxChars)
	if !strings.HasSuffix(out, "[truncated: 7 more characters were left out when the document was read (over 100,000 characters in one part, or a document too long to read in full)]") {
		t.Errorf("omitted at the limit: %s", out[len(out)-200:])
	}
	// The cut prefers a line break near the end.
	lines := &Doc{Kind: KindText, Parts: []Part{{Text: strings.Repeat("abcdefghi\n", 100)}}}
	out, _ = Render(lines, "", 95)
	if body, _, _ := strings.Cut(out, "\n\n["); !strings.HasSuffix(body, "abcdefghi") {
		t.Errorf("cut not at a line break: %q", out)
	}
}

func TestRenderPartialPDF(t *testing.T) {
	d := &Doc{Kind: KindPDF, Unit: UnitPage, Parts: PDFPages("four\ffive\f", 4), Total: 10}
	out, err := Render(d, "", 0)
	if err != nil || out != "--- Page 4 of 10 ---\nfour\n\n--- Page 5 of 10 ---\nfive" {
		t.Errorf("got %q, %v", out, err)
	}
	if out, err := Render(d, "5", 0); err != nil || out != "--- Page 5 of 10 ---\nfive" {
		t.Errorf("page 5: %q, %v", out, err)
	}
	if _, err := Render(d, "6-7", 0); err == nil || !strings.Contains(err.Error(), "pages 6-7: not extracted") {
		t.Errorf("pages not read: %v", err)
	}
}

func TestPDFPages(t *testing.T) {
	parts := PDFPages("a  \n\n\n\nb\r\n\fsecond\f\f\xff\f", 1)
	want := []Part{
		{Label: "Page 1", Text: "a\n\nb", Number: 1},
		{Label: "Page 2", Text: "second", Number: 2},
		{Label: "Page 3", Text: "", Number: 3},
		{Label: "Page 4", Text: "\uFFFD", Number: 4},
	}
	if !slices.Equal(parts, want) {
		t.Errorf("got %+v\nwant %+v", parts, want)
	}
	if got := PDFPages("", 1); len(got) != 0 {
		t.Errorf("empty output: %+v", got)
	}
	if got := PDFPages(strings.Repeat("p\f", maxUnits+10), 1); len(got) != maxUnits {
		t.Errorf("%d pages kept, want %d", len(got), maxUnits)
	}
	d := &Doc{Kind: KindPDF, Unit: UnitPage, Parts: PDFPages("text\f\f", 1)}
	if out, _ := Render(d, "2", 0); !strings.Contains(out, "no text on this page; it may be a scanned image") {
		t.Errorf("empty page: %q", out)
	}
}

// TestPDFRoundTrip reads a doctest PDF with the real pdftotext, as the
// read_document tool does.
func TestPDFRoundTrip(t *testing.T) {
	pdftotext := nativetest.LookPath(t, "pdftotext", "apt-get install poppler-utils (scripts/deps.sh apt)")
	f := t.TempDir() + "/r.pdf"
	if err := os.WriteFile(f, doctest.PDF([]string{"季度报告 第1页", "第2页\nsecond line", "第3页"}), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(pdftotext, "-enc", "UTF-8", "-f", "2", "-l", "3", f, "-").Output()
	if err != nil {
		t.Fatal(err)
	}
	d := &Doc{Kind: KindPDF, Unit: UnitPage, Parts: PDFPages(string(out), 2), Total: 3}
	got, err := Render(d, "2-3", 0)
	if err != nil || got != "--- Page 2 of 3 ---\n第2页\nsecond line\n\n--- Page 3 of 3 ---\n第3页" {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 41200: "41,200", 1234567: "1,234,567", -1500: "-1,500"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q", n, got)
		}
	}
}
