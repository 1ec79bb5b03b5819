package websearch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"agent/pkg/clock"
)

// base is what every engine shares: where it is, its key (may be empty)
// and how it talks.
type base struct {
	name    string
	baseURL string // without a trailing slash
	key     string
	http    *http.Client
	clock   clock.Clock
	log     *slog.Logger
	timeout time.Duration // one request
}

func (b *base) Name() string { return b.name }

// keyFix names the config key an operator sets for this engine.
func (b *base) keyFix(what string) string {
	return fmt.Sprintf("%s web.%s_api_key (or web.%s_api_key_file)", what, b.name, b.name)
}

// exchange is one request and what to make of its answer.
type exchange struct {
	op  string // "search" or "check", for the log
	req *http.Request
	// failed turns a non-2xx answer into an error; nil falls back to
	// statusError. Engines read their own error shapes here.
	failed func(resp *http.Response, body []byte) *EngineError
	// parse reads a 2xx body.
	parse func(body []byte) ([]Result, error)
}

// do sends x.req with the engine's timeout, reads at most MaxBody bytes
// and logs one line: engine, host, status, bytes, results and time, never
// the query (Debug has it) nor the key.
func (b *base) do(ctx context.Context, x exchange) (results []Result, err error) {
	ctx, cancel := clock.WithTimeout(ctx, b.clock, b.timeout)
	defer cancel()
	req := x.req.WithContext(ctx)
	start := b.clock.Now()
	status, n := 0, 0
	defer func() {
		attrs := []any{"engine", b.name, "op", x.op, "host", req.URL.Host, "status", status,
			"bytes", n, "results", len(results), "elapsed", b.clock.Now().Sub(start).Round(time.Millisecond)}
		if err != nil {
			attrs = append(attrs, "error", Reason(err))
		}
		b.log.Info("web search request", attrs...)
	}()
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, b.transportError(ctx, err)
	}
	status = resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	resp.Body.Close()
	n = len(body)
	if err != nil {
		return nil, b.transportError(ctx, err)
	}
	// A server that echoes the key (in an error or a result) must not
	// pass it on: scrubbed before anything is cut or parsed.
	if b.key != "" {
		body = bytes.ReplaceAll(body, []byte(b.key), []byte("***"))
	}
	if len(body) > MaxBody {
		return nil, &EngineError{Engine: b.name, Status: status, Kind: ErrMalformed, Msg: fmt.Sprintf("answered more than %d MB", MaxBody>>20)}
	}
	if status < 200 || status > 299 {
		var ee *EngineError
		if x.failed != nil {
			ee = x.failed(resp, body)
		}
		if ee == nil {
			ee = b.statusError(resp, errorText(body))
		}
		ee.Engine, ee.Status = b.name, status
		ee.Msg = b.scrub(ee.Msg)
		return nil, ee
	}
	results, err = x.parse(body)
	if err != nil {
		return nil, &EngineError{Engine: b.name, Status: status, Kind: ErrMalformed, Msg: b.scrub(err.Error())}
	}
	return results, nil
}

// transportError describes a request that got no (complete) answer,
// without the URL (it holds the query).
func (b *base) transportError(ctx context.Context, err error) *EngineError {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := "unreachable: " + err.Error()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg = "no answer within " + b.timeout.String()
	} else if errors.Is(err, context.Canceled) {
		msg = "request cancelled"
	}
	return &EngineError{Engine: b.name, Kind: ErrUnavailable, Msg: b.scrub(msg)}
}

