// Package webfetch is the web_fetch tool: the readable text of a web page
// as Markdown, of a PDF, an Office document or CSV as read_document reads
// them, and of JSON or plain text as it is.
//
// Every URL goes through a netguard.Guard: http and https only, no
// address on the box, the LAN or cloud metadata, checked at dial time and
// on every redirect. Bodies are bounded (web.fetch_max_mb), the whole
// fetch by web.timeout, redirects to five. Pages are decoded by their
// declared or detected charset (GBK and GB18030 pages included), reduced
// to their main content by go-readability (a port of Firefox's Reader
// View) and written as Markdown by html-to-markdown; a page those cannot
// read (deeply nested, or with no article) is read by pkg/document's
// streaming HTML reader instead. PDFs are converted in the sandbox.
package webfetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	readability "codeberg.org/readeck/go-readability/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"

	"agent/pkg/clock"
	"agent/pkg/document"
	"agent/pkg/netguard"
)

// Defaults and bounds.
const (
	DefaultMaxChars = 20000
	MaxMaxChars     = 100000
	// maxDepth and maxElements bound what readability and the Markdown
	// converter (recursive) are given; deeper or larger pages are read
	// by pkg/document's streaming reader.
	maxDepth    = 256
	maxElements = 100000
	maxAttrs    = 200000
	// maxDepthBytes bounds depth times size: readability's cleaning passes
	// cost about that (a 250-deep 1.8 MB page took 4 s).
	maxDepthBytes = 96 << 20
	// maxArticleBytes is the largest page the article reader is given
	// (article pages are far smaller; a larger one would take seconds).
	maxArticleBytes = 4 << 20
	// maxFetches is how many fetches run at once (more wait).
	maxFetches = 4
	// maxExtractions is how many pages are reduced at once.
	maxExtractions = 2
)

// Config of the tool.
type Config struct {
	Guard *netguard.Guard
	// Around wraps the guard's dial (the egress ledger).
	Around   func(netguard.DialFunc) netguard.DialFunc
	Timeout  time.Duration // the whole fetch (default 15 s)
	MaxBytes int64         // the largest body read (default 10 MB)
	// PDF converts a downloaded PDF (in the sandbox); nil or an error:
	// PDFs are refused with that reason.
	PDF       func(ctx context.Context, data []byte) (*document.Doc, error)
	UserAgent string
	Clock     clock.Clock
	Logger    *slog.Logger
}

// Fetcher fetches and reads pages.
type Fetcher struct {
	cfg     Config
	client  *http.Client
	md      *converter.Converter
	sem     chan struct{} // extractions at once
	fetches chan struct{} // fetches at once
}

// New returns a Fetcher.
func New(cfg Config) *Fetcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 10 << 20
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "Mozilla/5.0 (compatible; agent web_fetch)"
	}
	if cfg.Guard == nil {
		cfg.Guard = netguard.New(netguard.Config{})
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	md := converter.NewConverter(
		converter.WithPlugins(base.NewBasePlugin(), commonmark.NewCommonmarkPlugin(), table.NewTablePlugin()),
		// The reader is a model, not a Markdown renderer: escaping every
		// * and _ costs a fifth of the conversion and tokens.
		converter.WithEscapeMode(converter.EscapeModeDisabled),
	)
	// Pictures are noise in text for a model: their alt text is not
	// worth the URLs.
	for _, tag := range []string{"img", "picture", "svg", "video", "audio", "source", "button"} {
		md.Register.TagType(tag, converter.TagTypeRemove, converter.PriorityEarly)
	}
	return &Fetcher{cfg: cfg, client: cfg.Guard.Client(netguard.ClientConfig{Timeout: cfg.Timeout, Around: cfg.Around}), md: md,
		sem: make(chan struct{}, maxExtractions), fetches: make(chan struct{}, maxFetches)}
}

// Page is a fetched and read page.
type Page struct {
	URL       string // after redirects
	Type      string // the media type
	Title     string
	Byline    string
	Published string
	Text      string // Markdown or text
	Bytes     int64  // body bytes read
	// Chars is the length of the whole text in characters when Text
	// holds only its start (a very long article); 0 otherwise.
	Chars int
	Cut   bool   // the body was longer than MaxBytes
	Note  string // how it was read, when it matters
}

