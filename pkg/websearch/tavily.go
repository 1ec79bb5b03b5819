package websearch

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// tavily speaks the Tavily API: POST {base}/search with a JSON body and
// Authorization: Bearer KEY; GET {base}/usage costs no credits.
type tavily struct{ base }

type tavilyRequest struct {
	Query         string `json:"query"`
	MaxResults    int    `json:"max_results"`
	SearchDepth   string `json:"search_depth"`
	IncludeAnswer bool   `json:"include_answer"`
}

type tavilyResponse struct {
	Results *[]struct {
		Title         string  `json:"title"`
		URL           string  `json:"url"`
		Content       string  `json:"content"`
		PublishedDate string  `json:"published_date"`
		Score         float64 `json:"score"`
	} `json:"results"`
}

// Tavily's plan limits: a request over the plan's or the pay-as-you-go
// quota. Tried again an hour later.
const (
	tavilyPlanLimit = 432
	tavilyPAYGLimit = 433
	quotaCooldown   = time.Hour
)

func (t *tavily) Search(ctx context.Context, q Query) ([]Result, error) {
	req, err := t.post("/search", tavilyRequest{Query: q.Text, MaxResults: q.Max, SearchDepth: "basic"})
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+t.key)
	return t.do(ctx, exchange{op: "search", req: req, failed: t.failed,
		parse: func(body []byte) ([]Result, error) { return parseTavily(body, q.Max) }})
}

func parseTavily(body []byte, max int) ([]Result, error) {
	var v tavilyResponse
	if err := decode(body, &v); err != nil {
		return nil, err
	}
	if !present(v.Results) {
		return nil, errors.New(`no "results" list`)
	}
	c := newCollect(max)
	for _, r := range *v.Results {
		c.add(r.Title, r.URL, r.Content, host(r.URL), r.PublishedDate)
	}
	return c.out, nil
}

// Check asks GET /usage, which Tavily does not bill.
func (t *tavily) Check(ctx context.Context) error {
	req, err := t.get("/usage", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+t.key)
	_, err = t.do(ctx, exchange{op: "check", req: req, failed: t.failed, parse: parseObject})
	return err
}

// failed reads Tavily's errors ({"detail": {"error": "..."}}): 401 bad
// key, 429 too fast, 432 and 433 plan limits.
func (t *tavily) failed(resp *http.Response, body []byte) *EngineError {
	detail := errorText(body)
	with := func(msg string) string {
		if detail != "" {
			return msg + ": " + detail
		}
		return msg
	}
	switch resp.StatusCode {
	case tavilyPlanLimit:
		return &EngineError{Kind: ErrRateLimited, RetryAfter: quotaCooldown, Msg: with("the plan's usage limit is reached (HTTP 432)"),
			Fix: "upgrade the Tavily plan or wait for its reset"}
	case tavilyPAYGLimit:
		return &EngineError{Kind: ErrRateLimited, RetryAfter: quotaCooldown, Msg: with("the pay-as-you-go limit is reached (HTTP 433)"),
			Fix: "raise the limit on the Tavily dashboard"}
	}
	return nil // 401, 403, 429, 5xx: the common reading
}

// parseObject accepts any JSON object (a probe's answer).
func parseObject(body []byte) ([]Result, error) {
	var v map[string]any
	return nil, decode(body, &v)
}