// statusError is the common reading of an HTTP error status; detail is
// the engine's own message, if any.
func (b *base) statusError(resp *http.Response, detail string) *EngineError {
	st := resp.StatusCode
	ee := &EngineError{Engine: b.name, Status: st}
	switch {
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		ee.Kind = ErrAuth
		ee.Msg = fmt.Sprintf("the API key was rejected (HTTP %d)", st)
		if b.key == "" {
			ee.Msg = fmt.Sprintf("the engine asks for credentials (HTTP %d)", st)
		}
		ee.Fix = b.keyFix("set a valid")
	case st == http.StatusTooManyRequests:
		ee.Kind = ErrRateLimited
		ee.RetryAfter = retryAfter(resp.Header, b.clock.Now())
		ee.Msg = "rate limited (HTTP 429)"
	case st >= 500:
		ee.Kind = ErrUnavailable
		ee.Msg = fmt.Sprintf("server error (HTTP %d)", st)
	default:
		ee.Kind = ErrRejected
		ee.Msg = fmt.Sprintf("request refused (HTTP %d)", st)
	}
	if detail != "" {
		ee.Msg += ": " + detail
	}
	return ee
}

// scrub removes the key from text that may echo it.
func (b *base) scrub(s string) string {
	if b.key == "" {
		return s
	}
	return strings.ReplaceAll(s, b.key, "***")
}

// get builds a GET of path with query parameters.
func (b *base) get(path string, params url.Values) (*http.Request, error) {
	u := b.baseURL + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, b.badBase()
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	return req, nil
}

// post builds a JSON POST.
func (b *base) post(path string, body any) (*http.Request, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, b.baseURL+path, bytes.NewReader(data))
	if err != nil {
		return nil, b.badBase()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	return req, nil
}

const userAgent = "agent-web-search/1"

// badBase is the error of a base URL that does not parse; the URL is not
// quoted (it may hold a password).
func (b *base) badBase() *EngineError {
	return &EngineError{Engine: b.name, Kind: ErrRejected, Msg: "the base URL is not a valid URL", Fix: "check web." + b.name + "_base_url"}
}

// retryAfter reads Retry-After (seconds or an HTTP date); 0 when absent.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		return seconds(s)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxCooldown)
	}
	return 0
}

// maxCooldown bounds any wait an engine asks for.
const maxCooldown = 24 * time.Hour

func seconds(s int64) time.Duration {
	if s <= 0 {
		return 0
	}
	if s > int64(maxCooldown/time.Second) {
		return maxCooldown
	}
	return time.Duration(s) * time.Second
}

// errorText pulls a human message out of an error body: the common JSON
// shapes ({"message"}, {"error": "..." | {"message"|"detail"}}, {"detail":
// "..." | {"error"}}) or short plain text; never HTML.
func errorText(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	if body[0] == '{' {
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil {
			return ""
		}
		for _, k := range []string{"message", "error", "detail"} {
			if s := jsonText(m[k]); s != "" {
				return clean(s, 200)
			}
		}
		return ""
	}
	if body[0] == '<' {
		return ""
	}
	return clean(string(body), 200)
}

// jsonText is a JSON string, or the message inside a JSON object.
func jsonText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	for _, k := range []string{"error", "detail", "message"} {
		if s := jsonText(m[k]); s != "" {
			return s
		}
	}
	return ""
}

// decode unmarshals an engine's JSON body into v, an object, tolerating
// fields of the wrong type (they stay zero) but not a body that is not a
// JSON object.
func decode(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return errors.New("empty body, not JSON")
	}
	if body[0] != '{' {
		if body[0] == '<' {
			return errors.New("answered HTML, not JSON")
		}
		return errors.New("answer is not a JSON object")
	}
	return tolerant(json.Unmarshal(body, v))
}

// decodeList is decode for a JSON array body.
func decodeList(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '[' {
		if len(body) > 0 && body[0] == '<' {
			return errors.New("answered HTML, not JSON")
		}
		return errors.New("answer is not a JSON array")
	}
	return tolerant(json.Unmarshal(body, v))
}

// tolerant drops type mismatches (encoding/json skips such fields and
// goes on), keeping syntax errors.
func tolerant(err error) error {
	var te *json.UnmarshalTypeError
	if err == nil || errors.As(err, &te) {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d", se.Offset)
	}
	return errors.New("invalid JSON")
}

// present reports whether a decoded list was a JSON array: missing, null
// and values of another type leave it nil ([] gives an empty slice).
func present[T any](p *[]T) bool { return p != nil && *p != nil }
