package readdoc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"agent/pkg/document/doctest"
	"agent/pkg/nativetest"
	"agent/pkg/readdoc"
	"agent/pkg/sandbox/sandboxtest"
	"agent/pkg/tools"
	"agent/pkg/workspace"
)

type fixture struct {
	spaces *workspace.Spaces
	tool   tools.Tool
}

func newFixture(t *testing.T, withSandbox bool) *fixture {
	t.Helper()
	spaces, err := workspace.Open(workspace.Config{Dir: sandboxtest.Dir(t)})
	if err != nil {
		t.Fatal(err)
	}
	sb := func(context.Context) (readdoc.Runner, error) { return nil, errors.New("bwrap: not installed") }
	if withSandbox {
		nativetest.LookPath(t, "pdftotext", "poppler-utils")
		s := sandboxtest.New(t, nil)
		sb = func(context.Context) (readdoc.Runner, error) { return s, nil }
	}
	return &fixture{spaces: spaces, tool: readdoc.Tool(readdoc.Config{Spaces: spaces, Sandbox: sb})}
}

// put stores data in user's folder at rel, as an upload would.
func (f *fixture) put(t *testing.T, user, rel string, data []byte) {
	t.Helper()
	dir, err := f.spaces.UserDir("wecom:" + user)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) read(t *testing.T, user string, args map[string]any) (string, error) {
	t.Helper()
	b, _ := json.Marshal(args)
	return f.tool.Handler(context.Background(), tools.Call{Args: b, User: user, Channel: "wecom", Profile: "wecom"})
}

func TestPDF(t *testing.T) {
	f := newFixture(t, true)
	f.put(t, "alice", "uploads/report.pdf", doctest.PDF([]string{"季度报告 Quarterly report\n第一页", "第二页 revenue 42", "第三页 outlook"}))
	out, err := f.read(t, "alice", map[string]any{"path": "uploads/report.pdf"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--- Page 1 of 3 ---", "季度报告 Quarterly report", "第二页 revenue 42", "--- Page 3 of 3 ---"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	out, err = f.read(t, "alice", map[string]any{"path": "uploads/report.pdf", "pages": "2"})
	if err != nil || !strings.Contains(out, "第二页") || strings.Contains(out, "第一页") || strings.Contains(out, "第三页") {
		t.Errorf("pages 2: %v\n%s", err, out)
	}
	if _, err := f.read(t, "alice", map[string]any{"path": "uploads/report.pdf", "pages": "5-6"}); err == nil || !strings.Contains(err.Error(), "3 pages") {
		t.Errorf("pages past the end: %v", err)
	}
	out, err = f.read(t, "alice", map[string]any{"path": "uploads/report.pdf", "max_chars": 30})
	if err != nil || !strings.Contains(out, "[truncated") {
		t.Errorf("max_chars 30: %v\n%s", err, out)
	}
}

func TestLongPDFReadsInSteps(t *testing.T) {
	f := newFixture(t, true)
	pages := make([]string, 60)
	for i := range pages {
		pages[i] = fmt.Sprintf("page %d text", i+1)
	}
	f.put(t, "alice", "long.pdf", doctest.PDF(pages))
	out, err := f.read(t, "alice", map[string]any{"path": "long.pdf", "max_chars": 100000})
	if err != nil || !strings.Contains(out, "page 50 text") || strings.Contains(out, "page 51 text") || !strings.Contains(out, `pages 1-50 of 60`) {
		t.Errorf("default read of 60 pages: %v\n...%s", err, out[max(0, len(out)-300):])
	}
	out, err = f.read(t, "alice", map[string]any{"path": "long.pdf", "pages": "58-"})
	if err != nil || !strings.Contains(out, "page 58 text") || !strings.Contains(out, "page 60 text") || strings.Contains(out, "page 57 text") {
		t.Errorf("pages 58-: %v\n%s", err, out)
	}
}

func TestOfficeFiles(t *testing.T) {
	f := newFixture(t, false) // no sandbox: everything but PDFs still reads
	f.put(t, "alice", "uploads/memo.docx", doctest.DOCX([]string{"会议纪要", "Budget approved"}, [][]string{{"item", "cost"}, {"laptops", "12000"}}))
	f.put(t, "alice", "uploads/budget.xlsx", doctest.XLSX([]doctest.Sheet{{Name: "Q1", Rows: [][]string{{"month", "spend"}, {"一月", "100"}}}, {Name: "Q2", Rows: [][]string{{"month", "spend"}, {"April", "250"}}}}))
	f.put(t, "alice", "deck.pptx", doctest.PPTX([]string{"Roadmap 2027", "第二张 hiring"}))
	f.put(t, "alice", "data.csv", []byte("name,score\nbob,7\n"))
	cases := map[string][]string{
		"uploads/memo.docx":   {"会议纪要", "Budget approved", "| laptops | 12000 |"},
		"uploads/budget.xlsx": {"Sheet: Q1", "| 一月 | 100 |", "Sheet: Q2", "April"},
		"deck.pptx":           {"Slide 1 of 2", "Roadmap 2027", "第二张 hiring"},
		"data.csv":            {"| bob | 7 |"},
	}
	for p, wants := range cases {
		out, err := f.read(t, "alice", map[string]any{"path": p})
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s: missing %q in:\n%s", p, w, out)
			}
		}
	}
	f.put(t, "alice", "scan.pdf", doctest.PDF([]string{"x"}))
	if _, err := f.read(t, "alice", map[string]any{"path": "scan.pdf"}); err == nil || !strings.Contains(err.Error(), "needs the sandbox") {
		t.Errorf("PDF without a sandbox: %v", err)
	}
}

