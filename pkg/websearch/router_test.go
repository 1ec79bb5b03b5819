package websearch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"agent/pkg/config"
	"agent/pkg/webtest"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		query string
		want  topic
	}{
		{"golang yaml parser library", topicCode},
		{"kubernetes scheduler issue on github", topicCode},
		{"how to fix a segfault in a rust crate, serde issue", topicCode},
		{"open source alternatives to Notion", topicCode},
		{"python tutorial for beginners", topicGeneral},
		{"best embedding model for chinese text", topicML},
		{"whisper speech recognition model", topicML},
		{"qwen2.5 7b gguf", topicML},
		{"squad dataset", topicML},
		{"huggingface spaces gradio demo for ocr", topicML},
		{"github repo for whisper fine-tuning", topicCode},
		{"Tesla model 3 price", topicGeneral},
		{"business model canvas template", topicGeneral},
		{"office space for rent in Shanghai", topicGeneral},
		{"weather in Beijing tomorrow", topicGeneral},
		{"北京明天天气", topicGeneral},
		{"特斯拉 Model 3 价格", topicGeneral},
		{"飞机模型 玩具 推荐", topicGeneral},
		{"中文 语音识别 模型", topicML},
		{"开源 大模型 数据集", topicML},
		{"GitHub 上有哪些 Go 语言的 PDF 解析库", topicCode},
		{"Python 的 PDF 解析库", topicCode},
		{"这段代码为什么报错", topicCode},
	}
	for _, tt := range tests {
		if got := classify(tt.query); got != tt.want {
			t.Errorf("classify(%q) = %v, want %v", tt.query, got, tt.want)
		}
	}
}

// The plan of each engine choice, with all five configured in a
// non-default order.
func TestPlan(t *testing.T) {
	f := newFixture(t, func(w *config.Web) {
		w.Engines = []string{config.EngineBrave, config.EngineGitHub, config.EngineSearXNG, config.EngineHuggingFace, config.EngineTavily}
	})
	tests := []struct {
		engine, query string
		want          []string
	}{
		{Auto, "weather in Beijing", []string{"brave", "searxng", "tavily"}},
		{"", "golang yaml parser library", []string{"github", "brave", "searxng", "tavily"}},
		{Auto, "best embedding model for chinese text", []string{"huggingface", "brave", "searxng", "tavily"}},
		{Web, "golang yaml parser library", []string{"brave", "searxng", "tavily"}},
		{config.EngineGitHub, "weather in Beijing", []string{"github"}},
	}
	for _, tt := range tests {
		got, err := f.r.plan(tt.engine, tt.query)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("plan(%q, %q) = %v, %v; want %v", tt.engine, tt.query, got, err, tt.want)
		}
	}
	if got := f.r.Engines(); !slices.Equal(got, []string{"brave", "github", "searxng", "huggingface", "tavily"}) {
		t.Errorf("Engines() = %v", got)
	}
}

