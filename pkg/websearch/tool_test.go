package websearch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"agent/pkg/config"
	"agent/pkg/tools"
	"agent/pkg/webtest"
)

func runTool(t *testing.T, r *Router, args any) (string, error) {
	t.Helper()
	reg := tools.NewRegistry()
	if err := reg.Register(r.Tool()); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(args)
	return reg.Run(context.Background(), "web_search", tools.Call{Args: b})
}

func enumOf(t *testing.T, tool tools.Tool) []string {
	t.Helper()
	var s struct {
		Properties map[string]struct {
			Enum []string `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(tool.Schema, &s); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Required, []string{"query"}) {
		t.Errorf("required %v, want [query]", s.Required)
	}
	return s.Properties["engine"].Enum
}

// The engine enum offers only what is configured.
func TestToolSchemaEnum(t *testing.T) {
	f := newFixture(t, nil)
	if got := enumOf(t, f.r.Tool()); !slices.Equal(got, []string{"auto", "web", "searxng", "tavily", "brave", "github", "huggingface"}) {
		t.Errorf("enum %v", got)
	}
	f = newFixture(t, func(w *config.Web) { w.TavilyAPIKey, w.SearXNGBaseURL = "", "" })
	if got := enumOf(t, f.r.Tool()); !slices.Equal(got, []string{"auto", "web", "brave", "github", "huggingface"}) {
		t.Errorf("enum without tavily and searxng: %v", got)
	}
	f = newFixture(t, func(w *config.Web) { w.SearXNGBaseURL, w.TavilyAPIKey, w.BraveAPIKey = "", "", "" })
	tool := f.r.Tool()
	if got := enumOf(t, tool); !slices.Equal(got, []string{"auto", "github", "huggingface"}) {
		t.Errorf("enum with no general engine: %v", got)
	}
	if !strings.Contains(tool.Description, "No general web engine") {
		t.Errorf("description: %s", tool.Description)
	}
}

func TestToolOutput(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.SetHits(config.EngineSearXNG,
		webtest.Hit{Title: "Harbour city opens tidal station", URL: "https://news.example.com/tidal", Snippet: "The station produced 40 MW.", Date: "2026-02-10"},
		webtest.Hit{Title: "Tidal power explained", URL: "https://wiki.example.org/Tidal_power", Snippet: "Tidal power converts tides."})
	out, err := runTool(t, f.r, map[string]any{"query": "harbour tidal station"})
	if err != nil {
		t.Fatal(err)
	}
	want := `2 results from searxng:

1. Harbour city opens tidal station
   https://news.example.com/tidal
   The station produced 40 MW.
   duckduckgo · 2026-02-10

2. Tidal power explained
   https://wiki.example.org/Tidal_power
   Tidal power converts tides.
   duckduckgo

` + Footer + "\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}

	// A failure before the answer is named in the header.
	f.fake.Fail(config.EngineSearXNG, webtest.FailServer)
	out, err = runTool(t, f.r, map[string]any{"query": "harbour tidal station", "max_results": 2})
	if err != nil || !strings.HasPrefix(out, "2 results from tavily (searxng: HTTP 502):\n") {
		t.Errorf("after a failure: %q, %v", out, err)
	}
	if got := f.fake.Requests(config.EngineTavily)[0].Body; !strings.Contains(string(got), `"max_results":2`) {
		t.Errorf("max_results not passed: %s", got)
	}

	// max_results is capped at 20.
	if _, err := runTool(t, f.r, map[string]any{"query": "x", "engine": "brave", "max_results": 500}); err != nil {
		t.Fatal(err)
	}
	if got := f.fake.Requests(config.EngineBrave)[0].Query.Get("count"); got != "20" {
		t.Errorf("count %s, want 20", got)
	}
	// The default is web.max_results.
	if _, err := runTool(t, f.r, map[string]any{"query": "x", "engine": "github"}); err != nil {
		t.Fatal(err)
	}
	if got := f.fake.Requests(config.EngineGitHub)[0].Query.Get("per_page"); got != "5" {
		t.Errorf("per_page %s, want the default 5", got)
	}

	// Nothing found anywhere.
	for _, e := range webtest.EngineNames {
		f.fake.Fail(e, webtest.FailEmpty)
	}
	out, err = runTool(t, f.r, map[string]any{"query": "zzzz", "engine": "tavily"})
	if err != nil || out != "No results from tavily. Try other words or another engine.\n" {
		t.Errorf("no results: %q, %v", out, err)
	}
}

func TestToolBadArgs(t *testing.T) {
	f := newFixture(t, func(w *config.Web) { w.BraveAPIKey = "" })
	for _, args := range []map[string]any{
		{"query": ""},
		{"query": "   "},
		{},
		{"query": strings.Repeat("长", MaxQueryRunes+1)},
		{"query": "x", "max_results": -1},
		{"query": "x", "engine": "brave"},
		{"query": "x", "engine": "google"},
		{"query": "x", "extra": 1},
		{"query": 5},
	} {
		_, err := runTool(t, f.r, args)
		if !errors.Is(err, tools.ErrBadArgs) {
			t.Errorf("%v: got %v, want ErrBadArgs", args, err)
		}
	}
	_, err := runTool(t, f.r, map[string]any{"query": "x", "engine": "brave"})
	if !strings.Contains(fmt.Sprint(err), "auto, web, searxng, tavily, github, huggingface") {
		t.Errorf("unconfigured engine: %v", err)
	}
	if len(f.fake.Requests("")) != 0 {
		t.Error("bad arguments reached an engine")
	}
	// A query of exactly 400 characters is fine.
	if _, err := runTool(t, f.r, map[string]any{"query": strings.Repeat("长", MaxQueryRunes), "engine": "tavily"}); err != nil {
		t.Errorf("400 characters: %v", err)
	}
}

// Each request is logged at Info with engine, host, status, bytes,
// results and time; the query only at Debug; keys never.
func TestLogging(t *testing.T) {
	const secretQuery = "zebra quasar marmalade"
	f := newFixture(t, nil)
	f.fake.Fail(config.EngineBrave, webtest.FailAuth)
	for _, e := range webtest.EngineNames {
		f.r.Search(context.Background(), e, Query{Text: secretQuery, Max: 2})
	}
	// Checks too.
	for _, e := range webtest.EngineNames {
		eng, _ := f.r.Engine(e)
		eng.Check(context.Background())
	}
	seen := map[string]int{}
	debugQuery := false
	for _, rec := range f.logs.records() {
		noSecrets(t, "log line", rec.text)
		if rec.level >= slog.LevelInfo && strings.Contains(rec.text, "zebra") {
			t.Errorf("the query is logged at %v: %s", rec.level, rec.text)
		}
		if rec.level == slog.LevelDebug && strings.Contains(rec.text, secretQuery) {
			debugQuery = true
		}
		if rec.msg != "web search request" {
			continue
		}
		if rec.level != slog.LevelInfo {
			t.Errorf("request logged at %v", rec.level)
		}
		for _, k := range []string{"engine", "host", "status", "bytes", "results", "elapsed", "component"} {
			if _, ok := rec.attrs[k]; !ok {
				t.Errorf("request log without %s: %s", k, rec.text)
			}
		}
		if rec.attrs["host"] != strings.TrimPrefix(f.fake.URL, "http://") {
			t.Errorf("host %q", rec.attrs["host"])
		}
		seen[rec.attrs["engine"]+"/"+rec.attrs["op"]]++
		if rec.attrs["engine"] == "brave" && rec.attrs["op"] == "search" && (rec.attrs["status"] != "422" || rec.attrs["error"] != "credentials rejected") {
			t.Errorf("brave's failure: %s", rec.text)
		}
		if rec.attrs["engine"] == "tavily" && rec.attrs["op"] == "search" && (rec.attrs["status"] != "200" || rec.attrs["results"] != "2" || rec.attrs["bytes"] == "0") {
			t.Errorf("tavily's answer: %s", rec.text)
		}
	}
	for _, e := range webtest.EngineNames {
		if seen[e+"/search"] != 1 || seen[e+"/check"] != 1 {
			t.Errorf("%s: %d search and %d check lines, want 1 each", e, seen[e+"/search"], seen[e+"/check"])
		}
	}
	if !debugQuery {
		t.Error("the query is not at Debug either")
	}
}

// A server that echoes the key in its errors does not get it into ours.
func TestKeyNeverInErrors(t *testing.T) {
	f := newFixture(t, nil)
	echo := func(status int, key string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"message": "key %s is wrong", "detail": {"error": "key %s is wrong"}, "error": "key %s is wrong"}`, key, key, key)
		}
	}
	f.fake.Handle(config.EngineTavily, echo(401, webtest.TavilyKey))
	f.fake.Handle(config.EngineBrave, echo(403, webtest.BraveKey))
	f.fake.Handle(config.EngineGitHub, echo(401, webtest.GitHubKey))
	f.fake.Handle(config.EngineHuggingFace, echo(401, webtest.HuggingFaceKey))
	for _, e := range []string{"tavily", "brave", "github", "huggingface"} {
		_, err := f.search(t, e, "tidal", 2)
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "***") {
			t.Errorf("%s: %v", e, err)
		}
		noSecrets(t, e+" error", err.Error())
		eng, _ := f.r.Engine(e)
		if err := eng.Check(context.Background()); err != nil {
			noSecrets(t, e+" check error", err.Error())
		}
	}
	out, err := runTool(t, f.r, map[string]any{"query": "tidal power", "engine": "web"})
	noSecrets(t, "tool answer", out+fmt.Sprint(err))
	for _, rec := range f.logs.records() {
		noSecrets(t, "log", rec.text)
	}
	// An unreachable engine: the error has neither the URL's query nor a key.
	w := f.fake.Web()
	w.TavilyBaseURL = "http://127.0.0.1:1"
	r := New(Config{Web: w})
	_, err = r.Search(context.Background(), "tavily", Query{Text: "zebra quasar", Max: 1})
	if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), "zebra") {
		t.Errorf("unreachable: %v", err)
	}
	noSecrets(t, "unreachable error", err.Error())
}

// A redirect to another host is not followed: the key header would go
// with it.
func TestNoCrossHostRedirect(t *testing.T) {
	f := newFixture(t, nil)
	other := webtest.NewEngines(t)
	f.fake.Handle(config.EngineBrave, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.BaseURL("brave")+"/res/v1/web/search?q=x", http.StatusFound)
	})
	_, err := f.search(t, config.EngineBrave, "tidal", 2)
	if !errors.Is(err, ErrRejected) || len(other.Requests("")) != 0 {
		t.Errorf("redirect: %v; the other host got %d requests", err, len(other.Requests("")))
	}
}
