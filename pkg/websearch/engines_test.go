package websearch

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"agent/pkg/config"
	"agent/pkg/webtest"
)

// Each engine, asked by name, speaks its API and normalises the answer.
func TestEnginesHappyPath(t *testing.T) {
	tests := []struct {
		engine, query string
		method, path  string
		params        map[string]string // query parameters the request must carry
		headers       map[string]string // request headers
		source        string            // Source of the first result
	}{
		{config.EngineTavily, "harbour tidal power", http.MethodPost, "/search", nil,
			map[string]string{"Authorization": "Bearer " + webtest.TavilyKey, "Content-Type": "application/json"}, "tavily.example.com"},
		{config.EngineSearXNG, "harbour tidal power", http.MethodGet, "/search", map[string]string{"q": "harbour tidal power", "format": "json"},
			map[string]string{"Accept": "application/json"}, "duckduckgo"},
		{config.EngineBrave, "harbour tidal power", http.MethodGet, "/res/v1/web/search", map[string]string{"q": "harbour tidal power", "count": "3"},
			map[string]string{"X-Subscription-Token": webtest.BraveKey, "Accept": "application/json"}, "brave.example.com"},
		{config.EngineGitHub, "yaml parser", http.MethodGet, "/search/repositories", map[string]string{"q": "yaml parser is:public", "per_page": "3"},
			map[string]string{"Authorization": "Bearer " + webtest.GitHubKey, "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}, "github.com/example/yaml-parser-1"},
		{config.EngineHuggingFace, "whisper", http.MethodGet, "/api/models", map[string]string{"search": "whisper", "limit": "3", "sort": "downloads", "direction": "-1"},
			map[string]string{"Authorization": "Bearer " + webtest.HuggingFaceKey}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			f := newFixture(t, nil)
			out, err := f.search(t, tt.engine, tt.query, 3)
			if err != nil {
				t.Fatalf("search: %v", err)
			}
			if out.Engine != tt.engine || len(out.Results) != 3 || len(out.Failed) != 0 {
				t.Fatalf("got engine %q, %d results, failed %v; want %s, 3, none", out.Engine, len(out.Results), out.Failed, tt.engine)
			}
			for _, r := range out.Results {
				if !strings.HasPrefix(r.URL, "https://") && !strings.HasPrefix(r.URL, "http://") || r.Title == "" || r.Snippet == "" {
					t.Errorf("incomplete result %+v", r)
				}
				if r.Date != "2025-11-03" {
					t.Errorf("date %q, want 2025-11-03 (%+v)", r.Date, r)
				}
			}
			if tt.source != "" && out.Results[0].Source != tt.source {
				t.Errorf("source %q, want %q", out.Results[0].Source, tt.source)
			}
			reqs := f.fake.Requests(tt.engine)
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			req := reqs[0]
			if req.Method != tt.method || req.Path != tt.path {
				t.Errorf("request %s %s, want %s %s", req.Method, req.Path, tt.method, tt.path)
			}
			for k, v := range tt.params {
				if got := req.Query.Get(k); got != v {
					t.Errorf("parameter %s = %q, want %q", k, got, v)
				}
			}
			for k, v := range tt.headers {
				if got := req.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestTavilyRequestBody(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.search(t, config.EngineTavily, "tidal power", 4); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(f.fake.Requests(config.EngineTavily)[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["query"] != "tidal power" || body["max_results"] != 4.0 {
		t.Errorf("body %v, want query and max_results 4", body)
	}
	if _, ok := body["api_key"]; ok {
		t.Error("the key travels in the body; Tavily takes it in Authorization")
	}
}

// Every engine's error shapes become typed errors naming the fix, without
// the key.
func TestEngineErrors(t *testing.T) {
	type want struct {
		kind  error
		wait  time.Duration // RetryAfter
		words []string      // in the error text
	}
	authFix := func(e string) []string { return []string{"web." + e + "_api_key"} }
	tests := []struct {
		engine string
		fail   webtest.Failure
		want   want
	}{
		{config.EngineTavily, webtest.FailAuth, want{ErrAuth, 0, append(authFix("tavily"), "HTTP 401", "invalid API key")}},
		{config.EngineTavily, webtest.FailRateLimit, want{ErrRateLimited, webtest.RetryAfter, []string{"HTTP 429"}}},
		{config.EngineTavily, webtest.FailQuota, want{ErrRateLimited, time.Hour, []string{"HTTP 432", "upgrade"}}},
		{config.EngineTavily, webtest.FailServer, want{ErrUnavailable, 0, []string{"HTTP 500"}}},
		{config.EngineTavily, webtest.FailMalformed, want{ErrMalformed, 0, []string{"invalid JSON"}}},
		{config.EngineSearXNG, webtest.FailJSONOff, want{ErrRejected, 0, []string{"HTTP 403", "settings.yml", "json"}}},
		{config.EngineSearXNG, webtest.FailRateLimit, want{ErrRateLimited, webtest.RetryAfter, []string{"HTTP 429"}}},
		{config.EngineSearXNG, webtest.FailServer, want{ErrUnavailable, 0, []string{"HTTP 502"}}},
		{config.EngineSearXNG, webtest.FailMalformed, want{ErrMalformed, 0, []string{"invalid JSON", "web.searxng_base_url"}}},
		{config.EngineSearXNG, webtest.FailAuth, want{ErrAuth, 0, []string{"HTTP 401", "web.searxng_base_url"}}},
		{config.EngineBrave, webtest.FailAuth, want{ErrAuth, 0, append(authFix("brave"), "HTTP 422", "SUBSCRIPTION_TOKEN_INVALID")}},
		{config.EngineBrave, webtest.FailRateLimit, want{ErrRateLimited, webtest.RetryAfter, []string{"HTTP 429", "rate limit exceeded"}}},
		{config.EngineBrave, webtest.FailQuota, want{ErrRateLimited, 24 * time.Hour, []string{"quota exceeded"}}},
		{config.EngineBrave, webtest.FailServer, want{ErrUnavailable, 0, []string{"HTTP 503"}}},
		{config.EngineBrave, webtest.FailMalformed, want{ErrMalformed, 0, []string{"invalid JSON"}}},
		{config.EngineGitHub, webtest.FailAuth, want{ErrAuth, 0, append(authFix("github"), "HTTP 401", "Bad credentials")}},
		{config.EngineGitHub, webtest.FailRateLimit, want{ErrRateLimited, webtest.RetryAfter, []string{"HTTP 403", "rate limit"}}},
		{config.EngineGitHub, webtest.FailServer, want{ErrUnavailable, 0, []string{"HTTP 503"}}},
		{config.EngineGitHub, webtest.FailMalformed, want{ErrMalformed, 0, []string{"invalid JSON"}}},
		{config.EngineHuggingFace, webtest.FailAuth, want{ErrAuth, 0, append(authFix("huggingface"), "HTTP 401", "Invalid credentials")}},
		{config.EngineHuggingFace, webtest.FailRateLimit, want{ErrRateLimited, webtest.RetryAfter, []string{"HTTP 429"}}},
		{config.EngineHuggingFace, webtest.FailServer, want{ErrUnavailable, 0, []string{"HTTP 503"}}},
		{config.EngineHuggingFace, webtest.FailMalformed, want{ErrMalformed, 0, []string{"invalid JSON"}}},
	}
	for _, tt := range tests {
		t.Run(tt.engine+"/"+failName(tt.fail), func(t *testing.T) {
			f := newFixture(t, nil)
			f.fake.Fail(tt.engine, tt.fail)
			_, err := f.search(t, tt.engine, "yaml parser", 3)
			var se *SearchError
			if !errors.As(err, &se) || len(se.Failures) != 1 {
				t.Fatalf("got %v, want a *SearchError with one failure", err)
			}
			var ee *EngineError
			if !errors.As(err, &ee) {
				t.Fatalf("%v is not an *EngineError", err)
			}
			if !errors.Is(err, tt.want.kind) || ee.Engine != tt.engine {
				t.Errorf("got %v (kind %v), want kind %v from %s", err, ee.Kind, tt.want.kind, tt.engine)
			}
			if ee.RetryAfter != tt.want.wait {
				t.Errorf("RetryAfter %v, want %v", ee.RetryAfter, tt.want.wait)
			}
			for _, w := range tt.want.words {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			noSecrets(t, "error", err.Error())
		})
	}
}

func failName(f webtest.Failure) string {
	return [...]string{"healthy", "auth", "ratelimit", "quota", "server", "malformed", "slow", "empty", "jsonoff"}[f]
}

// GitHub picks issues, code (with a token) or repositories, and keeps
// routing words out of the search.
func TestGitHubKinds(t *testing.T) {
	tests := []struct {
		query   string
		token   bool
		path, q string
		accept  string
	}{
		{"github repo for a yaml parser in golang", true, "/search/repositories", "yaml parser in golang is:public", "application/vnd.github+json"},
		{"kubernetes scheduler panic issue", true, "/search/issues", "kubernetes scheduler panic is:issue is:public", ""},
		{"pull request that adds arm64 support to ffmpeg", true, "/search/issues", "adds arm64 support to ffmpeg is:pr is:public", ""},
		{"code implementing consistent hashing in go", true, "/search/code", "implementing consistent hashing in go", "application/vnd.github.text-match+json"},
		{"code implementing consistent hashing in go", false, "/search/repositories", "implementing consistent hashing in go is:public", ""},
		{"label:bug is:pr crash in sqlite driver", true, "/search/issues", "label:bug is:pr crash in sqlite driver is:public", ""},
		{"is:private org:acme issue salary", true, "/search/issues", "org:acme salary is:issue is:public", ""},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			f := newFixture(t, func(w *config.Web) {
				if !tt.token {
					w.GitHubAPIKey = ""
				}
			})
			out, err := f.search(t, config.EngineGitHub, tt.query, 2)
			if err != nil {
				t.Fatal(err)
			}
			req := f.fake.Requests(config.EngineGitHub)[0]
			if req.Path != tt.path || req.Query.Get("q") != tt.q {
				t.Errorf("asked %s q=%q, want %s q=%q", req.Path, req.Query.Get("q"), tt.path, tt.q)
			}
			if tt.accept != "" && req.Header.Get("Accept") != tt.accept {
				t.Errorf("Accept %q, want %q", req.Header.Get("Accept"), tt.accept)
			}
			if auth := req.Header.Get("Authorization"); (auth != "") != tt.token {
				t.Errorf("Authorization %q with token %v", auth, tt.token)
			}
			r := out.Results[0]
			if !strings.HasPrefix(r.Source, "github.com/example/") || !strings.HasPrefix(r.URL, "https://github.com/example/") {
				t.Errorf("result %+v", r)
			}
			if tt.path == "/search/issues" && !strings.HasPrefix(r.Snippet, "[open ") {
				t.Errorf("issue snippet %q does not start with its state", r.Snippet)
			}
		})
	}
}

// The Hub lists models, datasets or spaces, and retries with the longest
// word when the phrase finds nothing (it matches substrings of ids).
func TestHuggingFaceKinds(t *testing.T) {
	tests := []struct{ query, path, search, sort, url string }{
		{"squad dataset", "/api/datasets", "squad", "downloads", "/datasets/example/squad-1"},
		{"gradio space for ocr", "/api/spaces", "ocr", "likes", "/spaces/example/ocr-1"},
		{"whisper model", "/api/models", "whisper", "downloads", "/example/whisper-1"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			f := newFixture(t, nil)
			out, err := f.search(t, config.EngineHuggingFace, tt.query, 2)
			if err != nil {
				t.Fatal(err)
			}
			req := f.fake.Requests(config.EngineHuggingFace)[0]
			if req.Path != tt.path || req.Query.Get("search") != tt.search || req.Query.Get("sort") != tt.sort {
				t.Errorf("asked %s %v", req.Path, req.Query)
			}
			if want := f.fake.BaseURL(config.EngineHuggingFace) + tt.url; out.Results[0].URL != want {
				t.Errorf("URL %q, want %q", out.Results[0].URL, want)
			}
		})
	}
	f := newFixture(t, nil)
	f.fake.Handle(config.EngineHuggingFace, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("search") == "multilingual" {
			w.Write([]byte(`[{"id":"org/multilingual-e5","downloads":9,"likes":2}]`))
			return
		}
		w.Write([]byte(`[]`))
	})
	out, err := f.search(t, config.EngineHuggingFace, "multilingual embedding model", 2)
	if err != nil || len(out.Results) != 1 {
		t.Fatalf("got %v, %v", out, err)
	}
	reqs := f.fake.Requests(config.EngineHuggingFace)
	if len(reqs) != 2 || reqs[0].Query.Get("search") != "multilingual embedding" || reqs[1].Query.Get("search") != "multilingual" {
		t.Errorf("searches %v", reqs)
	}
}

func TestRetryHeaders(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Retry-After", "120")
	if got := retryAfter(h, now); got != 2*time.Minute {
		t.Errorf("Retry-After 120: %v", got)
	}
	h.Set("Retry-After", now.Add(90*time.Second).Format(http.TimeFormat))
	if got := retryAfter(h, now); got != 90*time.Second {
		t.Errorf("Retry-After date: %v", got)
	}
	h.Set("Retry-After", "99999999999")
	if got := retryAfter(h, now); got != maxCooldown {
		t.Errorf("huge Retry-After: %v", got)
	}
	h.Set("Retry-After", "soon")
	if got := retryAfter(h, now); got != 0 {
		t.Errorf("bad Retry-After: %v", got)
	}
	if got := rateLimitReset(`"api";r=0;t=55`); got != 55*time.Second {
		t.Errorf("RateLimit t=55: %v", got)
	}
	b := http.Header{}
	b.Set("X-RateLimit-Remaining", "1, 0")
	b.Set("X-RateLimit-Reset", "1, 3600")
	if got := braveReset(b); got != time.Hour {
		t.Errorf("Brave monthly window spent: %v", got)
	}
}

func TestDay(t *testing.T) {
	for in, want := range map[string]string{
		"2024-05-01T10:00:00Z":          "2024-05-01",
		"2024-05-01T10:00:00":           "2024-05-01",
		"2024-05-01T10:00:00.000Z":      "2024-05-01",
		"Wed, 01 May 2024 10:00:00 GMT": "2024-05-01",
		"May 1, 2024":                   "2024-05-01",
		"2024-05-01":                    "2024-05-01",
		"3 days ago":                    "",
		"0001-01-01T00:00:00Z":          "",
		"":                              "",
	} {
		if got := day(in); got != want {
			t.Errorf("day(%q) = %q, want %q", in, got, want)
		}
	}
}