// Failing engines hand over in order; the answer says who failed.
func TestFallback(t *testing.T) {
	f := newFixture(t, func(w *config.Web) {
		w.Engines = []string{config.EngineBrave, config.EngineSearXNG, config.EngineTavily, config.EngineGitHub, config.EngineHuggingFace}
	})
	f.fake.Fail(config.EngineBrave, webtest.FailServer)
	f.fake.Fail(config.EngineSearXNG, webtest.FailMalformed)
	out, err := f.search(t, Auto, "harbour tidal power station", 3)
	if err != nil {
		t.Fatal(err)
	}
	if out.Engine != config.EngineTavily || len(out.Results) != 3 {
		t.Fatalf("answered by %s with %d results, want tavily with 3", out.Engine, len(out.Results))
	}
	if len(out.Failed) != 2 || out.Failed[0].Engine != "brave" || !errors.Is(out.Failed[0].Err, ErrUnavailable) ||
		out.Failed[1].Engine != "searxng" || !errors.Is(out.Failed[1].Err, ErrMalformed) {
		t.Errorf("failed %v, want brave unavailable then searxng malformed", out.Failed)
	}
	if n := len(f.fake.Requests(config.EngineGitHub)) + len(f.fake.Requests(config.EngineHuggingFace)); n != 0 {
		t.Errorf("a general query reached github or huggingface (%d requests)", n)
	}

	// A code query: GitHub first, then the general engines.
	f.fake.Fail(config.EngineGitHub, webtest.FailAuth)
	out, err = f.search(t, Auto, "golang yaml parser library", 3)
	if err != nil || out.Engine != config.EngineTavily {
		t.Fatalf("code query: %+v, %v", out, err)
	}
	if got := engines(out.Failed); !slices.Equal(got, []string{"github", "brave", "searxng"}) {
		t.Errorf("code query failed over %v", got)
	}

	// A model query that Hugging Face finds nothing for goes to the web.
	f.fake.Fail(config.EngineHuggingFace, webtest.FailEmpty)
	out, err = f.search(t, Auto, "best embedding model for chinese text", 3)
	if err != nil || out.Engine != config.EngineTavily || !errors.Is(out.Failed[0].Err, ErrNoResults) {
		t.Fatalf("model query: %+v, %v", out, err)
	}

	// All fail: one error naming each.
	f.fake.Fail(config.EngineTavily, webtest.FailAuth)
	_, err = f.search(t, Web, "harbour tidal power station", 3)
	var se *SearchError
	if !errors.As(err, &se) || !slices.Equal(engines(se.Failures), []string{"brave", "searxng", "tavily"}) {
		t.Fatalf("all failing: %v", err)
	}
	for _, w := range []string{"brave: server error (HTTP 503)", "searxng: invalid JSON", "tavily: the API key was rejected (HTTP 401)", "web.tavily_api_key"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
	if !errors.Is(err, ErrAuth) || !errors.Is(err, ErrUnavailable) {
		t.Error("the kinds of the failures are not reachable with errors.Is")
	}

	// Everyone answers with nothing: no error, no results.
	for _, e := range webtest.EngineNames {
		f.fake.Fail(e, webtest.FailEmpty)
	}
	out, err = f.search(t, Web, "harbour tidal power station", 3)
	if err != nil || len(out.Results) != 0 || out.Engine != config.EngineTavily {
		t.Errorf("nothing anywhere: %+v, %v", out, err)
	}
}

func engines(fs []Failure) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Engine)
	}
	return out
}

// A rate-limited engine is skipped until its Retry-After passes.
func TestCooldown(t *testing.T) {
	for _, engine := range []string{config.EngineTavily, config.EngineBrave, config.EngineSearXNG} {
		t.Run(engine, func(t *testing.T) {
			other := config.EngineTavily
			if engine == config.EngineTavily {
				other = config.EngineBrave
			}
			f := newFixture(t, func(w *config.Web) { w.Engines = []string{engine, other} })
			f.fake.Fail(engine, webtest.FailRateLimit)
			out, err := f.search(t, Web, "tidal power", 2)
			if err != nil || out.Engine == engine || !errors.Is(out.Failed[0].Err, ErrRateLimited) {
				t.Fatalf("first search: %+v, %v", out, err)
			}
			f.fake.Fail(engine, webtest.Healthy)
			asked := func() int { return len(f.fake.Requests(engine)) }

			out, _ = f.search(t, Web, "tidal power", 2)
			if asked() != 1 || out.Engine == engine || !strings.Contains(Format(out), engine+": rate limited, retry in 30s") {
				t.Errorf("during the cooldown: asked %d times; %s", asked(), Format(out))
			}
			f.clock.Advance(webtest.RetryAfter - time.Second)
			if out, _ = f.search(t, Web, "tidal power", 2); asked() != 1 || out.Engine == engine {
				t.Errorf("a second before the end: asked %d times, answered by %s", asked(), out.Engine)
			}
			f.clock.Advance(time.Second)
			if out, _ = f.search(t, Web, "tidal power", 2); asked() != 2 || out.Engine != engine {
				t.Errorf("after the cooldown: asked %d times, answered by %s", asked(), out.Engine)
			}
		})
	}
	// GitHub's primary limit: wait until x-ratelimit-reset.
	f := newFixture(t, nil)
	f.fake.Fail(config.EngineGitHub, webtest.FailRateLimit)
	f.search(t, config.EngineGitHub, "yaml parser", 2)
	f.fake.Fail(config.EngineGitHub, webtest.Healthy)
	if _, err := f.search(t, config.EngineGitHub, "yaml parser", 2); !errors.Is(err, ErrRateLimited) || len(f.fake.Requests(config.EngineGitHub)) != 1 {
		t.Errorf("github asked during its reset window: %v", err)
	}
	f.clock.Advance(webtest.RetryAfter)
	if _, err := f.search(t, config.EngineGitHub, "yaml parser", 2); err != nil {
		t.Errorf("after the reset: %v", err)
	}
}

