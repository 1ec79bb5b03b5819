package websearch

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"agent/pkg/config"
)

// checkResult fails when r breaks what a Result promises.
func checkResult(t testing.TB, r Result) {
	t.Helper()
	if !strings.HasPrefix(r.URL, "http://") && !strings.HasPrefix(r.URL, "https://") {
		t.Errorf("URL %q is not http(s)", r.URL)
	}
	for name, s := range map[string]string{"title": r.Title, "url": r.URL, "snippet": r.Snippet, "source": r.Source, "date": r.Date} {
		if !utf8.ValidString(s) {
			t.Errorf("%s is not UTF-8: %q", name, s)
		}
		for _, c := range s {
			if unicode.IsControl(c) || unicode.Is(unicode.Cf, c) {
				t.Errorf("%s holds %U: %q", name, c, s)
			}
		}
		if strings.Contains(s, "<script") || strings.Contains(s, "alert(") {
			t.Errorf("%s holds markup: %q", name, s)
		}
	}
	if n := utf8.RuneCountInString(r.Title); n > maxTitle {
		t.Errorf("title of %d runes", n)
	}
	if n := utf8.RuneCountInString(r.Snippet); n > maxSnippet {
		t.Errorf("snippet of %d runes", n)
	}
	if r.Date != "" && len(r.Date) != len("2006-01-02") {
		t.Errorf("date %q", r.Date)
	}
}

func TestHostileResults(t *testing.T) {
	long := strings.Repeat("长", 1000)
	body := `{"results": [
		{"title": "<b>Bold</b> &amp; <script>alert(1)</script>news\u202e\u200b", "url": "https://ok.example/a",
		 "content": "<p>First</p><p>second &lt;script&gt;alert(2)&lt;/script&gt; line</p>\u001b[31m red\u0000", "published_date": "not a date"},
		{"title": "xss", "url": "javascript:alert(1)", "content": "dropped"},
		{"title": "relative", "url": "/local/path", "content": "dropped"},
		{"title": "` + long + `", "url": "https://ok.example/long", "content": "` + long + `"},
		{"title": 5, "url": "https://ok.example/typed", "content": ["not", "a", "string"], "published_date": 20240101},
		"not an object",
		{"url": 7},
		{"title": "dup", "url": "https://ok.example/a"},
		{"title": "bad utf8 ` + "\xff\xfe" + `", "url": "https://ok.example/utf8"}
	]}`
	f := newFixture(t, nil)
	f.fake.Handle(config.EngineTavily, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) })
	out, err := f.search(t, config.EngineTavily, "news", 20)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, r := range out.Results {
		checkResult(t, r)
		urls = append(urls, r.URL)
	}
	if got := strings.Join(urls, " "); got != "https://ok.example/a https://ok.example/long https://ok.example/typed https://ok.example/utf8" {
		t.Errorf("kept %s", got)
	}
	first := out.Results[0]
	if first.Title != "Bold & news" || first.Snippet != "First second line red" || first.Date != "" {
		t.Errorf("cleaned to %+v", first)
	}
	if got := out.Results[1].Title; utf8.RuneCountInString(got) != maxTitle || !strings.HasSuffix(got, "…") {
		t.Errorf("long title: %d runes", utf8.RuneCountInString(got))
	}
	if got := out.Results[2]; got.Title != "https://ok.example/typed" || got.Snippet != "" {
		t.Errorf("wrong types: %+v", got)
	}
}

func TestHostileBodies(t *testing.T) {
	huge := `{"results": [{"title": "` + strings.Repeat("a", MaxBody) + `"}]}`
	tests := []struct {
		name, engine, body, contentType string
		want                            error
		words                           string
	}{
		{"huge", config.EngineTavily, huge, "application/json", ErrMalformed, "more than 2 MB"},
		{"results not a list", config.EngineTavily, `{"results": "none"}`, "application/json", ErrMalformed, `"results"`},
		{"array", config.EngineSearXNG, `[1, 2]`, "application/json", ErrMalformed, "not a JSON object"},
		{"html", config.EngineSearXNG, `<!doctype html><html><body>results</body></html>`, "text/html", ErrMalformed, "HTML, not JSON"},
		{"empty", config.EngineBrave, ``, "application/json", ErrMalformed, "empty body"},
		{"brave without web", config.EngineBrave, `{"type": "ErrorResponse"}`, "application/json", ErrMalformed, "web.results"},
		{"github items object", config.EngineGitHub, `{"items": {"a": 1}}`, "application/json", ErrMalformed, `"items"`},
		{"hub object", config.EngineHuggingFace, `{"models": []}`, "application/json", ErrMalformed, "not a JSON array"},
		{"nesting", config.EngineTavily, strings.Repeat("[", 100000), "application/json", ErrMalformed, "JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.fake.Handle(tt.engine, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.Write([]byte(tt.body))
			})
			_, err := f.search(t, tt.engine, "x", 3)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.words) {
				t.Fatalf("got %v, want %v saying %q", err, tt.want, tt.words)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
		})
	}
	// An error body that is huge or hostile is not pasted into the error.
	f := newFixture(t, nil)
	f.fake.Handle(config.EngineGitHub, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		w.Write([]byte(`{"message": "<script>alert(1)</script>` + strings.Repeat("x", 5000) + `"}`))
	})
	_, err := f.search(t, config.EngineGitHub, "x", 3)
	if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), "<script") || len(err.Error()) > 400 {
		t.Errorf("hostile error body: %v", err)
	}
}

// Hub ids that are not owner/name do not become links.
func TestHostileHubIDs(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.Handle(config.EngineHuggingFace, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`[{"id": "../../admin"}, {"id": "<img src=x>"}, {"id": "a/b/c"}, {"id": "org/fine-model", "pipeline_tag": "<b>fill-mask</b>"}, {"id": 12}]`))
	})
	out, err := f.search(t, config.EngineHuggingFace, "fine model", 5)
	if err != nil || len(out.Results) != 1 || out.Results[0].Title != "org/fine-model" || !strings.HasPrefix(out.Results[0].Snippet, "fill-mask") {
		t.Fatalf("got %+v, %v", out, err)
	}
	checkResult(t, out.Results[0])
}

func TestClean(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"  a \n\t b  ", 10, "a b"},
		{"<style>p{}</style><p>x</p>", 10, "x"},
		{"a &lt;b&gt; c", 10, "a c"},
		{"a < b and c > d", 20, "a < b and c > d"},
		{"abcdef", 4, "abc…"},
		{"ab cdef", 4, "ab…"},
		{"中文字符串", 3, "中文…"},
		{"x\u2066y\u2069z", 10, "xyz"},
	}
	for _, tt := range tests {
		if got := clean(tt.in, tt.max); got != tt.want {
			t.Errorf("clean(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}
