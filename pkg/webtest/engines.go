package webtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"agent/pkg/config"
)

// Engines is one local server speaking the five web_search engines' APIs
// under path prefixes: /tavily, /searxng, /brave, /github and
// /huggingface (BaseURL gives each). It checks requests the way the real
// services do (method, path, required parameters, the key header: a
// wrong or missing key gets that engine's own "bad key" answer), answers
// with results made from the query (or those set with SetHits), records
// every request, and fails on demand per engine (Fail).
//
// Its keys are TavilyKey, BraveKey, GitHubKey and HuggingFaceKey; Web()
// is a [web] configuration pointing at it.
type Engines struct {
	*httptest.Server

	done      chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	now      func() time.Time
	fail     map[string]Failure
	hits     map[string][]Hit
	handlers map[string]http.HandlerFunc
	reqs     []Request
}

// Keys the fake engines accept.
const (
	TavilyKey      = "tvly-dev-SECRETfakeTavilyKey01"
	BraveKey       = "BSAsecretFakeBraveToken02"
	GitHubKey      = "ghp_SECRETfakeGitHubToken03"
	HuggingFaceKey = "hf_SECRETfakeHuggingFaceToken04"
)

// EngineNames are the engines Engines speaks, in the default order.
var EngineNames = []string{config.EngineSearXNG, config.EngineTavily, config.EngineBrave, config.EngineGitHub, config.EngineHuggingFace}

// Failure is how an engine misbehaves.
type Failure int

const (
	Healthy       Failure = iota
	FailAuth              // the engine's own bad-key answer: 401 (Brave: 422 SUBSCRIPTION_TOKEN_INVALID)
	FailRateLimit         // 429 with Retry-After (GitHub: 403 with x-ratelimit-remaining 0; Brave and the Hub: their reset headers), RetryAfter long
	FailQuota             // the plan's quota is spent: Tavily 432, Brave 429 on the monthly window; others as FailRateLimit
	FailServer            // a 5xx
	FailMalformed         // 200 with JSON cut short
	FailSlow              // no answer until the client gives up
	FailEmpty             // 200 with no results
	FailJSONOff           // SearXNG without json in search.formats: 403 (others: 403)
)

// RetryAfter is how long a FailRateLimit engine asks to wait.
const RetryAfter = 30 * time.Second

// Hit is a result an engine returns. For GitHub, Title is owner/repo (a
// repository), the issue title or the file path; for the Hub, Title is
// the repository id and the link is made from it.
type Hit struct {
	Title, URL, Snippet string
	Date                string // YYYY-MM-DD, written in each engine's format
}

// Request is one request an engine received.
type Request struct {
	Engine string
	Method string
	Path   string // below the engine's prefix: /search, /res/v1/web/search, ...
	Query  url.Values
	Header http.Header
	Body   []byte
}

// NewEngines starts the engines; they stop with the test.
func NewEngines(t testing.TB) *Engines {
	e := &Engines{
		done:     make(chan struct{}),
		now:      time.Now,
		fail:     map[string]Failure{},
		hits:     map[string][]Hit{},
		handlers: map[string]http.HandlerFunc{},
	}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.Close)
	return e
}

// Close ends hanging requests and stops the server.
func (e *Engines) Close() {
	e.closeOnce.Do(func() { close(e.done) })
	e.Server.Close()
}

// BaseURL is the engine's base URL, for web.*_base_url.
func (e *Engines) BaseURL(engine string) string { return e.URL + "/" + engine }

// Apply points the engines of w at the fake and sets their keys.
func (e *Engines) Apply(w *config.Web) {
	w.Engines = append([]string(nil), EngineNames...)
	w.SearXNGBaseURL = e.BaseURL(config.EngineSearXNG)
	w.TavilyBaseURL, w.TavilyAPIKey = e.BaseURL(config.EngineTavily), TavilyKey
	w.BraveBaseURL, w.BraveAPIKey = e.BaseURL(config.EngineBrave), BraveKey
	w.GitHubBaseURL, w.GitHubAPIKey = e.BaseURL(config.EngineGitHub), GitHubKey
	w.HuggingFaceBaseURL, w.HuggingFaceAPIKey = e.BaseURL(config.EngineHuggingFace), HuggingFaceKey
}