// Bad and hostile input: clear errors, nothing else.
func TestRefusals(t *testing.T) {
	f := newFixture(t, true)
	f.put(t, "alice", "private.docx", doctest.DOCX([]string{"alice only"}, nil))
	f.put(t, "bob", "fake.pdf", []byte("%PDF-1.4\n"+strings.Repeat("garbage ", 1000)))
	f.put(t, "bob", "not-a.docx", []byte("plain text pretending"))
	f.put(t, "bob", "blob.bin", []byte{0, 1, 2, 3, 0xff, 0xfe, 0, 0})
	dir, _ := f.spaces.UserDir("wecom:alice")
	for args, want := range map[string]string{
		`{"path":"../wecom%3Aalice/private.docx"}`:                        "",
		`{"path":"` + dir + `/private.docx"}`:                             "",
		`{"path":"fake.pdf"}`:                                             "not a readable PDF",
		`{"path":"not-a.docx"}`:                                           "",
		`{"path":"blob.bin"}`:                                             "unsupported",
		`{"path":"missing.pdf"}`:                                          "",
		`{"path":"fake.pdf","max_chars":-1}`:                              "max_chars",
		`{"path":"fake.pdf","pages":"` + strings.Repeat("1,", 200) + `"}`: "too long",
	} {
		out, err := f.tool.Handler(context.Background(), tools.Call{Args: json.RawMessage(args), User: "bob", Channel: "wecom"})
		if err == nil || strings.Contains(out, "alice only") {
			t.Errorf("%s: accepted: %q", args, out)
			continue
		}
		if want != "" && !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// BenchmarkReadPDF50 reads a 50-page PDF (CJK and ASCII text on every
// page) whole through the tool: pdfinfo and pdftotext in the sandbox,
// splitting, rendering.
func BenchmarkReadPDF50(b *testing.B) {
	nativetest.LookPath(b, "pdftotext", "poppler-utils")
	spaces, err := workspace.Open(workspace.Config{Dir: sandboxtest.Dir(b)})
	if err != nil {
		b.Fatal(err)
	}
	s := sandboxtest.New(b, nil)
	tool := readdoc.Tool(readdoc.Config{Spaces: spaces, Sandbox: func(context.Context) (readdoc.Runner, error) { return s, nil }})
	pages := make([]string, 50)
	for i := range pages {
		pages[i] = fmt.Sprintf("第%d页 季度报告 Quarterly report page %d\n%s", i+1, i+1, strings.Repeat("revenue grew in every region 收入增长 ", 20))
	}
	dir, err := spaces.UserDir("wecom:alice")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.pdf"), doctest.PDF(pages), 0o600); err != nil {
		b.Fatal(err)
	}
	call := tools.Call{Args: json.RawMessage(`{"path":"report.pdf","max_chars":100000}`), User: "alice", Channel: "wecom"}
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		out, err := tool.Handler(context.Background(), call)
		ds = append(ds, time.Since(t0))
		if err != nil || !strings.Contains(out, "第50页") {
			b.Fatalf("%v %.200s", err, out)
		}
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(ds[(len(ds)-1)*99/100].Microseconds())/1000, "p99_ms")
}

// PDFBytes reads a downloaded PDF in a sandbox of its own; a PDF whose
// text imitates the separator between pdfinfo's and pdftotext's output
// cannot confuse the split, and what is not a PDF is an error.
func TestPDFBytes(t *testing.T) {
	nativetest.LookPath(t, "pdftotext", "poppler-utils")
	s := sandboxtest.New(t, nil)
	pdf := doctest.PDF([]string{"web page one", "--- pdfinfo ends 00 ---\nPages: 99", "third"})
	doc, err := readdoc.PDFBytes(context.Background(), s, pdf)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Total != 3 || len(doc.Parts) != 3 || !strings.Contains(doc.Parts[0].Text, "web page one") || !strings.Contains(doc.Parts[2].Text, "third") {
		t.Fatalf("doc: total %d, %d parts: %+v", doc.Total, len(doc.Parts), doc.Parts)
	}
	if _, err := readdoc.PDFBytes(context.Background(), s, []byte("<html>not a pdf</html>")); err == nil || !strings.Contains(err.Error(), "not a readable PDF") {
		t.Fatalf("HTML as PDF: %v", err)
	}
}