// ErrNotReadable is a body web_fetch does not read (an image, a binary).
var ErrNotReadable = errors.New("not a page web_fetch can read")

// Fetch fetches raw and reads it.
func (f *Fetcher) Fetch(ctx context.Context, raw string) (*Page, error) {
	u, err := f.cfg.Guard.CheckURL(raw)
	if err != nil {
		return nil, err
	}
	ctx, cancel := clock.WithTimeout(ctx, f.cfg.Clock, f.cfg.Timeout)
	defer cancel()
	// A few fetches at once: each holds up to MaxBytes of body and its
	// decoded copy, and the model may ask for many in one step.
	select {
	case f.fetches <- struct{}{}:
		defer func() { <-f.fetches }()
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: too many pages being fetched; none finished within %s", u.Host, f.cfg.Timeout)
	}
	start := f.cfg.Clock.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", u.Redacted(), err)
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/pdf,application/json,text/plain;q=0.9,*/*;q=0.5")
	req.Header.Set("Accept-Language", "zh-CN,zh;q=0.9,en;q=0.8")
	resp, err := f.client.Do(req)
	if err != nil {
		var re *netguard.RefusedError
		if errors.As(err, &re) {
			return nil, re
		}
		var ne net.Error
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("%s did not answer within %s", u.Host, f.cfg.Timeout)
		}
		return nil, fmt.Errorf("fetch %s: %v", u.Host, unwrapURLError(err))
	}
	defer resp.Body.Close()
	p := &Page{URL: resp.Request.URL.String()}
	p.Type, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	p.Bytes = int64(len(body))
	logArgs := []any{"host", resp.Request.URL.Host, "status", resp.StatusCode, "bytes", p.Bytes, "type", p.Type, "elapsed", f.cfg.Clock.Now().Sub(start).Round(time.Millisecond)}
	if resp.Request.URL.Host != u.Host {
		logArgs = append(logArgs, "from_host", u.Host)
	}
	if err != nil {
		f.cfg.Logger.Info("web_fetch", append(logArgs, "err", err)...)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: the body did not arrive within %s", u.Host, f.cfg.Timeout)
		}
		return nil, fmt.Errorf("%s: reading the body: %v", u.Host, unwrapURLError(err))
	}
	f.cfg.Logger.Info("web_fetch", logArgs...)
	if int64(len(body)) > f.cfg.MaxBytes {
		body, p.Cut = body[:f.cfg.MaxBytes], true
	}
	if resp.StatusCode >= 400 {
		return nil, fmt.Errorf("%s answered %s%s", p.URL, resp.Status, errorHint(resp.StatusCode))
	}
	if err := f.read(ctx, p, body, resp.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	return p, nil
}

// errorHint explains the statuses a model may misread.
func errorHint(status int) string {
	if status == http.StatusTooManyRequests || status == http.StatusForbidden {
		return " (the site refuses automated reading or is rate-limiting)"
	}
	return ""
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// read turns body into p.Text by its type.
func (f *Fetcher) read(ctx context.Context, p *Page, body []byte, contentType string) error {
	_, params, _ := mime.ParseMediaType(contentType)
	charset := params["charset"]
	kind := kindOf(p.Type, p.URL, body)
	switch kind {
	case document.KindHTML:
		return f.readHTML(ctx, p, body, charset)
	case "json":
		p.Text = document.Decode(body, charset, false)
		return nil
	case document.KindText, document.KindMarkdown:
		p.Text = document.Decode(body, charset, false)
		return nil
	case document.KindPDF:
		if p.Cut {
			return fmt.Errorf("%s is a PDF larger than %d MB; web_fetch reads PDFs up to that size", p.URL, f.cfg.MaxBytes>>20)
		}
		if f.cfg.PDF == nil {
			return fmt.Errorf("%s is a PDF, and reading PDFs needs the sandbox, which is not available on this box", p.URL)
		}
		doc, err := f.cfg.PDF(ctx, body)
		if err != nil {
			return fmt.Errorf("%s: %v", p.URL, err)
		}
		p.Text, p.Note = renderDoc(doc)
		return nil
	case document.KindDOCX, document.KindXLSX, document.KindPPTX, document.KindCSV:
		if p.Cut {
			return fmt.Errorf("%s is a document larger than %d MB; web_fetch reads documents up to that size", p.URL, f.cfg.MaxBytes>>20)
		}
		doc, err := document.Extract(ctx, kind, body)
		if err != nil {
			return fmt.Errorf("%s: %v", p.URL, err)
		}
		p.Text, p.Note = renderDoc(doc)
		return nil
	}
	what := p.Type
	if what == "" {
		what = http.DetectContentType(body)
	}
	return fmt.Errorf("%s is %s: %w", p.URL, what, ErrNotReadable)
}

// renderDoc writes a document whole (web_fetch cuts by characters).
func renderDoc(doc *document.Doc) (string, string) {
	out, err := document.Render(doc, "", document.MaxChars)
	if err != nil {
		return "", err.Error()
	}
	note := ""
	if doc.Kind == document.KindPDF && doc.Total > len(doc.Parts) {
		note = fmt.Sprintf("the PDF has %d pages; web_fetch read the first %d (save it and use read_document for the rest)", doc.Total, len(doc.Parts))
	}
	return out, note
}

// kindOf decides how to read a body: by its declared media type, else
// by the URL's file name and the body's first bytes.
func kindOf(mediaType, rawURL string, body []byte) string {
	switch mediaType {
	case "text/html", "application/xhtml+xml":
		return document.KindHTML
	case "application/pdf", "application/x-pdf":
		return document.KindPDF
	case "application/json", "application/ld+json", "application/problem+json":
		return "json"
	case "text/plain":
		if bytes.HasPrefix(body, []byte("%PDF-")) {
			return document.KindPDF
		}
		return document.KindText
	case "text/markdown", "text/x-markdown":
		return document.KindMarkdown
	case "text/csv":
		return document.KindCSV
	case "text/tab-separated-values":
		return document.KindCSV
	}
	if strings.HasSuffix(mediaType, "+json") {
		return "json"
	}
	if strings.HasSuffix(mediaType, "+xml") || mediaType == "text/xml" || mediaType == "application/xml" {
		return document.KindText
	}
	name := "page"
	if u, err := url.Parse(rawURL); err == nil && path.Base(u.Path) != "/" && path.Base(u.Path) != "." {
		name = path.Base(u.Path)
	}
	head := body[:min(len(body), 4096)]
	kind, err := document.Kind(name, head)
	if err == nil {
		return kind
	}
	// No telling extension: sniff.
	sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(head))
	switch sniffed {
	case "text/html":
		return document.KindHTML
	case "application/pdf":
		return document.KindPDF
	case "text/plain":
		if json := bytes.TrimSpace(head); len(json) > 0 && (json[0] == '{' || json[0] == '[') {
			return "json"
		}
		return document.KindText
	}
	if mediaType == "" && utf8.Valid(head) && !bytes.ContainsRune(head, 0) {
		return document.KindText
	}
	return ""
}

// readHTML reads a page's main content as Markdown.
func (f *Fetcher) readHTML(ctx context.Context, p *Page, body []byte, charset string) error {
	text := document.Decode(body, charset, true)
	// What the article reader would build and the work it would do are
	// bounded first: its memory grows with elements and attributes, its
	// time with depth times size.
	sh := document.HTMLShape(text)
	if sh.MaxTagAttrs > document.MaxTagAttrs {
		return fmt.Errorf("%s: %w", p.URL, document.ErrHostileHTML)
	}
	if len(text) > maxArticleBytes || sh.Depth > maxDepth || sh.Elements > maxElements || sh.Attrs > maxAttrs || sh.Depth*len(text) > maxDepthBytes {
		return f.readHTMLPlain(ctx, p, text, fmt.Sprintf("the page is too large or deeply nested for the article reader (%d levels, %d elements, %d attributes); read as plain text", sh.Depth, sh.Elements, sh.Attrs))
	}
	// A few extractions at once: each may take a core and tens of MB.
	select {
	case f.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", p.URL, ctx.Err())
	}
	// The article reader takes no context: it runs aside and the fetch
	// gives up on it at the deadline (it keeps its slot until it ends,
	// so abandoned work still counts against maxExtractions).
	done := make(chan article, 1)
	go func() {
		defer func() { <-f.sem }()
		done <- f.article(ctx, p.URL, text)
	}()
	var a article
	select {
	case a = <-done:
	case <-ctx.Done():
		return fmt.Errorf("%s: reading the page took longer than %s", p.URL, f.cfg.Timeout)
	}
	if a.err != nil || a.text == "" {
		return f.readHTMLPlain(ctx, p, text, "")
	}
	p.Title, p.Byline, p.Published, p.Chars, p.Text = a.title, a.byline, a.published, a.chars, a.text
	return nil
}

// article is what the article reader made of a page.
type article struct {
	title, byline, published, text string
	chars                          int // see Page.Chars
	err                            error
}

// article reduces a page to its article as Markdown (go-readability,
// html-to-markdown). A panic in either library is an error, not a crash.
func (f *Fetcher) article(ctx context.Context, pageURL, text string) (a article) {
	defer func() {
		if r := recover(); r != nil {
			a = article{err: fmt.Errorf("the article reader failed: %v", r)}
			f.cfg.Logger.Error("web_fetch: the article reader panicked", "panic", r)
		}
	}()
	doc, err := html.Parse(strings.NewReader(text))
	if err != nil {
		return article{err: err}
	}
	u, _ := url.Parse(pageURL)
	parser := readability.NewParser()
	parser.MaxElemsToParse = maxElements
	art, err := parser.ParseAndMutate(doc, u)
	if err != nil || art.Node == nil {
		return article{err: errors.New("no article")}
	}
	a.title, a.byline = clean(art.Title()), clean(art.Byline())
	if t, err := art.PublishedTime(); err == nil && !t.IsZero() {
		a.published = t.Format("2006-01-02")
	}
	// web_fetch returns at most MaxMaxChars: what follows is counted, not
	// converted.
	if chars, cut := prune(art.Node, MaxMaxChars*3/2); cut {
		a.chars = chars
	}
	out, err := f.md.ConvertNode(art.Node, converter.WithContext(ctx), converter.WithDomain(pageURL))
	if err != nil {
		return article{err: err}
	}
	a.text = strings.TrimSpace(string(out))
	return a
}

// readHTMLPlain reads a page with pkg/document's streaming HTML reader:
// every visible text, no article detection.
func (f *Fetcher) readHTMLPlain(ctx context.Context, p *Page, text, note string) error {
	doc, err := document.Extract(ctx, document.KindHTML, []byte(text))
	if err != nil {
		return fmt.Errorf("%s: %v", p.URL, err)
	}
	if len(doc.Parts) > 0 {
		p.Text = doc.Parts[0].Text
	}
	if p.Title == "" {
		p.Title = titleOf(text)
	}
	p.Note = note
	return nil
}

// prune removes what follows the first limit characters of n's text
// and reports the text's whole length and whether it cut. n is no deeper
// than maxDepth (shape checked).
func prune(n *html.Node, limit int) (chars int, cut bool) {
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; {
			next := c.NextSibling
			if chars > limit {
				chars += textLen(c)
				n.RemoveChild(c)
				cut = true
			} else if c.Type == html.TextNode {
				chars += utf8.RuneCountInString(c.Data)
			} else {
				walk(c)
			}
			c = next
		}
	}
	walk(n)
	return chars, cut
}

// textLen is the length in characters of n's text.
func textLen(n *html.Node) int {
	if n.Type == html.TextNode {
		return utf8.RuneCountInString(n.Data)
	}
	total := 0
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		total += textLen(c)
	}
	return total
}

// titleOf is the page's <title>.
func titleOf(text string) string {
	z := html.NewTokenizer(strings.NewReader(text[:min(len(text), 64<<10)]))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken:
			if name, _ := z.TagName(); string(name) == "title" {
				if z.Next() == html.TextToken {
					return clean(string(z.Text()))
				}
				return ""
			}
		}
	}
}

// clean collapses whitespace and bounds a metadata field.
func clean(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > 300 {
		s = string([]rune(s)[:300]) + "…"
	}
	return s
}
