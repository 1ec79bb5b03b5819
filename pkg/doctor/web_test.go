package doctor

import (
	"context"
	"strings"
	"testing"

	"agent/pkg/config"
	"agent/pkg/webtest"
)

func webEnv(t *testing.T, fake *webtest.Engines, edit func(w *config.Web)) Env {
	t.Helper()
	e := baseEnv(t, "", nil)
	fake.Apply(&e.Config.Web)
	if edit != nil {
		edit(&e.Config.Web)
	}
	return e
}

func TestWebCheck(t *testing.T) {
	fake := webtest.NewEngines(t)
	e := webEnv(t, fake, nil)
	r := e.checkWeb(context.Background())
	if r.Level != OK || r.Fix != "" {
		t.Fatalf("all healthy: %+v", r)
	}
	for _, w := range []string{"searxng ok", "tavily ok", "brave ok (probed with a count=1 search", "github ok", "huggingface ok"} {
		if !strings.Contains(r.Detail, w) {
			t.Errorf("detail %q does not say %q", r.Detail, w)
		}
	}
	// The cheap probes.
	probes := map[string]string{"tavily": "GET /usage", "github": "GET /rate_limit", "huggingface": "GET /api/models", "searxng": "GET /search", "brave": "GET /res/v1/web/search"}
	for engine, want := range probes {
		reqs := fake.Requests(engine)
		if len(reqs) != 1 || reqs[0].Method+" "+reqs[0].Path != want {
			t.Errorf("%s probed with %+v, want one %s", engine, reqs, want)
		}
	}
	if got := fake.Requests("huggingface")[0].Query.Get("limit"); got != "1" {
		t.Errorf("hub listing limit %s", got)
	}
	if got := fake.Requests("brave")[0].Query.Get("count"); got != "1" {
		t.Errorf("brave count %s", got)
	}
	if got := fake.Requests("searxng")[0].Query.Get("format"); got != "json" {
		t.Errorf("searxng format %s", got)
	}
}

func TestWebCheckProblems(t *testing.T) {
	fake := webtest.NewEngines(t)
	fake.Fail(config.EngineTavily, webtest.FailAuth)
	fake.Fail(config.EngineSearXNG, webtest.FailJSONOff)
	fake.Fail(config.EngineGitHub, webtest.FailRateLimit)
	e := webEnv(t, fake, func(w *config.Web) { w.HuggingFaceBaseURL = "http://127.0.0.1:1" })
	r := e.checkWeb(context.Background())
	if r.Level != Warn {
		t.Fatalf("level %s: %+v", r.Level, r)
	}
	for _, w := range []string{"tavily BAD KEY: the API key was rejected (HTTP 401)", "searxng FAILED: the instance refused format=json", "github RATE LIMITED",
		"huggingface UNREACHABLE", "brave ok"} {
		if !strings.Contains(r.Detail, w) {
			t.Errorf("detail %q does not say %q", r.Detail, w)
		}
	}
	for _, w := range []string{"web.tavily_api_key", "settings.yml", "web.huggingface_base_url"} {
		if !strings.Contains(r.Fix, w) {
			t.Errorf("fix %q does not say %q", r.Fix, w)
		}
	}
	for _, k := range []string{webtest.TavilyKey, webtest.BraveKey, webtest.GitHubKey, webtest.HuggingFaceKey} {
		if strings.Contains(r.Detail+r.Fix, k) {
			t.Errorf("the result holds a key: %+v", r)
		}
	}
}

func TestWebCheckNotOffered(t *testing.T) {
	fake := webtest.NewEngines(t)
	e := webEnv(t, fake, func(w *config.Web) {
		w.Engines = []string{config.EngineTavily, config.EngineBrave}
		w.TavilyAPIKey, w.BraveAPIKey = "", ""
	})
	r := e.checkWeb(context.Background())
	if r.Level != Warn || !strings.Contains(r.Detail, "web_search is not offered") ||
		!strings.Contains(r.Detail, "tavily (no web.tavily_api_key)") || !strings.Contains(r.Fix, "web.searxng_base_url") {
		t.Errorf("nothing configured: %+v", r)
	}
	if n := len(fake.Requests("")); n != 0 {
		t.Errorf("%d probes with nothing configured", n)
	}

	// Only GitHub and the Hub (the defaults without keys): offered, but
	// general questions go unsearched.
	e = webEnv(t, fake, func(w *config.Web) { w.SearXNGBaseURL, w.TavilyAPIKey, w.BraveAPIKey = "", "", "" })
	r = e.checkWeb(context.Background())
	if r.Level != Warn || !strings.Contains(r.Detail, "github ok; huggingface ok") || !strings.Contains(r.Detail, "no general web engine") ||
		!strings.Contains(r.Detail, "searxng (no web.searxng_base_url)") || !strings.Contains(r.Fix, "web.tavily_api_key") {
		t.Errorf("github and huggingface only: %+v", r)
	}
}

func TestWebCheckRegistered(t *testing.T) {
	e := baseEnv(t, "", nil)
	for _, c := range Checks(e) {
		if c.Name == "web" {
			return
		}
	}
	t.Error("the web check is not in Checks")
}
