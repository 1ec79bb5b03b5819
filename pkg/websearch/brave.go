package websearch

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// brave speaks the Brave Search API: GET {base}/res/v1/web/search?q=&count=
// with X-Subscription-Token. Brave has no free endpoint: Check spends one
// query of the plan.
type brave struct{ base }

type braveResponse struct {
	Web *struct {
		Results *[]struct {
			Title       string `json:"title"`
			URL         string `json:"url"`
			Description string `json:"description"`
			Age         string `json:"age"`
			PageAge     string `json:"page_age"`
			MetaURL     struct {
				Hostname string `json:"hostname"`
			} `json:"meta_url"`
		} `json:"results"`
	} `json:"web"`
	Type string `json:"type"`
}

// braveError is Brave's error body: {"type": "ErrorResponse", "error":
// {"status", "code", "detail"}}.
type braveError struct {
	Error struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	} `json:"error"`
}

func (b *brave) request(text string, count int) (*http.Request, error) {
	req, err := b.get("/res/v1/web/search", url.Values{"q": {text}, "count": {strconv.Itoa(count)}, "text_decorations": {"false"}})
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Subscription-Token", b.key)
	return req, nil
}

func (b *brave) Search(ctx context.Context, q Query) ([]Result, error) {
	req, err := b.request(q.Text, min(q.Max, MaxResults))
	if err != nil {
		return nil, err
	}
	return b.do(ctx, exchange{op: "search", req: req, failed: b.failed,
		parse: func(body []byte) ([]Result, error) { return parseBrave(body, q.Max) }})
}

func parseBrave(body []byte, max int) ([]Result, error) {
	var v braveResponse
	if err := decode(body, &v); err != nil {
		return nil, err
	}
	if v.Web == nil || !present(v.Web.Results) {
		if v.Type == "search" { // a search with no web section: nothing found
			return nil, nil
		}
		return nil, errors.New(`no "web.results" list`)
	}
	c := newCollect(max)
	for _, r := range *v.Web.Results {
		date := r.PageAge
		if day(date) == "" {
			date = r.Age
		}
		c.add(r.Title, r.URL, r.Description, r.MetaURL.Hostname, date)
	}
	return c.out, nil
}

// Check runs a count=1 search: Brave has no free endpoint, so the probe
// counts against the plan's quota.
func (b *brave) Check(ctx context.Context) error {
	req, err := b.request("test", 1)
	if err != nil {
		return err
	}
	_, err = b.do(ctx, exchange{op: "check", req: req, failed: b.failed,
		parse: func(body []byte) ([]Result, error) { return parseBrave(body, 1) }})
	return err
}

// failed reads Brave's ErrorResponse: an invalid token is a 422 with
// code SUBSCRIPTION_TOKEN_INVALID; 429 RATE_LIMITED carries
// X-RateLimit-Remaining/-Reset lists (per second, per month).
func (b *brave) failed(resp *http.Response, body []byte) *EngineError {
	var v braveError
	_ = json.Unmarshal(body, &v)
	code := clean(v.Error.Code, 60)
	detail := clean(v.Error.Detail, 200)
	if detail == "" {
		detail = errorText(body)
	}
	status := "HTTP " + strconv.Itoa(resp.StatusCode)
	if code != "" {
		status += " " + code
	}
	with := func(msg string) string {
		if detail != "" {
			return msg + ": " + detail
		}
		return msg
	}
	switch {
	case strings.Contains(code, "TOKEN") || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return &EngineError{Kind: ErrAuth, Msg: with("the subscription token was rejected (" + status + ")"),
			Fix: b.keyFix("set a valid")}
	case resp.StatusCode == http.StatusTooManyRequests || code == "RATE_LIMITED":
		wait := retryAfter(resp.Header, b.clock.Now())
		if wait == 0 {
			wait = braveReset(resp.Header)
		}
		return &EngineError{Kind: ErrRateLimited, RetryAfter: wait, Msg: with("rate limited (HTTP 429)")}
	case code != "" && resp.StatusCode < 500:
		return &EngineError{Kind: ErrRejected, Msg: with("request refused (" + status + ")")}
	}
	return nil
}

// braveReset reads the windows of X-RateLimit-Remaining and
// X-RateLimit-Reset ("1, 1000" and "1, 1419704": per second, per month)
// and returns the reset of the longest spent window.
func braveReset(h http.Header) time.Duration {
	rem := strings.Split(h.Get("X-RateLimit-Remaining"), ",")
	reset := strings.Split(h.Get("X-RateLimit-Reset"), ",")
	var wait int64
	for i, r := range reset {
		s, err := strconv.ParseInt(strings.TrimSpace(r), 10, 64)
		if err != nil {
			continue
		}
		spent := i < len(rem) && strings.TrimSpace(rem[i]) == "0"
		if spent && s > wait {
			wait = s
		}
	}
	if wait == 0 && len(reset) > 0 { // none reported spent: the shortest window
		if s, err := strconv.ParseInt(strings.TrimSpace(reset[0]), 10, 64); err == nil {
			wait = s
		}
	}
	return seconds(wait)
}
