package webfetch_test

// Attacks on web_fetch by a hostile page or server (security review of
// issue 16). Tests named TestAttack* that fail show a finding; the others
// are attacks that held and stay as regression tests.

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/netguard"
	"agent/pkg/netguard/netguardtest"
	"agent/pkg/webfetch"
)

// attackSite serves h on loopback and returns a Fetcher allowed to reach
// exactly it, and its URL.
func attackSite(t *testing.T, h http.HandlerFunc, mod func(*webfetch.Config)) (*webfetch.Fetcher, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	rules, err := netguard.ParseRules([]string{"127.0.0.1:" + u.Port()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := webfetch.Config{
		Guard:    netguard.New(netguard.Config{Allow: rules, Resolver: netguardtest.Resolver{"site.example": {"127.0.0.1"}}}),
		Timeout:  5 * time.Second,
		MaxBytes: 10 << 20,
	}
	if mod != nil {
		mod(&cfg)
	}
	return webfetch.New(cfg), "http://site.example:" + u.Port() + "/page"
}

func htmlBody(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(body))
	}
}

// allocated runs f and returns the bytes the process allocated meanwhile.
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FINDING: shape() counts start tags seen by a context-free tokenizer, but
// html.Parse builds elements the tokenizer never counts: every stray </p>
// (and </br>) becomes an element, and inside <svg>/<math> a <style> is
// not raw text for the parser while the tokenizer skips it as such. Each
// element costs ~150 bytes of tree, so a 10 MB page (web.fetch_max_mb may
// be up to 100) allocates ~0.5 GB (5 GB) with maxElements never tripping;
// attributes are not bounded at all. A plain page of the same size is the
// control.
func TestAttackUncountedElementsAmplifyMemory(t *testing.T) {
	const size = 4 << 20
	fill := func(head, unit, tail string) string {
		return head + strings.Repeat(unit, (size-len(head)-len(tail))/len(unit)) + tail
	}
	uniqueAttrs := func() string {
		var b strings.Builder
		b.WriteString("<html><body><p>hi</p><div ")
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "a%d ", i)
		}
		b.WriteString(">x</div></body></html>")
		return b.String()
	}
	cases := []struct {
		name, body string
		control    bool
	}{
		{"control: an ordinary long page", fill("<html><body>", "<p>word, word word. word word, word word. word word, word word. word word, word word. word</p>", "</body></html>"), true},
		{"stray end tags", fill("<html><body>", "</p>", "</body></html>"), false},
		{"svg style is not raw text", fill("<html><body><svg><style>", "<g/>", "</style></svg></body></html>"), false},
		{"unique attributes", uniqueAttrs(), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, u := attackSite(t, htmlBody(c.body), nil)
			var err error
			n := allocated(func() { _, err = f.Fetch(context.Background(), u) })
			ratio := float64(n) / float64(len(c.body))
			t.Logf("%d KB page: %d MB allocated (%.0fx), err=%v", len(c.body)>>10, n>>20, ratio, err)
			limit := 25.0
			if ratio > limit {
				t.Errorf("a %d KB page made web_fetch allocate %d MB (%.0fx its size; an ordinary page costs ~12x): shape() did not count what html.Parse builds",
					len(c.body)>>10, n>>20, ratio)
			}
		})
	}
}

// FINDING: web.timeout bounds the download, not the extraction:
// go-readability takes no context, and its cleanConditionally pass is
// O(depth x text). A 2 MB page 250 divs deep (under maxDepth 256 and
// maxElements) holds a goroutine and a core for seconds after the fetch's
// deadline; a 10 MB one for ~25 s, longer on the shared box.
func TestAttackExtractionOutlivesTimeout(t *testing.T) {
	body := "<html><body>" + strings.Repeat("<div>", 250) +
		strings.Repeat("<p>word, word word. word word, word word. word word, word word. word word, word word. word</p>", 20000) + "</body></html>"
	const timeout = time.Second
	f, u := attackSite(t, htmlBody(body), func(c *webfetch.Config) { c.Timeout = timeout })
	start := time.Now()
	_, err := f.Fetch(context.Background(), u)
	took := time.Since(start)
	t.Logf("%d KB page, %d levels: %v, err=%v", len(body)>>10, 250, took, err)
	if took > 2*timeout+500*time.Millisecond {
		t.Errorf("web_fetch with a %v timeout ran %v on a %d KB page: extraction is not bounded by the timeout", timeout, took.Round(time.Millisecond), len(body)>>10)
	}
}

