package webfetch

import (
	"context"
	"testing"
	"unicode/utf8"

	"agent/pkg/webtest"
)

// FuzzRead feeds hostile bodies under each content type to the readers:
// they never panic, and what they return is valid UTF-8.
func FuzzRead(f *testing.F) {
	f.Add([]byte(webtest.ArticleHTML(0)), "text/html")
	f.Add(webtest.GBKPage(true), "text/html")
	f.Add(webtest.GBKPage(false), "")
	f.Add([]byte(`{"a":[1,2,{"b":null}]}`), "application/json")
	f.Add([]byte("<table><tr><td><table><tr><td>x</table></table><svg><foreignObject><p>y"), "text/html; charset=utf-16")
	f.Add([]byte("<html><body><article><h1>t</h1><p>"+string(rune(0xFFFD))+"</p><a href='javascript:alert(1)'>x</a>"), "application/xhtml+xml")
	f.Add([]byte("PK\x03\x04garbage"), "application/octet-stream")
	fe := New(Config{})
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		p := &Page{URL: "http://news.example/page.html"}
		p.Type = contentType
		if err := fe.read(context.Background(), p, body, contentType); err != nil {
			return
		}
		if !utf8.ValidString(p.Text) || !utf8.ValidString(p.Title) {
			t.Fatalf("invalid UTF-8 from %q", body)
		}
		_ = p.Render(100, 1<<20)
	})
}