// Web is the default [web] section with all five engines pointing here.
func (e *Engines) Web() config.Web {
	w := config.Default().Web
	e.Apply(&w)
	return w
}

// Fail makes engine misbehave as f (Healthy restores it).
func (e *Engines) Fail(engine string, f Failure) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fail[engine] = f
}

// SetHits fixes what engine ("" for all) returns, whatever the query.
func (e *Engines) SetHits(engine string, hits ...Hit) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range names(engine) {
		e.hits[n] = hits
	}
}

// Handle answers engine's requests with h instead (after recording them):
// hostile or odd answers.
func (e *Engines) Handle(engine string, h http.HandlerFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.handlers[engine] = h
}

// SetClock sets the clock of rate-limit reset times (GitHub's epoch
// x-ratelimit-reset): a test's fake clock.
func (e *Engines) SetClock(now func() time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = now
}

// Requests lists what engine ("" for all) received, oldest first.
func (e *Engines) Requests(engine string) []Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Request
	for _, r := range e.reqs {
		if engine == "" || r.Engine == engine {
			out = append(out, r)
		}
	}
	return out
}

func names(engine string) []string {
	if engine == "" {
		return EngineNames
	}
	return []string{engine}
}

func (e *Engines) serve(w http.ResponseWriter, r *http.Request) {
	engine, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	rest = "/" + rest
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	e.mu.Lock()
	e.reqs = append(e.reqs, Request{Engine: engine, Method: r.Method, Path: rest, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body})
	h, f, now := e.handlers[engine], e.fail[engine], e.now()
	hits, set := e.hits[engine]
	e.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	x := &call{w: w, r: r, engine: engine, path: rest, body: body, now: now, hits: hits, set: set}
	if f == FailSlow {
		select {
		case <-r.Context().Done():
		case <-e.done:
		}
		return
	}
	switch engine {
	case config.EngineTavily:
		x.tavily(f)
	case config.EngineSearXNG:
		x.searxng(f)
	case config.EngineBrave:
		x.brave(f)
	case config.EngineGitHub:
		x.github(f)
	case config.EngineHuggingFace:
		x.huggingface(f)
	default:
		http.NotFound(w, r)
	}
}

// call is one request being answered.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	engine string
	path   string
	body   []byte
	now    time.Time
	hits   []Hit
	set    bool
}

func (x *call) json(status int, v any) {
	x.w.Header().Set("Content-Type", "application/json; charset=utf-8")
	x.w.WriteHeader(status)
	json.NewEncoder(x.w).Encode(v)
}

func (x *call) raw(status int, contentType, body string) {
	x.w.Header().Set("Content-Type", contentType)
	x.w.WriteHeader(status)
	io.WriteString(x.w, body)
}

// results are the hits for query q, n at most: those set, or three made
// from the query.
func (x *call) results(q string, n int) []Hit {
	if n <= 0 {
		n = 10
	}
	if x.set {
		return x.hits[:min(n, len(x.hits))]
	}
	slug := slugOf(q)
	var out []Hit
	for i := 1; i <= min(n, 3); i++ {
		out = append(out, Hit{
			Title:   fmt.Sprintf("%s: result %d from %s", q, i, x.engine),
			URL:     fmt.Sprintf("https://%s.example.com/%s/%d", x.engine, slug, i),
			Snippet: fmt.Sprintf("What %s found about %s, item %d.", x.engine, q, i),
			Date:    "2025-11-03",
		})
	}
	return out
}

func slugOf(q string) string {
	var words []string
	for _, w := range strings.Fields(q) {
		if !strings.Contains(w, ":") { // qualifiers (is:public) are not the topic
			words = append(words, w)
		}
	}
	var b strings.Builder
	for _, r := range strings.ToLower(strings.Join(words, " ")) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		return "q"
	}
	return s
}

