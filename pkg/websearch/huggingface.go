package websearch

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// huggingface speaks the Hub's listing API: GET {base}/api/models,
// /api/datasets or /api/spaces with search, limit, sort and direction; a
// token is optional. The base may be a mirror (hf-mirror.com): result
// links are built on it.
type huggingface struct{ base }

type hfRepo struct {
	ID           string   `json:"id"`
	Private      bool     `json:"private"` // listed to a token's owner: never shown
	Likes        int      `json:"likes"`
	Downloads    int      `json:"downloads"`
	PipelineTag  string   `json:"pipeline_tag"`
	LibraryName  string   `json:"library_name"`
	SDK          string   `json:"sdk"`
	Description  string   `json:"description"`
	Tags         []string `json:"tags"`
	LastModified string   `json:"lastModified"`
	CreatedAt    string   `json:"createdAt"`
	CardData     struct {
		ShortDescription string `json:"short_description"`
		Title            string `json:"title"`
	} `json:"cardData"`
}

// hfNoDate is the createdAt the Hub gives every repository made before
// it recorded creation dates.
const hfNoDate = "2022-03-02T23:29:04.000Z"

func (h *huggingface) request(kind, search string, limit int) (*http.Request, error) {
	p := url.Values{"limit": {strconv.Itoa(limit)}}
	if search != "" {
		p.Set("search", search)
	}
	sort := "downloads"
	if kind == hfSpaces { // spaces have no downloads
		sort = "likes"
	}
	p.Set("sort", sort)
	p.Set("direction", "-1")
	req, err := h.get("/api/"+kind, p)
	if err != nil {
		return nil, err
	}
	if h.key != "" {
		req.Header.Set("Authorization", "Bearer "+h.key)
	}
	return req, nil
}

// Search lists the repositories whose id holds the query's keywords (the
// Hub matches substrings of ids, so routing words are dropped); when the
// whole phrase finds nothing it tries its longest word.
func (h *huggingface) Search(ctx context.Context, q Query) ([]Result, error) {
	kind := hfKind(q.Text)
	words := keywords(q.Text, hfNoise)
	res, err := h.list(ctx, kind, strings.Join(words, " "), q.Max)
	if err != nil || len(res) > 0 || len(words) < 2 {
		return res, err
	}
	longest := ""
	for _, w := range words {
		if len([]rune(w)) > len([]rune(longest)) {
			longest = w
		}
	}
	return h.list(ctx, kind, longest, q.Max)
}

func (h *huggingface) list(ctx context.Context, kind, search string, max int) ([]Result, error) {
	req, err := h.request(kind, search, min(max, MaxResults))
	if err != nil {
		return nil, err
	}
	return h.do(ctx, exchange{op: "search", req: req, failed: h.failed,
		parse: func(body []byte) ([]Result, error) { return parseHF(body, kind, h.baseURL, max) }})
}

func parseHF(body []byte, kind, baseURL string, max int) ([]Result, error) {
	var v []hfRepo
	if err := decodeList(body, &v); err != nil {
		return nil, err
	}
	prefix := ""
	if kind != hfModels {
		prefix = kind + "/"
	}
	site := strings.TrimPrefix(strings.TrimPrefix(baseURL, "https://"), "http://")
	c := newCollect(max)
	for _, r := range v {
		if r.Private {
			continue
		}
		id := clean(r.ID, maxTitle)
		if !validRepoID(id) {
			continue
		}
		var meta []string
		for _, s := range []string{r.PipelineTag, r.LibraryName, r.SDK} {
			if s != "" {
				meta = append(meta, s)
			}
		}
		if r.Downloads > 0 {
			meta = append(meta, count(r.Downloads)+" downloads")
		}
		if r.Likes > 0 {
			meta = append(meta, count(r.Likes)+" likes")
		}
		desc := r.CardData.ShortDescription
		if desc == "" {
			desc = r.Description
		}
		if desc == "" {
			desc = r.CardData.Title
		}
		snippet := strings.Join(meta, " · ")
		if desc != "" {
			snippet = strings.TrimSpace(clean(desc, maxSnippet) + " (" + snippet + ")")
		}
		date := r.LastModified
		if date == "" && r.CreatedAt != hfNoDate {
			date = r.CreatedAt
		}
		c.add(id, baseURL+"/"+prefix+id, snippet, site+"/"+prefix+id, date)
	}
	return c.out, nil
}

// validRepoID accepts owner/name ids (and old unprefixed names).
var repoID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$`)

func validRepoID(id string) bool {
	return len(id) <= 200 && repoID.MatchString(id) && !strings.Contains(id, "..")
}

// count writes 1234567 as 1.2M.
func count(n int) string {
	switch {
	case n >= 1_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
	case n >= 1_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	}
	return strconv.Itoa(n)
}

// Check lists one model.
func (h *huggingface) Check(ctx context.Context) error {
	req, err := h.request(hfModels, "", 1)
	if err != nil {
		return err
	}
	_, err = h.do(ctx, exchange{op: "check", req: req, failed: h.failed,
		parse: func(body []byte) ([]Result, error) {
			var v []hfRepo
			return nil, decodeList(body, &v)
		}})
	return err
}

// failed reads the Hub's errors ({"error": "..."}): 401 for a bad token;
// 429 with RateLimit: "api";r=0;t=SECONDS (IETF draft headers).
func (h *huggingface) failed(resp *http.Response, body []byte) *EngineError {
	msg := errorText(body)
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		if h.key == "" {
			return &EngineError{Kind: ErrAuth, Msg: withDetail("the Hub asks for a token (HTTP 401)", msg), Fix: h.keyFix("set")}
		}
		return &EngineError{Kind: ErrAuth, Msg: withDetail("the token was rejected (HTTP 401)", msg), Fix: h.keyFix("set a valid token in") + ", or remove it"}
	case http.StatusTooManyRequests:
		wait := retryAfter(resp.Header, h.clock.Now())
		if wait == 0 {
			wait = rateLimitReset(resp.Header.Get("RateLimit"))
		}
		e := &EngineError{Kind: ErrRateLimited, RetryAfter: wait, Msg: withDetail("rate limited (HTTP 429)", msg)}
		if h.key == "" {
			e.Fix = "a token in web.huggingface_api_key raises the limit"
		}
		return e
	}
	return nil
}

// rateLimitReset reads t= (seconds to the window's reset) from a
// RateLimit header: "api";r=0;t=55.
func rateLimitReset(v string) time.Duration {
	for p := range strings.SplitSeq(v, ";") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(p), "t="); ok {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return seconds(n)
			}
		}
	}
	return 0
}
