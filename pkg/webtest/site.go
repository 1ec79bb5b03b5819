package webtest

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/text/encoding/simplifiedchinese"

	"agent/pkg/document/doctest"
)

// Site is a local web site with the pages web_fetch meets: a news article
// wrapped in navigation, ads and scripts, Chinese pages in GBK with and
// without a declared charset, a PDF, an Office file, JSON, an image, a
// 20 MB body, redirects and a redirect loop, a page that never answers
// and one nested too deep for a recursive reader.
//
// It listens on loopback, which the SSRF guard refuses: allow Allow()
// (web.fetch_allow) to fetch from it.
type Site struct {
	*httptest.Server
	hits atomic.Int64
}

// Distinctive sentences of the article: what a reader must keep.
const (
	ArticleTitle = "Harbour city opens its first tidal power station"
	ArticleLead  = "The tidal station at the north pier produced its first 40 megawatts on Tuesday morning."
	ArticleLast  = "Engineers expect the second turbine hall to open in the spring."
	// Boilerplate a reader must drop.
	NavText    = "Subscribe to our newsletter"
	AdText     = "BUY CHEAP WATCHES NOW"
	ScriptText = "trackingPixelLoaded"
	// The GBK page's text.
	GBKTitle = "市政府发布二〇二六年工作报告"
	GBKText  = "今年全市新增就业岗位十二万个，空气质量优良天数比例达到百分之八十九。"
	// The PDF's text.
	PDFText = "Quarterly revenue rose 12 percent"
	// The JSON body.
	JSONBody = `{"status":"ok","items":[{"id":1,"name":"第一项"}]}`
)

// NewSite starts the site; it is closed with the test.
func NewSite(t testing.TB) *Site {
	s := &Site{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /article", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, ArticleHTML(0))
	})
	mux.HandleFunc("GET /article-1mb", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, ArticleHTML(1<<20))
	})
	gbk := func(meta, header bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			ct := "text/html"
			if header {
				ct += "; charset=GBK"
			}
			w.Header().Set("Content-Type", ct)
			w.Write(GBKPage(meta))
		}
	}
	mux.HandleFunc("GET /gbk-header", gbk(false, true))
	mux.HandleFunc("GET /gbk-meta", gbk(true, false))
	mux.HandleFunc("GET /gbk-undeclared", gbk(false, false))
	mux.HandleFunc("GET /gbk-latin1-header", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=ISO-8859-1") // a Tomcat default
		w.Write(GBKPage(true))
	})
	mux.HandleFunc("GET /report.pdf", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		w.Write(doctest.PDF([]string{PDFText, "Page two: outlook"}))
	})
	mux.HandleFunc("GET /download", func(w http.ResponseWriter, r *http.Request) {
		// A PDF served as octet-stream with no telling name.
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(doctest.PDF([]string{PDFText}))
	})
	mux.HandleFunc("GET /minutes.docx", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
		w.Write(doctest.DOCX([]string{"Minutes of the board", "Decision: approve the budget"}, nil))
	})
	mux.HandleFunc("GET /data.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, JSONBody)
	})
	mux.HandleFunc("GET /notes.txt", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "plain notes\nline two")
	})
	mux.HandleFunc("GET /image.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"))
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		// 20 MB of HTML, streamed: a reader must stop at its limit.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html><head><title>Big</title></head><body>")
		para := strings.Repeat("<p>"+strings.Repeat("filler text ", 80)+"</p>\n", 100)
		for written := 0; written < 20<<20; written += len(para) {
			if _, err := fmt.Fprint(w, para); err != nil {
				return
			}
		}
		fmt.Fprint(w, "</body></html>")
	})
	mux.HandleFunc("GET /big.pdf", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		w.Write([]byte("%PDF-1.4\n"))
		w.Write(make([]byte, 20<<20))
	})
	mux.HandleFunc("GET /deep", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>"+strings.Repeat("<div>", 50000)+"deep text"+strings.Repeat("</div>", 50000)+"</body></html>")
	})
	mux.HandleFunc("GET /loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop2", http.StatusFound)
	})
	mux.HandleFunc("GET /loop2", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("GET /moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/article", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("GET /missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page", http.StatusNotFound)
	})
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers never
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// Hits is how many requests the site got.
func (s *Site) Hits() int64 { return s.hits.Load() }

