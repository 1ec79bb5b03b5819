package webfetch_test

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"agent/pkg/netguard"
	"agent/pkg/webfetch"
	"agent/pkg/webtest"
)

// BenchmarkFetchArticle1MB: fetch a 1 MB news page from a local server
// (two thirds of it the article's text, the rest navigation, ads and
// scripts) through the SSRF guard and reduce it to its article as
// Markdown (converted as far as web_fetch returns: 150,000 characters), one
// fetch after another (p50/p99 of single fetches). rss_growth_mb is the
// process's RSS after 1,000 more fetches less its RSS after the first
// 100 (both after a GC, returned to the OS): what repeated fetching
// leaves behind.
func BenchmarkFetchArticle1MB(b *testing.B) {
	site := webtest.NewSite(b)
	rules, err := netguard.ParseRules(site.Allow())
	if err != nil {
		b.Fatal(err)
	}
	f := webfetch.New(webfetch.Config{Guard: netguard.New(netguard.Config{Allow: rules}), Timeout: 30 * time.Second})
	url := site.URL + "/article-1mb"
	fetch := func() time.Duration {
		start := time.Now()
		p, err := f.Fetch(context.Background(), url)
		if err != nil {
			b.Fatal(err)
		}
		if p.Bytes < 1<<20-4096 || !strings.Contains(p.Text, webtest.ArticleLead) || strings.Contains(p.Text, webtest.AdText) {
			b.Fatalf("read %d bytes; article kept %v, ads dropped %v", p.Bytes, strings.Contains(p.Text, webtest.ArticleLead), !strings.Contains(p.Text, webtest.AdText))
		}
		return time.Since(start)
	}
	for range 100 {
		fetch()
	}
	before := rssMB(b)
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		ds = append(ds, fetch())
	}
	b.StopTimer()
	for range max(0, 1000-b.N) {
		fetch()
	}
	after := rssMB(b)
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(ds[(len(ds)-1)*99/100].Microseconds())/1000, "p99_ms")
	b.ReportMetric(before, "rss_after_100_mb")
	b.ReportMetric(after-before, "rss_growth_mb")
}

// rssMB is this process's resident set after a GC that returns freed
// memory to the OS.
func rssMB(tb testing.TB) float64 {
	runtime.GC()
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}