// dateIn writes a YYYY-MM-DD date in layout; "" stays "".
func dateIn(d, layout string) string {
	t, err := time.Parse(time.DateOnly, d)
	if err != nil {
		return ""
	}
	return t.Add(8 * time.Hour).Format(layout)
}

const (
	malformedObject = `{"results": [{"title": "cut sh`
	malformedArray  = `[{"id": "cut sh`
	serverDown      = "<html><head><title>503 Service Temporarily Unavailable</title></head><body><center><h1>503 Service Temporarily Unavailable</h1></center><hr><center>nginx</center></body></html>"
)

// tavily: POST /search {"query", "max_results"} and GET /usage, with
// Authorization: Bearer KEY. Errors are {"detail": {"error": "..."}}.
func (x *call) tavily(f Failure) {
	detail := func(status int, msg string) {
		x.json(status, map[string]any{"detail": map[string]string{"error": msg}})
	}
	switch f {
	case FailAuth:
		detail(401, "Unauthorized: missing or invalid API key.")
		return
	case FailRateLimit:
		x.w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
		detail(429, "Your request has been blocked due to excessive requests. Please reduce rate of requests.")
		return
	case FailQuota:
		detail(432, "This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com")
		return
	case FailServer:
		detail(500, "Internal Server Error")
		return
	case FailJSONOff:
		detail(403, "Forbidden")
		return
	}
	if x.r.Header.Get("Authorization") != "Bearer "+TavilyKey {
		detail(401, "Unauthorized: missing or invalid API key.")
		return
	}
	switch {
	case x.path == "/usage" && x.r.Method == http.MethodGet:
		x.json(200, map[string]any{"key": map[string]any{"usage": 12, "limit": 1000},
			"account": map[string]any{"current_plan": "Researcher", "plan_usage": 12, "plan_limit": 1000}})
		return
	case x.path != "/search":
		x.json(404, map[string]string{"detail": "Not Found"})
		return
	case x.r.Method != http.MethodPost:
		x.json(405, map[string]string{"detail": "Method Not Allowed"})
		return
	}
	var req struct {
		Query      *string `json:"query"`
		MaxResults *int    `json:"max_results"`
	}
	if err := json.Unmarshal(x.body, &req); err != nil {
		detail(400, "Invalid JSON in request body.")
		return
	}
	switch {
	case req.Query == nil || strings.TrimSpace(*req.Query) == "":
		detail(400, "Query is missing.")
		return
	case utf8.RuneCountInString(*req.Query) > 400:
		detail(400, "Query is too long. Max query length is 400 characters.")
		return
	case req.MaxResults != nil && (*req.MaxResults < 0 || *req.MaxResults > 20):
		detail(400, "max_results must be between 0 and 20.")
		return
	}
	n := 5
	if req.MaxResults != nil {
		n = *req.MaxResults
	}
	if f == FailMalformed {
		x.raw(200, "application/json", malformedObject)
		return
	}
	results := []map[string]any{}
	if f != FailEmpty {
		for i, h := range x.results(*req.Query, n) {
			results = append(results, map[string]any{"title": h.Title, "url": h.URL, "content": h.Snippet,
				"score": 0.9 - float64(i)/20, "raw_content": nil, "published_date": dateIn(h.Date, time.RFC1123)})
		}
	}
	x.json(200, map[string]any{"query": *req.Query, "follow_up_questions": nil, "answer": nil, "images": []string{},
		"results": results, "response_time": 0.42, "request_id": "00000000-fake-tavily"})
}

