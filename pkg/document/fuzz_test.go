package document

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"agent/pkg/document/doctest"
)

// fuzzKinds are the kinds FuzzExtract reads, chosen by its first argument.
var fuzzKinds = []string{KindDOCX, KindXLSX, KindPPTX, KindCSV, KindHTML, KindText, KindMarkdown}

// stored repacks a zip archive without compression, so that the fuzzer's
// changes reach the XML instead of breaking the deflate stream.
func stored(t testing.TB, data []byte) []byte {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(w, rc)
		rc.Close()
	}
	zw.Close()
	return buf.Bytes()
}

// fuzzLimits are small limits, so that the fuzzer reaches them.
func fuzzLimits() limits {
	lim := defaultLimits
	lim.entryBytes, lim.totalBytes, lim.smallBytes = 1<<20, 2<<20, 1<<20
	lim.xmlTokens, lim.xmlDepth = 100000, 64
	lim.partRunes, lim.docRunes = 2000, 5000
	lim.rows, lim.cols, lim.cellRunes = 20, 8, 50
	return lim
}

// FuzzExtract feeds arbitrary bytes to every extractor: no panic, and the
// text kept stays within the limits and is valid UTF-8.
func FuzzExtract(f *testing.F) {
	docx := doctest.DOCX([]string{"# 标题", "正文\t制表\n换行"}, [][]string{{"a", "b"}, {"1"}})
	xlsx := doctest.XLSX([]doctest.Sheet{{Name: "表", Rows: [][]string{{"x", "1.5"}, {"", "y"}}}, {Name: "B"}})
	pptx := doctest.PPTX([]string{"标题\n要点", "第二页"})
	for i, seed := range [][]byte{docx, xlsx, pptx} {
		f.Add(uint8(i), seed)
		f.Add(uint8(i), stored(f, seed))
	}
	f.Add(uint8(3), []byte("a,b\n\"c\"\"d\",e\n"))
	f.Add(uint8(3), []byte("x\ty\n1\t2\n"))
	f.Add(uint8(4), []byte(`<meta charset="gbk"><table><tr><td>a<td>b<tr><td><h1>x</h1></table><ul><li>i<ol><li>j</ol></ul><pre> p </pre><script>s</script>`))
	// A <meta> content whose lower-casing changes its length (found by
	// web_fetch's fuzzing: it panicked).
	f.Add(uint8(4), []byte("<metA http-equiv=\"Content-TYpe\"Content=\xcaChArset=0>"))
	f.Add(uint8(5), []byte("\xff\xfeh\x00i\x00"))
	f.Add(uint8(6), []byte("\xc4\xe3\xba\xc3"))
	lim := fuzzLimits()
	f.Fuzz(func(t *testing.T, k uint8, data []byte) {
		kind := fuzzKinds[int(k)%len(fuzzKinds)]
		d, err := extract(context.Background(), kind, data, lim)
		if err != nil {
			if d != nil {
				t.Fatalf("a document with an error: %+v", d)
			}
			return
		}
		total := 0
		for _, p := range d.Parts {
			n := utf8.RuneCountInString(p.Text)
			// A notice ("(showing the first ... rows ...)") may follow a
			// full part; it is short.
			if n > lim.partRunes || p.Omitted < 0 {
				t.Fatalf("part %q keeps %d runes (limit %d), omitted %d", p.Label, n, lim.partRunes, p.Omitted)
			}
			if !utf8.ValidString(p.Text) || !utf8.ValidString(p.Label) {
				t.Fatalf("invalid UTF-8 in %q", p.Label)
			}
			total += n
		}
		if total > lim.docRunes {
			t.Fatalf("the document keeps %d runes, over %d", total, lim.docRunes)
		}
		out, err := Render(d, "", 500)
		if err != nil {
			t.Fatalf("Render: %v", err)
		}
		if body, _, _ := strings.Cut(out, "\n\n[truncated: "); utf8.RuneCountInString(body) > 500 {
			t.Fatalf("Render returned %d runes before its notice", utf8.RuneCountInString(body))
		}
	})
}

// FuzzParsePages checks that any selection parses to ascending pages of
// the document, or to an error, and that Render agrees.
func FuzzParsePages(f *testing.F) {
	for _, s := range []string{"", "3", "1-3", "2-", "-2", "1-3,7", "0", "9-10", "5-3", "a", "1–2，4", ",", "1-2-3", "99999999999"} {
		f.Add(s, 5)
	}
	f.Add("1-", 0)
	f.Add("2", 1<<21)
	f.Fuzz(func(t *testing.T, spec string, total int) {
		total %= 2000 // ParsePages allocates per page; keep runs fast
		got, err := ParsePages(spec, total)
		if err != nil {
			if got != nil {
				t.Fatalf("pages and an error: %v, %v", got, err)
			}
			if !strings.HasPrefix(err.Error(), "pages") {
				t.Fatalf("error does not name the argument: %v", err)
			}
			return
		}
		for i, n := range got {
			if n < 1 || n > total || i > 0 && n <= got[i-1] {
				t.Fatalf("ParsePages(%q, %d) = %v", spec, total, got)
			}
		}
		if total > 0 && total <= 50 {
			d := pagesDoc(total, 10)
			out, err := Render(d, spec, 0)
			if err != nil {
				t.Fatalf("Render refused what ParsePages took: %v", err)
			}
			if c := strings.Count(out, "--- Page "); c != len(got) {
				t.Fatalf("Render showed %d pages, want %d", c, len(got))
			}
		}
	})
}
