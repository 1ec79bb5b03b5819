package document

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"agent/pkg/document/doctest"
)

func TestScratchXLSXMemory(t *testing.T) {
	cell := strings.Repeat("😀", 2000)
	rows := make([][]string, 1000)
	for i := range rows {
		rows[i] = make([]string, 50)
		for j := range rows[i] {
			rows[i][j] = cell
		}
	}
	data := doctest.XLSX([]doctest.Sheet{{Name: "S", Rows: rows}})
	t.Logf("file %d bytes", len(data))
	runtime.GC()
	var peak uint64
	stop := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			default:
			}
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	start := time.Now()
	d, err := Extract(context.Background(), "xlsx", data)
	close(stop)
	t.Logf("err %v parts %d took %s peak heap %d MB", err, len(d.Parts), time.Since(start), peak>>20)
}
