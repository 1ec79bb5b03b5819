// Package websearch is the web_search tool: five search engines behind one
// router that picks an engine by the query and falls back when one fails.
//
// Each engine speaks its real API: Tavily (POST /search), a self-hosted
// SearXNG (GET /search?format=json), the Brave Search API
// (GET /res/v1/web/search), GitHub search (repositories, issues, code) and
// the Hugging Face Hub listings (models, datasets, spaces). Results are
// normalised to title, URL, snippet, source and date; every response is
// untrusted input, read up to MaxBody and cleaned of markup and control
// characters.
//
// Routing for "auto": code and repository queries go to GitHub first,
// model and dataset queries to Hugging Face first, everything else to the
// general engines (searxng, tavily, brave) in the configured order. An
// engine that fails, answers malformed JSON or finds nothing hands over to
// the next; one that answered 429 is skipped until its Retry-After passes.
//
// Every outbound request is logged at Info with its engine, destination
// host, status, bytes and result count; the query text only at Debug.
package websearch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"agent/pkg/clock"
	"agent/pkg/config"
)

// Result is one search hit, normalised across engines.
type Result struct {
	Title   string
	URL     string
	Snippet string
	// Source is where the hit comes from: the page's host,
	// "github.com/owner/repo", "huggingface.co/org/model" or the SearXNG
	// engine that found it.
	Source string
	// Date is YYYY-MM-DD when the engine knows it.
	Date string
}

// Query is one search.
type Query struct {
	Text string
	Max  int // results wanted, 1..MaxResults
}

// Engine is one search backend.
type Engine interface {
	Name() string
	Search(ctx context.Context, q Query) ([]Result, error)
	// Check probes the engine cheaply (a free endpoint where one exists)
	// and says what is wrong with its configuration, if anything.
	Check(ctx context.Context) error
}

// Limits.
const (
	// MaxResults is the most results one search returns.
	MaxResults = 20
	// MaxQueryRunes is the longest query accepted (Tavily's own limit).
	MaxQueryRunes = 400
	// MaxBody is the most bytes read from one engine response.
	MaxBody = 2 << 20
)

// Config of a Router.
type Config struct {
	Web config.Web
	// HTTP sends the requests; nil makes a client that honours
	// HTTP(S)_PROXY and Web.Timeout.
	HTTP   *http.Client
	Clock  clock.Clock
	Logger *slog.Logger
}

// Router holds the configured engines and routes searches between them.
// It is safe for concurrent use.
type Router struct {
	engines map[string]Engine
	order   []string // configured engines, in the configured order
	max     int
	clock   clock.Clock
	log     *slog.Logger

	mu       sync.Mutex
	cooldown map[string]time.Time // rate-limited engine -> when to try again
}

// General engines answer any question; GitHub and Hugging Face answer
// about code and models.
var generalEngines = []string{config.EngineSearXNG, config.EngineTavily, config.EngineBrave}

func isGeneral(name string) bool { return slices.Contains(generalEngines, name) }

// New builds the router from cfg. Only engines that are listed in
// Web.Engines and configured exist: searxng needs a base URL, tavily and
// brave an API key; github and huggingface work without a key.
func New(cfg Config) *Router {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "web_search")
	w := cfg.Web
	timeout := w.Timeout.Duration
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	r := &Router{
		engines:  map[string]Engine{},
		max:      w.MaxResults,
		clock:    clock.Or(cfg.Clock),
		log:      log,
		cooldown: map[string]time.Time{},
	}
	if r.max <= 0 {
		r.max = 5
	}
	r.max = min(r.max, MaxResults)
	hc := httpClient(cfg.HTTP, timeout)
	for _, name := range w.Engines {
		if _, dup := r.engines[name]; dup || !Configured(w, name) {
			continue
		}
		baseURL, key, _ := settings(w, name)
		b := base{name: name, baseURL: strings.TrimRight(baseURL, "/"), key: key, http: hc, clock: r.clock, log: log, timeout: timeout}
		r.engines[name] = engineKinds[name](b)
		r.order = append(r.order, name)
	}
	return r
}