// --- Attacks that held. ---

// A gzip bomb: 256 MB of one letter in ~250 KB. The transport inflates it, the
// LimitReader stops at MaxBytes.
func TestAttackGzipBombIsBounded(t *testing.T) {
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for range 256 {
		zw.Write(chunk)
	}
	zw.Close()
	bomb := z.Bytes()
	for _, ct := range []string{"text/plain", "text/html"} {
		f, u := attackSite(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ct)
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb)
		}, func(c *webfetch.Config) { c.MaxBytes = 1 << 20 })
		var p *webfetch.Page
		var err error
		n := allocated(func() { p, err = f.Fetch(context.Background(), u) })
		if err != nil {
			t.Fatalf("%s: %v", ct, err)
		}
		if !p.Cut || p.Bytes > 1<<20+1 || n > 64<<20 {
			t.Errorf("%s: %d KB of gzip: cut %v, %d bytes, %d MB allocated", ct, len(bomb)>>10, p.Cut, p.Bytes, n>>20)
		}
	}
}

// A chunked body that never ends is cut at MaxBytes, quickly.
func TestAttackEndlessBodyIsCut(t *testing.T) {
	f, u := attackSite(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		line := bytes.Repeat([]byte("all work and no play "), 3000)
		for r.Context().Err() == nil {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}, func(c *webfetch.Config) { c.MaxBytes = 2 << 20; c.Timeout = 10 * time.Second })
	start := time.Now()
	p, err := f.Fetch(context.Background(), u)
	if err != nil || !p.Cut || time.Since(start) > 5*time.Second {
		t.Fatalf("endless body: %v, %+v after %v", err, p, time.Since(start))
	}
}

// A body dripped a byte at a time (each read well under any idle timeout)
// still ends at the whole-fetch timeout.
func TestAttackDripBodyHonoursTimeout(t *testing.T) {
	f, u := attackSite(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fl := w.(http.Flusher)
		for r.Context().Err() == nil {
			w.Write([]byte("<"))
			fl.Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}, func(c *webfetch.Config) { c.Timeout = time.Second })
	start := time.Now()
	_, err := f.Fetch(context.Background(), u)
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("drip: %v after %v", err, time.Since(start))
	}
}

// rawSite is a TCP server that writes reply to every connection and then
// holds it open; the Fetcher may reach it as raw.example.
func rawSite(t *testing.T, reply func(c net.Conn)) (*webfetch.Fetcher, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				c.Read(buf)
				reply(c)
				time.Sleep(5 * time.Second)
			}()
		}
	}()
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	rules, _ := netguard.ParseRules([]string{"127.0.0.1:" + port})
	f := webfetch.New(webfetch.Config{
		Guard:   netguard.New(netguard.Config{Allow: rules, Resolver: netguardtest.Resolver{"raw.example": {"127.0.0.1"}}}),
		Timeout: 3 * time.Second,
	})
	return f, "http://raw.example:" + port + "/"
}

// Endless 1xx responses, small or with large headers: the transport gives
// up after a few, well before the timeout.
func TestAttackInformationalFlood(t *testing.T) {
	for _, hdr := range []string{"Link: </a.css>; rel=preload\r\n", "Link: <" + strings.Repeat("a", 60<<10) + ">\r\n"} {
		informationalFlood(t, hdr)
	}
}

