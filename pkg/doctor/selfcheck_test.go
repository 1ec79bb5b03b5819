package doctor

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/errlog"
	"agent/pkg/selfcheck/report"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
)

func TestSelfCheckReadsTheLastReport(t *testing.T) {
	dir := t.TempDir()
	cfg, _, err := loadConfig(t, dir, "[agent]\nstate_dir = \"var\"\n")
	if err != nil {
		t.Fatal(err)
	}
	e := Env{Config: cfg}
	if r := e.checkSelfCheck(context.Background()); r.Level != OK || r.Detail != "no database yet" {
		t.Fatalf("no database: %+v", r)
	}
	os.MkdirAll(cfg.Agent.StateDir, 0o700)
	st := storetest.OpenAt(t, filepath.Join(cfg.Agent.StateDir, store.FileName))
	if r := e.checkSelfCheck(context.Background()); r.Level != OK || !strings.Contains(r.Detail, "no self-check yet") {
		t.Fatalf("no report: %+v", r)
	}
	at := time.Now().Add(-2 * time.Hour)
	rep := report.Report{At: at, Items: []report.Item{
		{Name: "database", Level: report.OK, Detail: "quick_check ok"},
		{Name: "temperature", Level: report.Warn, Detail: "tj-thermal 88.2°C; tj-thermal runs hot"},
	}}
	if err := report.Save(context.Background(), st.DB(), rep); err != nil {
		t.Fatal(err)
	}
	rec := errlog.New(st.DB(), errlog.Options{})
	slog.New(rec.Handler(slog.DiscardHandler)).Error("job panicked", "panic", "boom")
	rec.Close(context.Background())

	r := e.checkSelfCheck(context.Background())
	for _, want := range []string{"(2h0m0s ago): 1 problem(s): temperature: tj-thermal 88.2°C", "since then 0 error(s), 1 panic(s) logged"} {
		if !strings.Contains(r.Detail, want) {
			t.Errorf("detail %q lacks %q", r.Detail, want)
		}
	}
	if r.Level != Warn || r.Fix == "" {
		t.Fatalf("%+v", r)
	}
}