// engineKinds make each engine from its base.
var engineKinds = map[string]func(base) Engine{
	config.EngineSearXNG:     func(b base) Engine { return &searxng{b} },
	config.EngineTavily:      func(b base) Engine { return &tavily{b} },
	config.EngineBrave:       func(b base) Engine { return &brave{b} },
	config.EngineGitHub:      func(b base) Engine { return &github{b} },
	config.EngineHuggingFace: func(b base) Engine { return &huggingface{b} },
}

// settings are an engine's base URL and key under w, and whether it needs
// the key (tavily and brave do; searxng has none; github and huggingface
// work without).
func settings(w config.Web, engine string) (baseURL, key string, needsKey bool) {
	switch engine {
	case config.EngineSearXNG:
		return w.SearXNGBaseURL, "", false
	case config.EngineTavily:
		return w.TavilyBaseURL, w.TavilyAPIKey, true
	case config.EngineBrave:
		return w.BraveBaseURL, w.BraveAPIKey, true
	case config.EngineGitHub:
		return w.GitHubBaseURL, w.GitHubAPIKey, false
	case config.EngineHuggingFace:
		return w.HuggingFaceBaseURL, w.HuggingFaceAPIKey, false
	}
	return "", "", false
}

// Configured reports whether engine is offered under w: listed in
// w.Engines, with a base URL, and with an API key where it needs one
// (tavily, brave).
func Configured(w config.Web, engine string) bool {
	baseURL, key, needsKey := settings(w, engine)
	return slices.Contains(w.Engines, engine) && engineKinds[engine] != nil && baseURL != "" && (key != "" || !needsKey)
}

// httpClient returns hc, or a client of its own, refusing redirects to
// another host: a key header such as X-Subscription-Token would follow
// them (net/http strips only Authorization and cookies).
func httpClient(hc *http.Client, timeout time.Duration) *http.Client {
	var c http.Client
	if hc != nil {
		c = *hc
	} else {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = http.ProxyFromEnvironment
		c = http.Client{Transport: t, Timeout: timeout}
	}
	if c.CheckRedirect == nil {
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("too many redirects")
			}
			// The key headers would follow: same host and scheme only.
			if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
				return http.ErrUseLastResponse
			}
			return nil
		}
	}
	return &c
}

// Engines lists the configured engines in the configured order.
func (r *Router) Engines() []string { return slices.Clone(r.order) }

// Engine returns a configured engine (doctor probes them one by one).
func (r *Router) Engine(name string) (Engine, bool) {
	e, ok := r.engines[name]
	return e, ok
}

// HasGeneral reports whether a general web engine (searxng, tavily or
// brave) is configured.
func (r *Router) HasGeneral() bool {
	return slices.ContainsFunc(r.order, isGeneral)
}

// MaxResults is the number of results a search returns by default.
func (r *Router) MaxResults() int { return r.max }

// Engine choices besides the engine names.
const (
	Auto = "auto" // route by the query, fall back on failure
	Web  = "web"  // the general engines only, with fallback
)

// Outcome is what a search found.
type Outcome struct {
	// Engine answered (or, with no results, was the last one tried).
	Engine  string
	Results []Result
	// Failed lists the engines tried or skipped before Engine, and why.
	Failed []Failure
}

// Failure is one engine that did not answer.
type Failure struct {
	Engine string
	Err    error
}

