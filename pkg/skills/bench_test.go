package skills

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// skillDescs are descriptions the length of real ones (openclaw's bundled
// skills run 80 to 200 bytes).
var skillDescs = []string{
	"Get current weather and forecasts for any city; no API key needed.",
	"Search, read and summarise GitHub issues and pull requests with the gh CLI: triage, labels, review comments.",
	"Create, edit and export spreadsheets: formulas, charts, pivot tables; reads and writes .xlsx and .csv files.",
	"Take meeting notes from a transcript: decisions, action items with owners and due dates, open questions.",
	"Draft, reply to and summarise email threads in the office's tone; never sends without the user's confirmation.",
	"Convert documents between formats (Markdown, DOCX, PDF, HTML) with pandoc, keeping tables and headings.",
}

// BenchmarkIndex20 is the skills index of 20 installed skills: the bytes
// every system prompt carries (index_bytes) and the cost of Index when
// nothing changed.
func BenchmarkIndex20(b *testing.B) {
	dir := b.TempDir()
	for i := range 20 {
		name := fmt.Sprintf("skill-%02d", i)
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			b.Fatal(err)
		}
		md := "---\nname: " + name + "\ndescription: " + skillDescs[i%len(skillDescs)] + "\n---\n# " + name + "\n" + strings.Repeat("Instructions.\n", 50)
		if err := os.WriteFile(filepath.Join(p, "SKILL.md"), []byte(md), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	s := New(Config{Installed: dir})
	idx := s.Index()
	if strings.Count(idx, "\n- ") != 20 {
		b.Fatalf("index:\n%s", idx)
	}
	for b.Loop() {
		_ = s.Index()
	}
	b.ReportMetric(float64(len(idx)), "index_bytes")
}
