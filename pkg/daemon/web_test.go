package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"agent/pkg/admin"
	"agent/pkg/config"
	"agent/pkg/llm/llmtest"
	"agent/pkg/sandbox/sandboxtest"
	"agent/pkg/webtest"
)

var firstURL = regexp.MustCompile(`https?://[^\s)\]]+`)

// The whole loop through the real daemon: the scripted model searches
// (a local SearXNG), fetches the top result (a local news site, allowed by
// web.fetch_allow), and answers from the page. A second user's link to
// the box itself is refused, and a reload that drops the engines takes
// web_search away while web_fetch stays.
func TestSearchFetchAnswer(t *testing.T) {
	sandboxtest.New(t, nil) // the daemon helper waits for the sandbox
	site := webtest.NewSite(t)
	engines := webtest.NewEngines(t)
	engines.SetHits(config.EngineSearXNG, webtest.Hit{Title: webtest.ArticleTitle, URL: site.URL + "/article", Snippet: "Tidal station opens"})
	srv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		switch {
		case last.Role == "user" && strings.HasPrefix(last.Content, "SEARCH: "):
			b, _ := json.Marshal(map[string]string{"query": strings.TrimPrefix(last.Content, "SEARCH: ")})
			return llmtest.Calls(llmtest.Call("web_search", string(b)))
		case last.Role == "user" && strings.HasPrefix(last.Content, "FETCH: "):
			b, _ := json.Marshal(map[string]string{"url": strings.TrimPrefix(last.Content, "FETCH: ")})
			return llmtest.Calls(llmtest.Call("web_fetch", string(b)))
		case last.Role == "tool" && strings.Contains(last.Content, "searxng"):
			u := firstURL.FindString(last.Content)
			b, _ := json.Marshal(map[string]string{"url": u})
			return llmtest.Calls(llmtest.Call("web_fetch", string(b)))
		case last.Role == "tool":
			for line := range strings.SplitSeq(last.Content, "\n") {
				if strings.Contains(line, "megawatts") {
					return llmtest.Text("ANSWER: " + line)
				}
			}
			return llmtest.Text("NO ANSWER: " + last.Content)
		}
		return llmtest.Text("tools: " + strings.Join(r.ToolNames(), ","))
	})
	cfg, _, ctx := startSandboxDaemon(t, fmt.Sprintf(`
[llm]
provider = "custom"
model = "fake"
base_url = %q
[agent]
state_dir = "var"
[web]
engines = ["searxng", "github"]
searxng_base_url = %q
github_base_url = %q
fetch_allow = [%q]
`, srv.BaseURL(), engines.BaseURL(config.EngineSearXNG), engines.BaseURL(config.EngineGitHub), site.Allow()[0]))
	c := admin.NewClient(cfg.Server.AdminSocket)
	ask := func(user, text string) string {
		t.Helper()
		res, err := c.Send(ctx, admin.SendRequest{To: user, Text: text})
		if err != nil || len(res.Replies) == 0 {
			t.Fatalf("send %q: %+v %v", text, res, err)
		}
		return strings.Join(res.Replies, "\n")
	}
	if out := ask("alice", "which tools search the web and fetch a page?"); !strings.Contains(out, "web_search") || !strings.Contains(out, "web_fetch") {
		t.Fatalf("tools offered: %s", out)
	}
	out := ask("alice", "SEARCH: tidal power station harbour")
	if !strings.Contains(out, "ANSWER: ") || !strings.Contains(out, "40 megawatts") {
		t.Fatalf("answer: %s", out)
	}
	// The model saw the article, not the site's boilerplate.
	var fetched string
	for _, r := range srv.Requests() {
		if l := r.Last(); l.Role == "tool" && strings.Contains(l.Content, webtest.ArticleLast) {
			fetched = l.Content
		}
	}
	if fetched == "" || strings.Contains(fetched, webtest.NavText) || strings.Contains(fetched, webtest.AdText) {
		t.Fatalf("what the model read:\n%s", fetched)
	}
	if reqs := engines.Requests(config.EngineSearXNG); len(reqs) != 1 || reqs[0].Query.Get("format") != "json" {
		t.Fatalf("SearXNG requests: %+v", reqs)
	}
	// Bob points the model at the daemon's own listener and at metadata:
	// refused, the error reaches the model, nothing is fetched.
	hits := site.Hits()
	for _, u := range []string{"http://" + cfg.Server.Listen + "/metrics", "http://169.254.169.254/latest/meta-data/"} {
		if out := ask("bob", "FETCH: "+u); !strings.Contains(out, "NO ANSWER") || !strings.Contains(out, "not fetched") {
			t.Fatalf("bob's fetch of %s: %s", u, out)
		}
	}
	if site.Hits() != hits {
		t.Fatal("a refused fetch reached the site")
	}
	// A reload without engines: web_search goes, web_fetch stays.
	body, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	body = []byte(strings.Replace(string(body), `engines = ["searxng", "github"]`, `engines = []`, 1))
	if err := os.WriteFile(cfg.Path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if out := ask("alice", "which tools search the web and fetch a page now?"); strings.Contains(out, "web_search") || !strings.Contains(out, "web_fetch") {
		t.Fatalf("after reload: %s", out)
	}
}