// Search runs q on engine ("", "auto", "web" or an engine name). With auto
// and web it falls back from engine to engine; an engine named explicitly
// is the only one tried. It returns an error only when no engine answered:
// a *SearchError naming each engine's failure, or ErrNotConfigured.
func (r *Router) Search(ctx context.Context, engine string, q Query) (*Outcome, error) {
	q.Text = strings.TrimSpace(q.Text)
	if q.Text == "" {
		return nil, errors.New("web search: empty query")
	}
	if q.Max <= 0 {
		q.Max = r.max
	}
	q.Max = min(q.Max, MaxResults)
	plan, err := r.plan(engine, q.Text)
	if err != nil {
		return nil, err
	}
	r.log.Debug("web search", "engine", engine, "plan", plan, "query", q.Text)
	out := &Outcome{}
	answered := false
	for _, name := range plan {
		if until, ok := r.coolingDown(name); ok {
			out.Failed = append(out.Failed, Failure{name, &EngineError{Engine: name, Kind: ErrRateLimited,
				RetryAfter: until.Sub(r.clock.Now()), Msg: "rate limited earlier; skipped until " + until.UTC().Format(time.TimeOnly) + " UTC"}})
			continue
		}
		if err := ctx.Err(); err != nil {
			out.Failed = append(out.Failed, Failure{name, err})
			break
		}
		res, err := r.engines[name].Search(ctx, q)
		if err != nil {
			r.noteFailure(name, err)
			out.Failed = append(out.Failed, Failure{name, err})
			continue
		}
		answered = true
		out.Engine = name
		if len(res) > 0 {
			out.Results = res[:min(len(res), q.Max)]
			return out, nil
		}
		out.Failed = append(out.Failed, Failure{name, ErrNoResults})
	}
	if answered { // every engine that answered found nothing
		out.Failed = slices.DeleteFunc(out.Failed, func(f Failure) bool { return f.Engine == out.Engine })
		return out, nil
	}
	return nil, &SearchError{Failures: out.Failed}
}

// plan lists the engines to try, in order.
func (r *Router) plan(engine, text string) ([]string, error) {
	var general []string
	for _, n := range r.order {
		if isGeneral(n) {
			general = append(general, n)
		}
	}
	switch engine {
	case "", Auto:
		lead := ""
		switch classify(text) {
		case topicCode:
			lead = config.EngineGitHub
		case topicML:
			lead = config.EngineHuggingFace
		}
		if _, ok := r.engines[lead]; ok {
			return append([]string{lead}, general...), nil
		}
		if len(general) == 0 {
			return nil, fmt.Errorf("%w: no general web engine is configured (only %s, for code and models); an operator can set web.searxng_base_url, web.tavily_api_key or web.brave_api_key",
				ErrNotConfigured, strings.Join(r.order, " and "))
		}
		return general, nil
	case Web:
		if len(general) == 0 {
			return nil, fmt.Errorf("%w: no general web engine (searxng, tavily, brave) is configured; configured: %s", ErrNotConfigured, r.choices())
		}
		return general, nil
	}
	if _, ok := r.engines[engine]; !ok {
		return nil, fmt.Errorf("%w: engine %q is not configured here; use one of: %s", ErrNotConfigured, engine, r.choices())
	}
	return []string{engine}, nil
}

// Choices lists what a caller may pass as engine: auto, web (with a
// general engine) and the configured engines.
func (r *Router) Choices() []string {
	c := []string{Auto}
	if r.HasGeneral() {
		c = append(c, Web)
	}
	return append(c, r.order...)
}

func (r *Router) choices() string {
	if len(r.order) == 0 {
		return "none"
	}
	return strings.Join(r.Choices(), ", ")
}

// Cooldown when a rate-limited engine did not say how long to wait.
const defaultCooldown = time.Minute

func (r *Router) noteFailure(name string, err error) {
	var ee *EngineError
	if !errors.As(err, &ee) || !errors.Is(ee.Kind, ErrRateLimited) {
		return
	}
	d := ee.RetryAfter
	if d <= 0 {
		d = defaultCooldown
	}
	r.mu.Lock()
	r.cooldown[name] = r.clock.Now().Add(d)
	r.mu.Unlock()
}

func (r *Router) coolingDown(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.cooldown[name]
	if !ok {
		return time.Time{}, false
	}
	if !r.clock.Now().Before(until) {
		delete(r.cooldown, name)
		return time.Time{}, false
	}
	return until, true
}
