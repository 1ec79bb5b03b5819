package websearch

import (
	"context"
	"errors"
	"net/http"
	"net/url"
)

// searxng speaks a SearXNG instance's search API: GET
// {base}/search?q=...&format=json. The instance must list json in
// search.formats of its settings.yml; otherwise it answers 403.
type searxng struct{ base }

type searxngResponse struct {
	Results *[]struct {
		Title         string   `json:"title"`
		URL           string   `json:"url"`
		Content       string   `json:"content"`
		Engine        string   `json:"engine"`
		Engines       []string `json:"engines"`
		PublishedDate string   `json:"publishedDate"`
	} `json:"results"`
}

func (s *searxng) Search(ctx context.Context, q Query) ([]Result, error) {
	req, err := s.get("/search", url.Values{"q": {q.Text}, "format": {"json"}, "pageno": {"1"}})
	if err != nil {
		return nil, err
	}
	return s.do(ctx, exchange{op: "search", req: req, failed: s.failed,
		parse: func(body []byte) ([]Result, error) { return parseSearXNG(body, q.Max) }})
}

func parseSearXNG(body []byte, max int) ([]Result, error) {
	var v searxngResponse
	if err := decode(body, &v); err != nil {
		return nil, errors.New(err.Error() + ": is web.searxng_base_url the root of a SearXNG instance?")
	}
	if !present(v.Results) {
		return nil, errors.New(`no "results" list: is web.searxng_base_url the root of a SearXNG instance?`)
	}
	c := newCollect(max)
	for _, r := range *v.Results {
		src := r.Engine
		if src == "" && len(r.Engines) > 0 {
			src = r.Engines[0]
		}
		c.add(r.Title, r.URL, r.Content, src, r.PublishedDate)
	}
	return c.out, nil
}

// Check runs one JSON search: SearXNG has no cheaper endpoint, and it
// proves the JSON format is enabled.
func (s *searxng) Check(ctx context.Context) error {
	req, err := s.get("/search", url.Values{"q": {"test"}, "format": {"json"}})
	if err != nil {
		return err
	}
	_, err = s.do(ctx, exchange{op: "check", req: req, failed: s.failed,
		parse: func(body []byte) ([]Result, error) { return parseSearXNG(body, 1) }})
	return err
}

// failed explains SearXNG's 403 (the JSON format is off) and its
// limiter's 429; SearXNG has no keys.
func (s *searxng) failed(resp *http.Response, body []byte) *EngineError {
	switch resp.StatusCode {
	case http.StatusForbidden:
		return &EngineError{Kind: ErrRejected, Msg: "the instance refused format=json (HTTP 403): its JSON API is not enabled",
			Fix: "add json to search.formats in the SearXNG settings.yml (formats: [html, json]) and restart SearXNG"}
	case http.StatusUnauthorized:
		return &EngineError{Kind: ErrAuth, Msg: "the instance asks for credentials (HTTP 401)",
			Fix: "put them in web.searxng_base_url (https://user:password@host/) or let the appliance in"}
	case http.StatusTooManyRequests:
		return &EngineError{Kind: ErrRateLimited, RetryAfter: retryAfter(resp.Header, s.clock.Now()),
			Msg: "rate limited by the instance's limiter (HTTP 429)", Fix: "turn server.limiter off in settings.yml for a private instance"}
	}
	return nil
}