func informationalFlood(t *testing.T, hdr string) {
	f, u := rawSite(t, func(c net.Conn) {
		for i := 0; i < 100000; i++ {
			if _, err := fmt.Fprintf(c, "HTTP/1.1 103 Early Hints\r\n%s\r\n", hdr); err != nil {
				return
			}
		}
	})
	start := time.Now()
	_, err := f.Fetch(context.Background(), u)
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("1xx flood: %v after %v", err, time.Since(start))
	}
	t.Logf("1xx flood: %v after %v", err, time.Since(start))
}

// Headers without end are cut at MaxResponseHeaderBytes.
func TestAttackEndlessHeaders(t *testing.T) {
	f, u := rawSite(t, func(c net.Conn) {
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\n")
		line := "X-A: " + strings.Repeat("b", 1000) + "\r\n"
		for i := 0; i < 100000; i++ {
			if _, err := fmt.Fprint(c, line); err != nil {
				return
			}
		}
	})
	start := time.Now()
	_, err := f.Fetch(context.Background(), u)
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("endless headers: %v after %v", err, time.Since(start))
	}
}

// HTTP_PROXY in the daemon's environment is not used (a proxy resolves
// names itself, past the guard).
func TestAttackEnvironmentProxyIsIgnored(t *testing.T) {
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		fmt.Fprint(w, "from the proxy")
	}))
	t.Cleanup(proxy.Close)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	f, u := attackSite(t, htmlBody("<html><body><p>direct</p></body></html>"), nil)
	if _, err := f.Fetch(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fetch(context.Background(), "http://metadata.example/latest/meta-data/"); err == nil {
		t.Error("an unresolvable name was fetched (through the proxy?)")
	}
	if proxied.Load() != 0 {
		t.Errorf("the environment's proxy got %d requests", proxied.Load())
	}
}

// A page that redirects to the box by every spelling: the second server
// (the "daemon") on loopback is never reached.
func TestAttackRedirectSpellingsToTheBox(t *testing.T) {
	var hits atomic.Int64
	box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "metrics")
	}))
	t.Cleanup(box.Close)
	bu, _ := url.Parse(box.URL)
	bp := bu.Port()
	targets := []string{
		"//127.0.0.1:" + bp + "/metrics",
		"http://127.1:" + bp + "/",
		"http://0x7f000001:" + bp + "/",
		"http://017700000001:" + bp + "/",
		"http://[::ffff:127.0.0.1]:" + bp + "/",
		"http://[::ffff:7f00:1]:" + bp + "/",
		"http://localhost:" + bp + "/",
		"http://localhost.:" + bp + "/",
		"http://LOCALHOST:" + bp + "/",
		"http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ:" + bp + "/",
		"http://１２７.０.０.１:" + bp + "/",
		"http://127。0。0。1:" + bp + "/",
		"http://x@127.0.0.1:" + bp + "/",
		"http://0:" + bp + "/",
		"file:///etc/passwd",
		"gopher://127.0.0.1:" + bp + "/_GET%20/",
		"ftp://127.0.0.1:" + bp + "/",
	}
	var i atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", targets[i.Load()])
		w.WriteHeader(http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	su, _ := url.Parse(srv.URL)
	rules, _ := netguard.ParseRules([]string{"127.0.0.1:" + su.Port(), ":" + bp})
	f := webfetch.New(webfetch.Config{
		Guard:   netguard.New(netguard.Config{Allow: rules, Resolver: netguardtest.Resolver{"site.example": {"127.0.0.1"}, "localhost": {"127.0.0.1"}}}),
		Timeout: 3 * time.Second,
	})
	for n, target := range targets {
		i.Store(int64(n))
		_, err := f.Fetch(context.Background(), "http://site.example:"+su.Port()+"/r")
		if err == nil {
			t.Errorf("redirect to %s: fetched", target)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the box was reached %d times", hits.Load())
	}
}
