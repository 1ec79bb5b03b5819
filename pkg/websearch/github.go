package websearch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// github speaks GitHub's REST search: GET {base}/search/repositories,
// /search/issues or /search/code (code needs a token; without one the
// search is of repositories). GET /rate_limit costs nothing.
type github struct{ base }

const githubAPIVersion = "2022-11-28"

type githubResponse struct {
	Items *[]struct {
		// repositories
		FullName    string `json:"full_name"`
		Description string `json:"description"`
		Stars       int    `json:"stargazers_count"`
		Language    string `json:"language"`
		PushedAt    string `json:"pushed_at"`
		// issues
		Title         string          `json:"title"`
		Body          string          `json:"body"`
		State         string          `json:"state"`
		RepositoryURL string          `json:"repository_url"`
		PullRequest   json.RawMessage `json:"pull_request"`
		// code
		Name       string `json:"name"`
		Path       string `json:"path"`
		Repository struct {
			FullName string `json:"full_name"`
			Private  bool   `json:"private"`
		} `json:"repository"`
		Private     bool `json:"private"` // repositories
		TextMatches []struct {
			Fragment string `json:"fragment"`
		} `json:"text_matches"`
		// all
		HTMLURL   string `json:"html_url"`
		UpdatedAt string `json:"updated_at"`
	} `json:"items"`
}

func (g *github) request(path string, params url.Values) (*http.Request, error) {
	req, err := g.get(path, params)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", githubAPIVersion)
	if g.key != "" {
		req.Header.Set("Authorization", "Bearer "+g.key)
	}
	return req, nil
}

func (g *github) Search(ctx context.Context, q Query) ([]Result, error) {
	kind := githubKind(q.Text, g.key != "")
	text := strings.Join(keywords(q.Text, githubNoise), " ")
	if kind == ghIssues && !slices.ContainsFunc(strings.Fields(strings.ToLower(text)), func(w string) bool {
		return w == "is:issue" || w == "is:pr" || w == "is:pull-request" || strings.HasPrefix(w, "type:")
	}) {
		if words, all := tokens(q.Text); anyOf(ghPRWords, words, all) {
			text += " is:pr"
		} else {
			text += " is:issue"
		}
	}
	text = publicOnly(text, kind)
	req, err := g.request("/search/"+kind, url.Values{"q": {text}, "per_page": {strconv.Itoa(min(q.Max, MaxResults))}})
	if err != nil {
		return nil, err
	}
	if kind == ghCode { // fragments of the matching code
		req.Header.Set("Accept", "application/vnd.github.text-match+json")
	}
	return g.do(ctx, exchange{op: "search", req: req, failed: g.failed,
		parse: func(body []byte) ([]Result, error) { return parseGitHub(body, kind, q.Max) }})
}

// publicOnly keeps a search to public repositories: the operator's token
// may see private ones, and every colleague's query is sent with it.
// is:private and is:internal are dropped; repositories and issues get
// is:public (code search does not take it: its private results are
// dropped when parsed).
func publicOnly(text, kind string) string {
	var keep []string
	for _, w := range strings.Fields(text) {
		lw := strings.ToLower(w)
		if lw == "is:private" || lw == "is:internal" || lw == "is:public" || strings.HasPrefix(lw, "visibility:") {
			continue
		}
		keep = append(keep, w)
	}
	if kind != ghCode {
		keep = append(keep, "is:public")
	}
	return strings.Join(keep, " ")
}

