package websearch

import (
	"net/http"
	"testing"

	"agent/pkg/clock"
)

// FuzzDecoders feeds one body to every engine's decoder and error reader:
// none may panic, and what they return keeps the Result promises.
func FuzzDecoders(f *testing.F) {
	for _, seed := range []string{
		`{"results":[{"title":"t","url":"https://a.example/","content":"c","published_date":"Mon, 03 Nov 2025 08:00:00 GMT"}]}`,
		`{"results":[{"title":"t","url":"https://a.example/","content":"<b>c</b>","engine":"bing","publishedDate":"2025-11-03T08:00:00"}]}`,
		`{"type":"search","web":{"results":[{"title":"t","url":"https://a.example/","description":"d","page_age":"2025-11-03T08:00:00","meta_url":{"hostname":"a.example"}}]}}`,
		`{"total_count":1,"items":[{"full_name":"o/r","html_url":"https://github.com/o/r","description":"d","stargazers_count":3,"language":"Go","pushed_at":"2025-11-03T08:00:00Z","title":"i","repository_url":"https://api.github.com/repos/o/r","text_matches":[{"fragment":"f"}]}]}`,
		`[{"id":"org/model","likes":3,"downloads":9,"pipeline_tag":"fill-mask","lastModified":"2025-11-03T08:00:00.000Z","cardData":{"short_description":"s"}}]`,
		`{"type":"ErrorResponse","error":{"status":422,"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"x"}}`,
		`{"detail":{"error":"Unauthorized: missing or invalid API key."}}`,
		`{"message":"Bad credentials","status":"401"}`,
		`{"results":[{"title":5,"url":["x"]},"s",null,{"url":"javascript:alert(1)"}]}`,
		`<html><script>alert(1)</script></html>`,
		`[[[[[[[[`,
		"{\"results\":[{\"title\":\"\xff\u202e\",\"url\":\"https://a.example/\\u0000\"}]}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		parsers := []func([]byte) ([]Result, error){
			func(b []byte) ([]Result, error) { return parseTavily(b, 5) },
			func(b []byte) ([]Result, error) { return parseSearXNG(b, 5) },
			func(b []byte) ([]Result, error) { return parseBrave(b, 5) },
			func(b []byte) ([]Result, error) { return parseGitHub(b, ghRepositories, 5) },
			func(b []byte) ([]Result, error) { return parseGitHub(b, ghIssues, 5) },
			func(b []byte) ([]Result, error) { return parseGitHub(b, ghCode, 5) },
			func(b []byte) ([]Result, error) { return parseHF(b, hfSpaces, "https://huggingface.co", 5) },
			func(b []byte) ([]Result, error) { return parseHF(b, hfModels, "https://huggingface.co", 5) },
		}
		for _, p := range parsers {
			rs, err := p(body)
			if err != nil && len(rs) > 0 {
				t.Errorf("results with an error")
			}
			if len(rs) > 5 {
				t.Errorf("%d results, max 5", len(rs))
			}
			for _, r := range rs {
				checkResult(t, r)
			}
		}
		errorText(body)
		resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {string(body)}}}
		for _, st := range []int{401, 403, 429, 432, 500} {
			resp.StatusCode = st
			b := base{name: "x", key: "k", clock: clock.Real()}
			(&brave{b}).failed(resp, body)
			(&tavily{b}).failed(resp, body)
			(&searxng{b}).failed(resp, body)
			(&github{b}).failed(resp, body)
			(&huggingface{b}).failed(resp, body)
		}
	})
}
