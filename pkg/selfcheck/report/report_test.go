package report

import (
	"context"
	"strings"
	"testing"
	"time"

	"agent/pkg/store/storetest"
)

func TestVerdict(t *testing.T) {
	at := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	good := Report{At: at, Items: []Item{{Name: "disk", Level: OK, Detail: "plenty"}}}
	if good.Level() != OK || len(good.Problems()) != 0 || good.Summary() != "Self-check: all good." {
		t.Errorf("good report: level %s, problems %v, summary %q", good.Level(), good.Problems(), good.Summary())
	}
	if want := "Self-check 2025-03-01 09:00: all good.\nok    disk: plenty"; good.Text() != want {
		t.Errorf("Text() = %q, want %q", good.Text(), want)
	}
	bad := Report{At: at, Items: []Item{
		{Name: "disk", Level: OK, Detail: "plenty"},
		{Name: "memory", Level: Warn, Detail: "high"},
		{Name: "errors", Level: Fail, Detail: "1 panic"},
	}}
	if bad.Level() != Fail || len(bad.Problems()) != 2 {
		t.Errorf("bad report: level %s, problems %v", bad.Level(), bad.Problems())
	}
	if want := "Self-check found 2 problem(s):\n- memory (warn): high\n- errors (fail): 1 panic"; bad.Summary() != want {
		t.Errorf("Summary() = %q, want %q", bad.Summary(), want)
	}
}

func TestSaveLast(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	if _, ok, err := Last(ctx, st.DB()); ok || err != nil {
		t.Fatalf("Last on a new database: ok %v, err %v", ok, err)
	}
	at := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	for _, r := range []Report{
		{At: at, Items: []Item{{Name: "disk", Level: Warn, Detail: "low"}}},
		{At: at.Add(24 * time.Hour), Since: at, Items: []Item{{Name: "disk", Level: OK, Detail: "fine"}}},
	} {
		if err := Save(ctx, st.DB(), r); err != nil {
			t.Fatal(err)
		}
		got, ok, err := Last(ctx, st.DB())
		if err != nil || !ok || !got.At.Equal(r.At) || !got.Since.Equal(r.Since) || len(got.Items) != 1 || got.Items[0] != r.Items[0] {
			t.Fatalf("Last = %+v, %v, %v; want %+v", got, ok, err, r)
		}
	}
	if _, err := st.DB().ExecContext(ctx, `UPDATE meta SET value = 'not json' WHERE key = ?`, metaKey); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Last(ctx, st.DB()); err == nil || !strings.Contains(err.Error(), "unreadable") {
		t.Errorf("Last of a damaged report: %v", err)
	}
}