func parseGitHub(body []byte, kind string, max int) ([]Result, error) {
	var v githubResponse
	if err := decode(body, &v); err != nil {
		return nil, err
	}
	if !present(v.Items) {
		return nil, errors.New(`no "items" list`)
	}
	c := newCollect(max)
	for _, it := range *v.Items {
		switch kind {
		case ghIssues:
			repo := repoOf(it.RepositoryURL, it.HTMLURL)
			what := "issue"
			if len(it.PullRequest) > 0 && string(it.PullRequest) != "null" {
				what = "pull request"
			}
			state := clean(it.State, 20)
			if state != "" {
				what = state + " " + what
			}
			c.add(it.Title, it.HTMLURL, "["+what+"] "+it.Body, "github.com/"+repo, it.UpdatedAt)
		case ghCode:
			if it.Repository.Private {
				continue
			}
			repo := it.Repository.FullName
			snippet := ""
			if len(it.TextMatches) > 0 {
				snippet = it.TextMatches[0].Fragment
			}
			c.add(repo+": "+it.Path, it.HTMLURL, snippet, "github.com/"+repo, "")
		default:
			if it.Private {
				continue
			}
			var meta []string
			if it.Stars > 0 {
				meta = append(meta, "★ "+strconv.Itoa(it.Stars))
			}
			if it.Language != "" {
				meta = append(meta, it.Language)
			}
			snippet := it.Description
			if len(meta) > 0 {
				snippet = strings.TrimSpace(snippet + " (" + strings.Join(meta, ", ") + ")")
			}
			date := it.PushedAt
			if date == "" {
				date = it.UpdatedAt
			}
			c.add(it.FullName, it.HTMLURL, snippet, "github.com/"+it.FullName, date)
		}
	}
	return c.out, nil
}

// repoOf is owner/repo of an issue, from its API repository_url
// (.../repos/owner/repo) or its html_url (github.com/owner/repo/issues/1).
func repoOf(apiURL, htmlURL string) string {
	if i := strings.LastIndex(apiURL, "/repos/"); i >= 0 {
		return apiURL[i+len("/repos/"):]
	}
	if u, err := url.Parse(htmlURL); err == nil {
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		if len(parts) >= 2 {
			return parts[0] + "/" + parts[1]
		}
	}
	return ""
}

// Check asks GET /rate_limit, which does not count against the limit.
func (g *github) Check(ctx context.Context) error {
	req, err := g.request("/rate_limit", nil)
	if err != nil {
		return err
	}
	_, err = g.do(ctx, exchange{op: "check", req: req, failed: g.failed, parse: parseObject})
	return err
}

// failed reads GitHub's errors ({"message": "..."}): 401 bad
// credentials; a primary rate limit is a 403 or 429 with
// x-ratelimit-remaining: 0 (wait until x-ratelimit-reset, epoch
// seconds); a secondary one says so, with or without Retry-After.
func (g *github) failed(resp *http.Response, body []byte) *EngineError {
	msg := errorText(body)
	st := resp.StatusCode
	now := g.clock.Now()
	if st == http.StatusForbidden || st == http.StatusTooManyRequests {
		if wait := retryAfter(resp.Header, now); wait > 0 {
			return &EngineError{Kind: ErrRateLimited, RetryAfter: wait, Msg: withDetail(fmt.Sprintf("secondary rate limit (HTTP %d)", st), msg)}
		}
		if resp.Header.Get("X-Ratelimit-Remaining") == "0" {
			var wait time.Duration
			if s, err := strconv.ParseInt(resp.Header.Get("X-Ratelimit-Reset"), 10, 64); err == nil {
				wait = seconds(s - now.Unix())
			}
			e := &EngineError{Kind: ErrRateLimited, RetryAfter: wait, Msg: fmt.Sprintf("rate limit spent (HTTP %d)", st)}
			if g.key == "" {
				e.Fix = "a token in web.github_api_key raises the limit"
			}
			return e
		}
		if st == http.StatusTooManyRequests || strings.Contains(strings.ToLower(msg), "rate limit") {
			return &EngineError{Kind: ErrRateLimited, RetryAfter: time.Minute, Msg: withDetail(fmt.Sprintf("secondary rate limit (HTTP %d)", st), msg)}
		}
	}
	if st == http.StatusUnauthorized {
		if g.key == "" {
			return &EngineError{Kind: ErrAuth, Msg: withDetail("GitHub asks for a token (HTTP 401)", msg), Fix: g.keyFix("set")}
		}
		return &EngineError{Kind: ErrAuth, Msg: withDetail("the token was rejected (HTTP 401)", msg), Fix: g.keyFix("set a valid token in") + ", or remove it"}
	}
	if st == http.StatusUnprocessableEntity {
		return &EngineError{Kind: ErrRejected, Msg: withDetail("GitHub could not run the query (HTTP 422)", msg)}
	}
	return nil
}

func withDetail(msg, detail string) string {
	if detail == "" {
		return msg
	}
	return msg + ": " + detail
}