// searxng: GET /search?q=&format=json; 403 when json is not in
// search.formats. No keys.
func (x *call) searxng(f Failure) {
	forbidden := "<!doctype html>\n<html lang=en>\n<title>403 Forbidden</title>\n<h1>Forbidden</h1>\n<p>You don&#39;t have the permission to access the requested resource. It is either read-protected or not readable by the server.</p>\n"
	switch f {
	case FailAuth:
		x.w.Header().Set("WWW-Authenticate", `Basic realm="searxng"`)
		x.raw(401, "text/html; charset=utf-8", "<h1>401 Authorization Required</h1>")
		return
	case FailRateLimit, FailQuota:
		x.w.Header().Set("Retry-After", strconv.Itoa(int(RetryAfter/time.Second)))
		x.raw(429, "text/html; charset=utf-8", "<h1>Too Many Requests</h1>")
		return
	case FailServer:
		x.raw(502, "text/html", strings.ReplaceAll(serverDown, "503 Service Temporarily Unavailable", "502 Bad Gateway"))
		return
	case FailJSONOff:
		x.raw(403, "text/html; charset=utf-8", forbidden)
		return
	}
	if x.path != "/search" && x.path != "/" {
		x.raw(404, "text/html", "<h1>Not Found</h1>")
		return
	}
	q := x.r.URL.Query()
	if x.r.Method == http.MethodPost {
		x.r.ParseForm()
		q = x.r.Form
	}
	if strings.TrimSpace(q.Get("q")) == "" {
		x.raw(400, "text/html", "<h1>Bad Request</h1>")
		return
	}
	if q.Get("format") != "json" {
		x.raw(200, "text/html; charset=utf-8", "<!DOCTYPE html><html><head><title>"+q.Get("q")+" - SearXNG</title></head><body><div id=results></div></body></html>")
		return
	}
	if f == FailMalformed {
		x.raw(200, "application/json", malformedObject)
		return
	}
	results := []map[string]any{}
	if f != FailEmpty {
		for i, h := range x.results(q.Get("q"), 10) {
			u, _ := url.Parse(h.URL)
			var parsed []string
			if u != nil {
				parsed = []string{u.Scheme, u.Host, u.Path, "", u.RawQuery, ""}
			}
			var published any
			if d := dateIn(h.Date, "2006-01-02T15:04:05"); d != "" {
				published = d
			}
			results = append(results, map[string]any{"url": h.URL, "title": h.Title, "content": h.Snippet,
				"engine": "duckduckgo", "engines": []string{"duckduckgo", "bing"}, "parsed_url": parsed, "template": "default.html",
				"positions": []int{i + 1}, "publishedDate": published, "score": 2.0 - float64(i)/10, "category": "general"})
		}
	}
	x.json(200, map[string]any{"query": q.Get("q"), "number_of_results": 0, "results": results, "answers": []any{},
		"corrections": []any{}, "infoboxes": []any{}, "suggestions": []any{}, "unresponsive_engines": []any{}})
}

