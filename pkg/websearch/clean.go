package websearch

import (
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"

	"agent/pkg/invisible"
)

// Caps on the text of one result, in runes.
const (
	maxTitle   = 200
	maxSnippet = 300
	maxSource  = 100
	maxURL     = 2048
)

// clean makes engine text safe to show: markup removed (the text of
// script and style dropped), entities decoded, control and format
// characters and every other invisible one (pkg/invisible: bidi
// overrides, zero-width, tags, variation selectors, fillers) removed,
// whitespace collapsed,
// and at most max runes kept.
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "")
	if strings.ContainsRune(s, '<') {
		s = stripTags(s)
	} else if strings.ContainsRune(s, '&') {
		s = html.UnescapeString(s)
	}
	if strings.ContainsRune(s, '<') { // markup that was escaped once
		s = stripTags(s)
	}
	out := make([]rune, 0, min(len(s), max+1))
	space, esc := false, 0 // esc: 1 after ESC, 2 inside a CSI sequence
	for _, r := range s {
		switch {
		case esc == 1 && r == '[':
			esc = 2
			continue
		case esc == 2:
			if r >= 0x40 && r <= 0x7e { // the final byte
				esc = 0
			}
			continue
		case r == 0x1b:
			esc = 1
			continue
		}
		esc = 0
		switch {
		case unicode.IsSpace(r):
			space = len(out) > 0
			continue
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r), invisible.Is(r), r == utf8.RuneError:
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, r)
		if len(out) > max {
			out = append(out[:max-1], '…')
			if max > 1 && out[max-2] == ' ' {
				out = append(out[:max-2], '…')
			}
			break
		}
	}
	return string(out)
}

// stripTags keeps the text of an HTML fragment, dropping what sits inside
// script, style and similar elements. Tags are replaced by a space so
// that words on both sides stay apart.
func stripTags(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	skip := 0
	for {
		switch z.Next() {
		case html.ErrorToken:
			return b.String()
		case html.TextToken:
			if skip == 0 {
				b.Write(z.Text())
			}
		case html.StartTagToken:
			if hidden(z) {
				skip++
			}
			b.WriteByte(' ')
		case html.EndTagToken:
			if hidden(z) && skip > 0 {
				skip--
			}
			b.WriteByte(' ')
		case html.SelfClosingTagToken:
			b.WriteByte(' ')
		}
	}
}

func hidden(z *html.Tokenizer) bool {
	name, _ := z.TagName()
	switch string(name) {
	case "script", "style", "noscript", "template", "iframe", "object", "svg", "head", "title", "textarea":
		return true
	}
	return false
}

// cleanURL accepts an absolute http(s) URL of sane length; anything else
// (javascript:, data:, relative, control characters) gives "".
func cleanURL(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxURL || strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || unicode.IsSpace(r) }) >= 0 {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.String()
}

// host is the host of an URL without "www.", for Source.
func host(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Hostname(), "www.")
}

// dateLayouts are the date spellings the engines use.
var dateLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999", // Brave page_age, SearXNG without zone
	"2006-01-02 15:04:05",
	"2006-01-02",
	time.RFC1123,
	time.RFC1123Z,
	"Mon, 2 Jan 2006 15:04:05 MST",
	"Mon, 2 Jan 2006 15:04:05 -0700",
	"January 2, 2006",
	"Jan 2, 2006",
	"2 January 2006",
	"2 Jan 2006",
}

// day normalises a date to YYYY-MM-DD; "" when it does not parse.
func day(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return ""
	}
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, s); err == nil {
			if t.Year() < 1990 || t.Year() > 9999 {
				return ""
			}
			return t.Format(time.DateOnly)
		}
	}
	return ""
}

// result builds a cleaned Result; ok is false when the URL is unusable.
func result(title, link, snippet, source, date string) (Result, bool) {
	link = cleanURL(link)
	if link == "" {
		return Result{}, false
	}
	r := Result{
		Title:   clean(title, maxTitle),
		URL:     link,
		Snippet: clean(snippet, maxSnippet),
		Source:  clean(source, maxSource),
		Date:    day(date),
	}
	if r.Title == "" {
		r.Title = clean(link, maxTitle)
	}
	if r.Source == "" {
		r.Source = clean(host(link), maxSource) // url.Parse decodes escapes in a host
	}
	return r, true
}

// collect keeps the first max usable results, without repeated URLs.
type collect struct {
	max  int
	seen map[string]bool
	out  []Result
}

func newCollect(max int) *collect { return &collect{max: max, seen: map[string]bool{}} }

func (c *collect) add(title, link, snippet, source, date string) {
	if len(c.out) >= c.max {
		return
	}
	r, ok := result(title, link, snippet, source, date)
	if !ok || c.seen[r.URL] {
		return
	}
	c.seen[r.URL] = true
	c.out = append(c.out, r)
}