// Port is the site's port.
func (s *Site) Port() string {
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	return port
}

// Allow is the web.fetch_allow entry that lets web_fetch reach the site
// (its loopback address and port).
func (s *Site) Allow() []string { return []string{"127.0.0.1:" + s.Port()} }

// ArticleHTML is a news article page as sites serve them: a head full of
// scripts and styles, navigation, a cookie banner, ads, the article, a
// comment section and a footer. size > 0 pads the article's body and the
// boilerplate around it to about size bytes.
func ArticleHTML(size int) string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>` + ArticleTitle + ` | The Harbour Gazette</title>
<meta property="og:title" content="` + ArticleTitle + `">
<meta property="article:published_time" content="2026-11-24T08:30:00Z">
<meta name="author" content="Mei Lin">
<script>window.` + ScriptText + ` = true; (function(){var s=document.createElement("script");s.src="/ads.js";document.head.appendChild(s)})();</script>
<style>body{font-family:serif}.ad{border:1px solid red}</style>
</head><body>
<header class="site-header"><nav class="menu"><ul><li><a href="/">Home</a></li><li><a href="/world">World</a></li>
<li><a href="/business">Business</a></li><li><a href="/sport">Sport</a></li></ul></nav>
<div class="newsletter-signup">` + NavText + `</div></header>
<div class="cookie-banner">We use cookies. <button>Accept</button></div>
<aside class="sidebar ad"><p>` + AdText + `</p><img src="/ad.gif" alt="advert"></aside>
<main><article class="article-body">
<h1>` + ArticleTitle + `</h1>
<p class="byline">By Mei Lin</p>
<p>` + ArticleLead + ` The station, built over six years, uses twelve turbines set into the old harbour wall.</p>
<p>City officials said the station would supply about a fifth of the city's households once both halls run.
The mayor called it <a href="/energy">a turning point for the region's energy</a>.</p>
<h2>How it works</h2>
<p>Water flowing in and out with the tide turns the turbines; unlike wind, the tide is predictable to the minute,
which lets the grid operator plan around it days in advance.</p>
<table><tr><th>Hall</th><th>Turbines</th><th>Megawatts</th></tr><tr><td>North</td><td>12</td><td>40</td></tr><tr><td>South</td><td>12</td><td>40</td></tr></table>
`)
	filler := "<p>Residents along the pier gathered to watch the first run, and local schools have booked tours of the visitor centre through the winter months while the engineers finish commissioning.</p>\n"
	boiler := `<div class="related ad"><a href="/x">Related: ten things you missed</a> <a href="/y">` + AdText + `</a></div><script>var x=1;</script>` + "\n"
	for n := b.Len(); size > 0 && n < size*2/3; n += len(filler) {
		b.WriteString(filler)
	}
	b.WriteString(`<p>` + ArticleLast + `</p>
</article></main>
<section class="comments"><h3>Comments</h3><div class="comment">First!</div></section>
`)
	for size > 0 && b.Len() < size-200 {
		b.WriteString(boiler)
	}
	b.WriteString(`<footer class="site-footer"><p>© 2026 The Harbour Gazette</p><p>` + NavText + `</p></footer>
<script src="/analytics.js"></script></body></html>`)
	return b.String()
}

// GBKPage is a Chinese page encoded in GBK, with a <meta charset> or
// none.
func GBKPage(meta bool) []byte {
	head := "<html><head>"
	if meta {
		head += `<meta http-equiv="Content-Type" content="text/html; charset=gb2312">`
	}
	page := head + "<title>" + GBKTitle + "</title></head><body><div class=\"nav\">首页 | 新闻 | 政务</div><div class=\"content\"><h1>" + GBKTitle + "</h1>" +
		strings.Repeat("<p>"+GBKText+"</p>", 8) + "</div></body></html>"
	out, err := simplifiedchinese.GBK.NewEncoder().String(page)
	if err != nil {
		panic(err)
	}
	return []byte(out)
}