// brave: GET /res/v1/web/search?q=&count= with X-Subscription-Token.
// Errors are {"type": "ErrorResponse", "error": {...}}; a bad token is a
// 422 SUBSCRIPTION_TOKEN_INVALID.
func (x *call) brave(f Failure) {
	braveErr := func(status int, code, detail string, meta map[string]any) {
		x.json(status, map[string]any{"type": "ErrorResponse", "error": map[string]any{"id": "9f3c-fake", "status": status,
			"code": code, "detail": detail, "meta": meta}, "time": x.now.Unix()})
	}
	tokenInvalid := func() {
		braveErr(422, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.", map[string]any{"component": "authentication"})
	}
	limits := func(remaining, reset string) {
		x.w.Header().Set("X-RateLimit-Limit", "1, 15000")
		x.w.Header().Set("X-RateLimit-Policy", "1;w=1, 15000;w=2592000")
		x.w.Header().Set("X-RateLimit-Remaining", remaining)
		x.w.Header().Set("X-RateLimit-Reset", reset)
	}
	switch f {
	case FailAuth:
		tokenInvalid()
		return
	case FailRateLimit:
		limits("0, 14000", strconv.Itoa(int(RetryAfter/time.Second))+", 1419704")
		braveErr(429, "RATE_LIMITED", "Request rate limit exceeded for plan.", map[string]any{"plan": "Free", "rate_limit": 1, "rate_current": 2, "quota_limit": 15000, "quota_current": 1000, "component": "rate_limiter"})
		return
	case FailQuota:
		limits("1, 0", "1, 86400")
		braveErr(429, "RATE_LIMITED", "Request quota exceeded for plan.", map[string]any{"plan": "Free", "quota_limit": 15000, "quota_current": 15000, "component": "rate_limiter"})
		return
	case FailServer:
		x.raw(503, "text/html", serverDown)
		return
	case FailJSONOff:
		braveErr(403, "FORBIDDEN", "Forbidden.", map[string]any{})
		return
	}
	if x.r.Header.Get("X-Subscription-Token") != BraveKey {
		tokenInvalid()
		return
	}
	if x.path != "/res/v1/web/search" {
		braveErr(404, "RESOURCE_NOT_FOUND", "Resource not found.", map[string]any{})
		return
	}
	if x.r.Method != http.MethodGet {
		braveErr(405, "METHOD_NOT_ALLOWED", "Method not allowed.", map[string]any{})
		return
	}
	q := x.r.URL.Query()
	n := 20
	if c := q.Get("count"); c != "" {
		v, err := strconv.Atoi(c)
		if err != nil || v < 1 || v > 20 {
			braveErr(422, "VALIDATION", "Unable to validate request parameter(s)", map[string]any{"errors": []map[string]any{{"loc": []string{"query", "count"}, "msg": "ensure this value is less than or equal to 20"}}})
			return
		}
		n = v
	}
	if strings.TrimSpace(q.Get("q")) == "" {
		braveErr(422, "VALIDATION", "Unable to validate request parameter(s)", map[string]any{"errors": []map[string]any{{"loc": []string{"query", "q"}, "msg": "field required"}}})
		return
	}
	limits("1, 14999", "1, 1419704")
	if f == FailMalformed {
		x.raw(200, "application/json", `{"type": "search", "web": {"type": "search", "results": [{"title": "cut`)
		return
	}
	resp := map[string]any{"type": "search", "query": map[string]any{"original": q.Get("q"), "show_strict_warning": false, "is_navigational": false}}
	if f != FailEmpty {
		results := []map[string]any{}
		for _, h := range x.results(q.Get("q"), n) {
			u, _ := url.Parse(h.URL)
			meta := map[string]any{}
			if u != nil {
				meta = map[string]any{"scheme": u.Scheme, "netloc": u.Host, "hostname": u.Hostname(), "path": u.Path}
			}
			results = append(results, map[string]any{"type": "search_result", "subtype": "generic", "title": h.Title, "url": h.URL,
				"description": h.Snippet, "page_age": dateIn(h.Date, "2006-01-02T15:04:05"), "age": dateIn(h.Date, "January 2, 2006"),
				"language": "en", "family_friendly": true, "is_source_local": false, "meta_url": meta, "profile": map[string]any{"name": meta["hostname"]}})
		}
		resp["web"] = map[string]any{"type": "search", "results": results, "family_friendly": true}
	}
	x.json(200, resp)
}

// github: GET /search/{repositories,issues,code}?q=&per_page= and GET
// /rate_limit; Accept: application/vnd.github+json, X-GitHub-Api-Version
// and an optional Authorization: Bearer TOKEN. Code search needs a token.
// Errors are {"message", "documentation_url", "status"}.
func (x *call) github(f Failure) {
	ghErr := func(status int, msg string) {
		x.json(status, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(status)})
	}
	reset := x.now.Add(RetryAfter).Unix()
	rate := func(remaining int) {
		x.w.Header().Set("X-RateLimit-Limit", "30")
		x.w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		x.w.Header().Set("X-RateLimit-Used", strconv.Itoa(30-remaining))
		x.w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
		x.w.Header().Set("X-RateLimit-Resource", "search")
	}
	switch f {
	case FailAuth:
		ghErr(401, "Bad credentials")
		return
	case FailRateLimit, FailQuota:
		rate(0)
		ghErr(403, "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)")
		return
	case FailServer:
		ghErr(503, "Service Unavailable")
		return
	case FailJSONOff:
		ghErr(403, "Resource not accessible by personal access token")
		return
	}
	if v := x.r.Header.Get("X-GitHub-Api-Version"); v != "" && v != "2022-11-28" {
		ghErr(400, fmt.Sprintf("API version '%s' is not supported.", v))
		return
	}
	auth := x.r.Header.Get("Authorization")
	if auth != "" && auth != "Bearer "+GitHubKey && auth != "token "+GitHubKey {
		ghErr(401, "Bad credentials")
		return
	}
	if x.r.Method != http.MethodGet {
		ghErr(404, "Not Found")
		return
	}
	if x.path == "/rate_limit" {
		res := map[string]any{"limit": 30, "remaining": 30, "reset": reset, "used": 0, "resource": "search"}
		x.json(200, map[string]any{"resources": map[string]any{"core": map[string]any{"limit": 5000, "remaining": 5000, "reset": reset, "used": 0}, "search": res}, "rate": res})
		return
	}
	kind, ok := strings.CutPrefix(x.path, "/search/")
	if !ok || (kind != "repositories" && kind != "issues" && kind != "code") {
		ghErr(404, "Not Found")
		return
	}
	if kind == "code" && auth == "" {
		ghErr(401, "Requires authentication")
		return
	}
	q := strings.TrimSpace(x.r.URL.Query().Get("q"))
	if q == "" {
		x.json(422, map[string]any{"message": "Validation Failed", "errors": []map[string]string{{"resource": "Search", "field": "q", "code": "missing"}},
			"documentation_url": "https://docs.github.com/rest/search/search", "status": "422"})
		return
	}
	if kind == "issues" && !strings.Contains(q, "is:issue") && !strings.Contains(q, "is:pr") && !strings.Contains(q, "is:pull-request") && !strings.Contains(q, "type:") {
		ghErr(422, "Query must include 'is:issue' or 'is:pull-request'")
		return
	}
	n := 30
	if v, err := strconv.Atoi(x.r.URL.Query().Get("per_page")); err == nil && v > 0 {
		n = min(v, 100)
	}
	rate(29)
	if f == FailMalformed {
		x.raw(200, "application/json", `{"total_count": 1, "incomplete_results": false, "items": [{"full_name": "cut`)
		return
	}
	items := []map[string]any{}
	if f != FailEmpty {
		query := strings.TrimSpace(strings.NewReplacer("is:issue", "", "is:pr", "").Replace(q))
		for i, h := range x.results(query, n) {
			items = append(items, githubItem(kind, h, x.set, query, i+1))
		}
	}
	x.json(200, map[string]any{"total_count": len(items), "incomplete_results": false, "items": items})
}

