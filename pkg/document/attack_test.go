package document

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"agent/pkg/document/doctest"
)

// A 100 KB workbook whose 50,000 cells all name one long shared string
// (2,000 emoji) made Extract build every cell's text: close to a gigabyte
// of heap and seconds of CPU in the daemon, from one upload. What a sheet
// holds while it is read stays near what its part can show.
func TestXLSXSharedStringAmplification(t *testing.T) {
	cell := strings.Repeat("😀", 2000)
	rows := make([][]string, 1000)
	for i := range rows {
		rows[i] = make([]string, 50)
		for j := range rows[i] {
			rows[i][j] = cell
		}
	}
	data := doctest.XLSX([]doctest.Sheet{{Name: "S", Rows: rows}})
	if len(data) > 200<<10 {
		t.Fatalf("the workbook is %d bytes; the attack needs a small one", len(data))
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d, err := Extract(context.Background(), "xlsx", data)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 100<<20 {
		t.Errorf("extracting a %d KB workbook allocated %d MB", len(data)>>10, got>>20)
	}
	if len(d.Parts) != 1 || !strings.Contains(d.Parts[0].Text, "😀") || !(d.Parts[0].Unfinished || d.Parts[0].Omitted > 0) {
		t.Errorf("the sheet's start with a notice that it is cut was wanted: %d parts", len(d.Parts))
	}
}