// An engine that hangs is given up after web.timeout and the next one
// answers.
func TestSlowEngine(t *testing.T) {
	f := newFixture(t, func(w *config.Web) { w.Engines = []string{config.EngineSearXNG, config.EngineTavily} })
	f.fake.Fail(config.EngineSearXNG, webtest.FailSlow)
	type res struct {
		out *Outcome
		err error
	}
	done := make(chan res, 1)
	go func() {
		out, err := f.r.Search(context.Background(), Web, Query{Text: "tidal power", Max: 2})
		done <- res{out, err}
	}()
	stop := make(chan struct{})
	defer close(stop)
	if !f.clock.WaitTimers(1, stop) {
		t.Fatal("no request timer")
	}
	f.clock.Advance(15 * time.Second)
	r := <-done
	if r.err != nil || r.out.Engine != config.EngineTavily {
		t.Fatalf("got %+v, %v", r.out, r.err)
	}
	if !errors.Is(r.out.Failed[0].Err, ErrUnavailable) || !strings.Contains(r.out.Failed[0].Err.Error(), "no answer within 15s") {
		t.Errorf("searxng failure: %v", r.out.Failed[0].Err)
	}
}

// Only configured engines exist; asking for another names those there.
func TestUnconfigured(t *testing.T) {
	f := newFixture(t, func(w *config.Web) {
		w.SearXNGBaseURL, w.TavilyAPIKey, w.BraveAPIKey = "", "", ""
	})
	if got := f.r.Engines(); !slices.Equal(got, []string{"github", "huggingface"}) {
		t.Fatalf("Engines() = %v", got)
	}
	if got := f.r.Choices(); !slices.Equal(got, []string{"auto", "github", "huggingface"}) {
		t.Errorf("Choices() = %v", got)
	}
	_, err := f.search(t, config.EngineTavily, "tidal power", 2)
	if !errors.Is(err, ErrNotConfigured) || !strings.Contains(err.Error(), "auto, github, huggingface") {
		t.Errorf("explicit tavily: %v", err)
	}
	_, err = f.search(t, Auto, "weather in Beijing", 2)
	if !errors.Is(err, ErrNotConfigured) || !strings.Contains(err.Error(), "web.searxng_base_url") {
		t.Errorf("general query without a general engine: %v", err)
	}
	_, err = f.search(t, Web, "weather in Beijing", 2)
	if !errors.Is(err, ErrNotConfigured) {
		t.Errorf("web without a general engine: %v", err)
	}
	if out, err := f.search(t, Auto, "golang yaml parser library", 2); err != nil || out.Engine != config.EngineGitHub {
		t.Errorf("code query: %+v, %v", out, err)
	}
	if n := len(f.fake.Requests(config.EngineTavily)) + len(f.fake.Requests(config.EngineBrave)) + len(f.fake.Requests(config.EngineSearXNG)); n != 0 {
		t.Errorf("%d requests reached unconfigured engines", n)
	}

	// Not listed in engines: not there even with a key.
	r := New(Config{Web: func() config.Web { w := f.fake.Web(); w.Engines = []string{config.EngineTavily}; return w }()})
	if got := r.Engines(); !slices.Equal(got, []string{"tavily"}) {
		t.Errorf("engines = [tavily]: %v", got)
	}
	if got := New(Config{Web: config.Web{}}).Engines(); len(got) != 0 {
		t.Errorf("empty config: %v", got)
	}
}