// githubItem is one search item of kind from h; made-up hits become
// example/<slug>-N repositories.
func githubItem(kind string, h Hit, set bool, q string, i int) map[string]any {
	repo := fmt.Sprintf("example/%s-%d", slugOf(q), i)
	link := "https://github.com/" + repo
	if set {
		link = h.URL
		if u, err := url.Parse(h.URL); err == nil {
			if p := strings.Split(strings.Trim(u.Path, "/"), "/"); len(p) >= 2 {
				repo = p[0] + "/" + p[1]
			}
		}
	}
	date := dateIn(h.Date, time.RFC3339)
	switch kind {
	case "issues":
		if !set {
			link += fmt.Sprintf("/issues/%d", 100+i)
		}
		return map[string]any{"title": h.Title, "html_url": link, "number": 100 + i, "state": "open", "body": h.Snippet,
			"repository_url": "https://api.github.com/repos/" + repo, "updated_at": date, "comments": 3, "user": map[string]any{"login": "octocat"}}
	case "code":
		path := "pkg/" + slugOf(q) + ".go"
		if set {
			path = h.Title
		} else {
			link += "/blob/main/" + path
		}
		return map[string]any{"name": path[strings.LastIndex(path, "/")+1:], "path": path, "sha": "0123abcd", "html_url": link,
			"repository":   map[string]any{"full_name": repo, "html_url": "https://github.com/" + repo},
			"text_matches": []map[string]any{{"fragment": h.Snippet, "property": "content"}}}
	}
	if set && strings.Contains(h.Title, "/") {
		repo = h.Title
	}
	return map[string]any{"id": 1000 + i, "name": repo[strings.Index(repo, "/")+1:], "full_name": repo, "html_url": link,
		"description": h.Snippet, "stargazers_count": 1200 / i, "language": "Go", "updated_at": date, "pushed_at": date,
		"owner": map[string]any{"login": repo[:strings.Index(repo, "/")]}}
}

