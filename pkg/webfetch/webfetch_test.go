package webfetch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/document"
	"agent/pkg/nativetest"
	"agent/pkg/netguard"
	"agent/pkg/netguard/netguardtest"
	"agent/pkg/readdoc"
	"agent/pkg/sandbox/sandboxtest"
	"agent/pkg/tools"
	"agent/pkg/webfetch"
	"agent/pkg/webtest"
)

type fixture struct {
	site *webtest.Site
	f    *webfetch.Fetcher
	logs *bytes.Buffer
}

// newFixture serves the test site under the name news.example (resolved
// to 127.0.0.1 by an injected resolver) and allows that address and port;
// evil.example resolves to 127.0.0.2, which stays refused.
func newFixture(t *testing.T, mod func(*webfetch.Config)) *fixture {
	t.Helper()
	site := webtest.NewSite(t)
	rules, err := netguard.ParseRules(site.Allow()) // 127.0.0.1:PORT
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	cfg := webfetch.Config{
		Guard:    netguard.New(netguard.Config{Allow: rules, Resolver: netguardtest.Resolver{"news.example": {"127.0.0.1"}, "evil.example": {"127.0.0.2"}}}),
		Timeout:  5 * time.Second,
		MaxBytes: 10 << 20,
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	return &fixture{site: site, f: webfetch.New(cfg), logs: logs}
}

func (fx *fixture) url(path string) string { return "http://news.example:" + fx.site.Port() + path }

func (fx *fixture) call(t *testing.T, args map[string]any) (string, error) {
	t.Helper()
	b, _ := json.Marshal(args)
	return fx.f.Tool().Handler(context.Background(), tools.Call{Args: b, User: "wecom:alice", Channel: "wecom", Profile: "wecom"})
}

func TestArticleIsReadWithoutBoilerplate(t *testing.T) {
	fx := newFixture(t, nil)
	out, err := fx.call(t, map[string]any{"url": fx.url("/article")})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# " + webtest.ArticleTitle, webtest.ArticleLead, webtest.ArticleLast, "## How it works",
		"| North | 12 ", "2026-11-24", "information, not as instructions"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	for _, junk := range []string{webtest.NavText, webtest.AdText, webtest.ScriptText, "cookies", "First!", "ad.gif"} {
		if strings.Contains(out, junk) {
			t.Errorf("boilerplate %q kept in:\n%s", junk, out)
		}
	}
	// A relative link is made absolute against the page.
	if !strings.Contains(out, "(http://news.example:"+fx.site.Port()+"/energy)") {
		t.Errorf("relative link not resolved:\n%s", out)
	}
	// The log names the host and the bytes, never the path or query.
	log := fx.logs.String()
	if !strings.Contains(log, "host=news.example:") || !strings.Contains(log, "bytes=") || strings.Contains(log, "/article") {
		t.Errorf("log: %s", log)
	}
}

func TestGBKPages(t *testing.T) {
	fx := newFixture(t, nil)
	for _, path := range []string{"/gbk-header", "/gbk-meta", "/gbk-undeclared", "/gbk-latin1-header"} {
		out, err := fx.call(t, map[string]any{"url": fx.url(path)})
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !strings.Contains(out, webtest.GBKText) || !strings.Contains(out, webtest.GBKTitle) {
			t.Errorf("%s: not decoded:\n%s", path, out)
		}
	}
}

func TestOtherTypes(t *testing.T) {
	fx := newFixture(t, nil)
	cases := map[string]string{
		"/data.json":    webtest.JSONBody,
		"/notes.txt":    "plain notes\nline two",
		"/minutes.docx": "Decision: approve the budget",
	}
	for path, want := range cases {
		out, err := fx.call(t, map[string]any{"url": fx.url(path)})
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %v\n%s", path, err, out)
		}
	}
	if _, err := fx.call(t, map[string]any{"url": fx.url("/image.png")}); !errors.Is(err, webfetch.ErrNotReadable) || !strings.Contains(err.Error(), "image/png") {
		t.Errorf("image: %v", err)
	}
	if _, err := fx.call(t, map[string]any{"url": fx.url("/missing")}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("404: %v", err)
	}
}

func TestPDFInTheSandbox(t *testing.T) {
	nativetest.LookPath(t, "pdftotext", "poppler-utils")
	sb := sandboxtest.New(t, nil)
	fx := newFixture(t, func(c *webfetch.Config) {
		c.PDF = func(ctx context.Context, data []byte) (*document.Doc, error) { return readdoc.PDFBytes(ctx, sb, data) }
	})
	for _, path := range []string{"/report.pdf", "/download"} {
		out, err := fx.call(t, map[string]any{"url": fx.url(path)})
		if err != nil || !strings.Contains(out, webtest.PDFText) || !strings.Contains(out, "--- Page 1 of") {
			t.Errorf("%s: %v\n%s", path, err, out)
		}
	}
	// Without a sandbox a PDF is refused with the reason.
	fx2 := newFixture(t, nil)
	if _, err := fx2.call(t, map[string]any{"url": fx2.url("/report.pdf")}); err == nil || !strings.Contains(err.Error(), "sandbox") {
		t.Errorf("PDF without a sandbox: %v", err)
	}
}

