package doctor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"agent/pkg/config"
	"agent/pkg/websearch"
)

// webNeeds says what a listed engine lacks to be offered.
var webNeeds = map[string]string{
	config.EngineSearXNG:     "no web.searxng_base_url",
	config.EngineTavily:      "no web.tavily_api_key",
	config.EngineBrave:       "no web.brave_api_key",
	config.EngineGitHub:      "no web.github_base_url",
	config.EngineHuggingFace: "no web.huggingface_base_url",
}

const webHowTo = "set web.searxng_base_url (a SearXNG with json in search.formats of its settings.yml), or web.tavily_api_key or web.brave_api_key; list the engines in web.engines"

// checkWeb lists the web_search engines and probes each as cheaply as it
// allows: Tavily GET /usage and GitHub GET /rate_limit (both free), a
// limit=1 Hugging Face listing, one SearXNG JSON search (which also proves
// the JSON format is on). Brave has no free endpoint: its probe is a
// count=1 search that counts against the plan.
func (e Env) checkWeb(ctx context.Context) Result {
	w := e.Config.Web
	r := websearch.New(websearch.Config{Web: w, HTTP: e.HTTP})
	names := r.Engines()
	var unset []string
	for _, n := range w.Engines {
		if !websearch.Configured(w, n) {
			unset = append(unset, n+" ("+webNeeds[n]+")")
		}
	}
	if len(names) == 0 {
		d := "web_search is not offered: no engine is configured"
		if len(unset) > 0 {
			d += "; listed but not configured: " + strings.Join(unset, ", ")
		}
		return Result{Level: Warn, Detail: d, Fix: webHowTo}
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		eng, _ := r.Engine(n)
		wg.Go(func() { errs[i] = eng.Check(ctx) })
	}
	wg.Wait()
	level := OK
	var parts, fixes []string
	for i, n := range names {
		err := errs[i]
		if err == nil {
			s := n + " ok"
			if n == config.EngineBrave {
				s += " (probed with a count=1 search: Brave has no free endpoint)"
			}
			parts = append(parts, s)
			continue
		}
		level = Warn
		detail, fix := webProblem(n, err)
		parts = append(parts, n+" "+detail)
		if fix != "" && !slices.Contains(fixes, fix) {
			fixes = append(fixes, fix)
		}
	}
	d := "web_search engines: " + strings.Join(parts, "; ")
	if len(unset) > 0 {
		d += "; listed but not configured: " + strings.Join(unset, ", ")
	}
	if !r.HasGeneral() {
		level = Warn
		d += "; no general web engine, so only code and model questions are searched"
		fixes = append(fixes, webHowTo)
	}
	return Result{Level: level, Detail: d, Fix: strings.Join(fixes, "; ")}
}

// webProblem words an engine's probe failure and its fix.
func webProblem(engine string, err error) (string, string) {
	var ee *websearch.EngineError
	if !errors.As(err, &ee) {
		return "FAILED: " + err.Error(), ""
	}
	switch {
	case errors.Is(ee, websearch.ErrAuth):
		return "BAD KEY: " + ee.Msg, ee.Fix
	case errors.Is(ee, websearch.ErrUnavailable) && ee.Status == 0:
		return "UNREACHABLE: " + strings.TrimPrefix(ee.Msg, "unreachable: "), "check network, DNS and proxy (HTTPS_PROXY), or web." + engine + "_base_url"
	case errors.Is(ee, websearch.ErrRateLimited):
		return "RATE LIMITED: " + ee.Msg, ee.Fix
	case errors.Is(ee, websearch.ErrMalformed):
		return "ANSWERS WRONGLY: " + ee.Msg, "check web." + engine + "_base_url"
	}
	fix := ee.Fix
	if fix == "" && ee.Status >= 500 {
		fix = "the service is failing; try again later"
	}
	return "FAILED: " + ee.Msg, fix
}
