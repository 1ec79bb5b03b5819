package doctest

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"agent/pkg/nativetest"
)

// popplerFix is how to install pdftotext and pdfinfo.
const popplerFix = "apt-get install poppler-utils (scripts/deps.sh apt)"

// writeTemp writes data to a file named name in a fresh folder.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPDFExtractsWithPoppler(t *testing.T) {
	pdftotext := nativetest.LookPath(t, "pdftotext", popplerFix)
	pdfinfo := nativetest.LookPath(t, "pdfinfo", popplerFix)
	pages := []string{
		"季度报告 第1页\nRevenue grew 12% (Q3)",
		"",
		"第3页 <tag> & \\back(slash)\n\n摘要：增长",
	}
	f := writeTemp(t, "report.pdf", PDF(pages))

	out, err := exec.Command(pdfinfo, f).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^Pages:\s+3$`).Match(out) {
		t.Fatalf("pdfinfo does not say Pages: 3:\n%s", out)
	}

	out, err = exec.Command(pdftotext, "-enc", "UTF-8", f, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	got := strings.Split(string(out), "\f")
	if len(got) != 4 || strings.TrimSpace(got[3]) != "" {
		t.Fatalf("pdftotext gave %d form-feed separated pieces, want 3 pages and an empty end: %q", len(got), out)
	}
	for i, want := range [][]string{
		{"季度报告 第1页", "Revenue grew 12% (Q3)"},
		nil,
		{"第3页 <tag> & \\back(slash)", "摘要：增长"},
	} {
		for _, w := range want {
			if !strings.Contains(got[i], w) {
				t.Errorf("page %d: %q does not contain %q", i+1, got[i], w)
			}
		}
		if want == nil && strings.TrimSpace(got[i]) != "" {
			t.Errorf("page %d should be empty: %q", i+1, got[i])
		}
	}
	if lines := strings.Split(strings.TrimSpace(got[0]), "\n"); len(lines) != 2 {
		t.Errorf("page 1: want 2 lines, got %q", lines)
	}
}

func TestPDFTallPageKeepsEveryLine(t *testing.T) {
	pdftotext := nativetest.LookPath(t, "pdftotext", popplerFix)
	var lines []string
	for i := range 120 {
		lines = append(lines, "行 line "+strings.Repeat("x", i%7)+string(rune('A'+i%26)))
	}
	f := writeTemp(t, "tall.pdf", PDF([]string{strings.Join(lines, "\n")}))
	out, err := exec.Command(pdftotext, "-enc", "UTF-8", f, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	if n := strings.Count(string(out), "行 line"); n != len(lines) {
		t.Fatalf("pdftotext found %d of %d lines", n, len(lines))
	}
}

// parts unzips a package, checking that every part is well-formed XML and
// that the package has content types and relationships.
func parts(t *testing.T, data []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(bytes.NewReader(b))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s is not well-formed: %v\n%s", f.Name, err, b)
			}
		}
		out[f.Name] = string(b)
	}
	for _, want := range []string{"[Content_Types].xml", "_rels/.rels"} {
		if _, ok := out[want]; !ok {
			t.Fatalf("the package lacks %s", want)
		}
	}
	// Every part but the content types is named there (by extension
	// default or override), and every relationship target exists.
	ct := out["[Content_Types].xml"]
	for name := range out {
		if name == "[Content_Types].xml" || strings.HasSuffix(name, ".rels") {
			continue
		}
		if !strings.Contains(ct, `PartName="/`+name+`"`) {
			t.Errorf("%s has no content type override", name)
		}
	}
	target := regexp.MustCompile(`Target="([^"]+)"`)
	for name, body := range out {
		if !strings.HasSuffix(name, ".rels") {
			continue
		}
		dir := filepath.Dir(filepath.Dir(name)) // the source part's folder
		for _, m := range target.FindAllStringSubmatch(body, -1) {
			p := filepath.ToSlash(filepath.Clean(filepath.Join(dir, m[1])))
			if _, ok := out[p]; !ok {
				t.Errorf("%s names %s (%s), which is missing", name, m[1], p)
			}
		}
	}
	return out
}

func TestDOCXPackage(t *testing.T) {
	p := parts(t, DOCX([]string{"# 季度报告", "收入 <增长> & 12%\n第二行\t制表"}, [][]string{{"地区", "收入"}, {"华东"}}))
	doc := p["word/document.xml"]
	for _, want := range []string{`<w:pStyle w:val="Heading1"/>`, "季度报告", "收入 &lt;增长&gt; &amp; 12%", "<w:br/>", "<w:tab/>", "<w:tbl>", "华东"} {
		if !strings.Contains(doc, want) {
			t.Errorf("document.xml lacks %q", want)
		}
	}
	// Every row has as many cells as the grid.
	if n := strings.Count(doc, "<w:tc>"); n != 4 {
		t.Errorf("want 4 cells (2x2, the short row padded), got %d", n)
	}
}

func TestXLSXPackage(t *testing.T) {
	p := parts(t, XLSX([]Sheet{
		{Name: "预算", Rows: [][]string{{"项目", "金额"}, {"房租", "1200.5"}, {"", "007"}}},
		{Name: "B&C"},
	}))
	s1 := p["xl/worksheets/sheet1.xml"]
	for _, want := range []string{`<c r="A1" t="s"><v>0</v></c>`, `<c r="B2"><v>1200.5</v></c>`, `<c r="B3" t="s">`} {
		if !strings.Contains(s1, want) {
			t.Errorf("sheet1.xml lacks %s:\n%s", want, s1)
		}
	}
	if strings.Contains(s1, `r="A3"`) {
		t.Error("an empty cell was written")
	}
	if !strings.Contains(p["xl/workbook.xml"], `name="B&amp;C"`) {
		t.Errorf("workbook.xml: %s", p["xl/workbook.xml"])
	}
	if !strings.Contains(p["xl/sharedStrings.xml"], "<t xml:space=\"preserve\">007</t>") {
		t.Errorf("007 should be a shared string: %s", p["xl/sharedStrings.xml"])
	}
}

func TestPPTXPackage(t *testing.T) {
	p := parts(t, PPTX([]string{"季度报告\n收入增长\n\n下一步", "Only a title"}))
	s1 := p["ppt/slides/slide1.xml"]
	for _, want := range []string{`<p:ph type="title"/>`, "<a:t>季度报告</a:t>", "<a:t>下一步</a:t>"} {
		if !strings.Contains(s1, want) {
			t.Errorf("slide1.xml lacks %s", want)
		}
	}
	if !strings.Contains(p["ppt/presentation.xml"], `<p:sldId id="257" r:id="rId3"/>`) {
		t.Errorf("presentation.xml: %s", p["ppt/presentation.xml"])
	}
}

func TestIsNumber(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "12": true, "-3.5": true, "1e-3": true, "2E+10": true, "0.25": true,
		"": false, "007": false, "1.": false, ".5": false, "1,000": false, "12%": false,
		"NaN": false, "Inf": false, "0x10": false, "+1": false, "1e": false, "--1": false,
	} {
		if got := isNumber(s); got != want {
			t.Errorf("isNumber(%q) = %v, want %v", s, got, want)
		}
	}
}