// huggingface: GET /api/{models,datasets,spaces}?search=&limit=&sort=;
// an Authorization: Bearer TOKEN is optional but must be valid. Errors
// are {"error": "..."}; 429 carries RateLimit: "api";r=0;t=SECONDS.
func (x *call) huggingface(f Failure) {
	hfErr := func(status int, msg string) { x.json(status, map[string]string{"error": msg}) }
	switch f {
	case FailAuth:
		hfErr(401, "Invalid credentials in Authorization header")
		return
	case FailRateLimit, FailQuota:
		x.w.Header().Set("RateLimit", fmt.Sprintf(`"api";r=0;t=%d`, int(RetryAfter/time.Second)))
		x.w.Header().Set("RateLimit-Policy", `"fixed window";"api";q=500;w=300`)
		hfErr(429, "You have exceeded our hourly quotas for action: api. We invite you to retry later.")
		return
	case FailServer:
		x.raw(503, "text/html", serverDown)
		return
	case FailJSONOff:
		hfErr(403, "Forbidden")
		return
	}
	if auth := x.r.Header.Get("Authorization"); auth != "" && auth != "Bearer "+HuggingFaceKey {
		hfErr(401, "Invalid credentials in Authorization header")
		return
	}
	kind, ok := strings.CutPrefix(x.path, "/api/")
	if !ok || (kind != "models" && kind != "datasets" && kind != "spaces") || x.r.Method != http.MethodGet {
		hfErr(404, "Sorry, we can't find the page you are looking for.")
		return
	}
	q := x.r.URL.Query()
	n := 1000
	if l := q.Get("limit"); l != "" {
		v, err := strconv.Atoi(l)
		if err != nil || v < 1 {
			hfErr(400, `"limit" must be a positive integer`)
			return
		}
		n = min(v, 1000)
	}
	x.w.Header().Set("RateLimit", `"api";r=499;t=250`)
	x.w.Header().Set("RateLimit-Policy", `"fixed window";"api";q=500;w=300`)
	if f == FailMalformed {
		x.raw(200, "application/json", malformedArray)
		return
	}
	out := []map[string]any{}
	if f != FailEmpty {
		search := q.Get("search")
		if search == "" {
			search = "bert"
		}
		for i, h := range x.results(search, n) {
			id := h.Title
			if !x.set {
				id = fmt.Sprintf("example/%s-%d", slugOf(search), i+1)
			}
			item := map[string]any{"_id": fmt.Sprintf("65f0%020d", i), "id": id, "likes": 340 / (i + 1), "trendingScore": 3,
				"private": false, "downloads": 120000 / (i + 1), "tags": []string{"transformers", "safetensors"},
				"createdAt": "2022-03-02T23:29:04.000Z", "lastModified": dateIn(h.Date, "2006-01-02T15:04:05.000Z")}
			switch kind {
			case "models":
				item["modelId"], item["pipeline_tag"], item["library_name"] = id, "text-generation", "transformers"
			case "datasets":
				item["description"], item["author"] = h.Snippet, strings.Split(id, "/")[0]
			case "spaces":
				item["sdk"] = "gradio"
				item["cardData"] = map[string]any{"title": h.Title, "short_description": h.Snippet}
				delete(item, "downloads")
			}
			out = append(out, item)
		}
	}
	x.json(200, out)
}