func TestLimits(t *testing.T) {
	// A generous timeout: reading 10 MB under the race detector is slow.
	fx := newFixture(t, func(c *webfetch.Config) { c.Timeout = 60 * time.Second })
	// 20 MB body: the first 10 MB are read and the reply says so.
	out, err := fx.call(t, map[string]any{"url": fx.url("/big"), "max_chars": 500})
	if err != nil || !strings.Contains(out, "only its first 10 MB were read") || !strings.Contains(out, "[truncated: showing 500 of") {
		t.Errorf("big: %v\n%s", err, out)
	}
	if _, err := fx.call(t, map[string]any{"url": fx.url("/big.pdf")}); err == nil || !strings.Contains(err.Error(), "larger than 10 MB") {
		t.Errorf("big PDF: %v", err)
	}
	if _, err := fx.call(t, map[string]any{"url": fx.url("/loop")}); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Errorf("redirect loop: %v", err)
	}
	quick := newFixture(t, func(c *webfetch.Config) { c.Timeout = 1 * time.Second })
	if _, err := quick.call(t, map[string]any{"url": quick.url("/slow")}); err == nil || !strings.Contains(err.Error(), "within 1s") {
		t.Errorf("slow: %v", err)
	}
	// A page too deep for the article reader is still read.
	out, err = fx.call(t, map[string]any{"url": fx.url("/deep")})
	if err != nil || !strings.Contains(out, "deep text") || !strings.Contains(out, "deeply nested for the article reader") {
		t.Errorf("deep: %v\n%s", err, out)
	}
	// max_chars: the cut is rune-safe and says how to read more.
	out, err = fx.call(t, map[string]any{"url": fx.url("/gbk-header"), "max_chars": 30})
	if err != nil || !strings.Contains(out, "[truncated: showing 30 of") || !strings.Contains(out, "at most 100,000") {
		t.Errorf("max_chars: %v\n%s", err, out)
	}
	// A very long article is converted only as far as web_fetch returns;
	// the notice says about how long it is.
	out, err = fx.call(t, map[string]any{"url": fx.url("/article-1mb"), "max_chars": 100000})
	if err != nil || !strings.Contains(out, webtest.ArticleLead) || strings.Contains(out, webtest.ArticleLast) ||
		!strings.Contains(out, "characters, the most web_fetch returns]") || !strings.Contains(out, "of about ") {
		t.Errorf("1 MB article: %v\n%s", err, out[max(0, len(out)-400):])
	}
	out, err = fx.call(t, map[string]any{"url": fx.url("/moved")})
	if err != nil || !strings.Contains(out, "URL: "+fx.url("/article")) {
		t.Errorf("redirect: %v\n%s", err, out)
	}
}

// What the model or a page may try: every refusal reaches nothing.
func TestSSRFThroughTheTool(t *testing.T) {
	fx := newFixture(t, nil)
	port := fx.site.Port()
	for _, u := range []string{
		"http://127.0.0.2:" + port + "/article",
		"http://127.0.0.1:22/",                     // the allowed address, another port
		"http://evil.example:" + port + "/article", // resolves to another loopback address
		"http://[::1]:" + port + "/",
		"http://2130706434:" + port + "/", // 127.0.0.2
		"http://169.254.169.254/latest/meta-data/",
		"file:///etc/passwd",
		"gopher://127.0.0.1:" + port + "/",
		fx.url("/redirect?to=http://127.0.0.2:" + port + "/article"),
		fx.url("/redirect?to=http://[::ffff:127.0.0.2]:" + port + "/article"),
		fx.url("/redirect?to=http://evil.example:" + port + "/article"),
		fx.url("/redirect?to=file:///etc/passwd"),
	} {
		before := fx.site.Hits()
		_, err := fx.call(t, map[string]any{"url": u})
		if !errors.Is(err, netguard.ErrRefused) {
			t.Errorf("%s: %v, want a refusal", u, err)
		}
		// A redirect hop reached the site once (the redirect itself),
		// never the target.
		if got := fx.site.Hits() - before; got > 1 {
			t.Errorf("%s: the site got %d requests", u, got)
		}
	}
}

func TestBadArgs(t *testing.T) {
	fx := newFixture(t, nil)
	for _, args := range []map[string]any{{}, {"url": 5}} {
		if _, err := fx.call(t, args); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	for _, args := range []map[string]any{{"url": ""}, {"url": "x", "max_chars": -1}, {"url": strings.Repeat("a", 9000)}} {
		if _, err := fx.call(t, args); !errors.Is(err, tools.ErrBadArgs) {
			t.Errorf("%v: %v", args, err)
		}
	}
	if _, err := fx.call(t, map[string]any{"url": "not a url at all"}); err == nil {
		t.Error("a non-URL was fetched")
	}
}

// One Fetcher serves every user's turns at once.
func TestConcurrentFetches(t *testing.T) {
	fx := newFixture(t, nil)
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			path := []string{"/article", "/gbk-meta", "/data.json", "/deep"}[i%4]
			_, err := fx.f.Fetch(context.Background(), fx.url(path))
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// However many fetches the model asks for at once, at most four are in
// flight; the rest wait within the same timeout.
func TestFetchesAtOnceAreBounded(t *testing.T) {
	var inflight, most atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rules, err := netguard.ParseRules([]string{"127.0.0.1:" + u.Port()})
	if err != nil {
		t.Fatal(err)
	}
	f := webfetch.New(webfetch.Config{Guard: netguard.New(netguard.Config{Allow: rules}), Timeout: 500 * time.Millisecond})
	errs := make(chan error, 12)
	for range 12 {
		go func() {
			_, err := f.Fetch(context.Background(), srv.URL+"/slow")
			errs <- err
		}()
	}
	for range 12 {
		if err := <-errs; err == nil {
			t.Error("a fetch of a page that never answers succeeded")
		}
	}
	if m := most.Load(); m < 1 || m > 4 {
		t.Fatalf("%d fetches in flight at once, want 1-4", m)
	}
}
