package wecom

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DefaultBaseURL is the public WeCom API.
const DefaultBaseURL = "https://qyapi.weixin.qq.com"

const (
	defaultAttempts = 4
	defaultTimeout  = 60 * time.Second
	backoffBase     = 500 * time.Millisecond
	backoffCap      = 10 * time.Second
	// tokenMargin is how long before expiry a token is refreshed; for short
	// lifetimes a tenth of the lifetime is used instead.
	tokenMargin  = 5 * time.Minute
	maxJSONBytes = 1 << 20
)

// Client calls the WeCom active API for one application. Set the exported
// fields, then use it from any number of goroutines; do not copy it after
// first use.
type Client struct {
	BaseURL    string // DefaultBaseURL when empty
	CorpID     string
	CorpSecret string
	AgentID    int64
	HTTP       *http.Client     // a client with a 60 s timeout when nil
	Now        func() time.Time // time.Now when nil
	Logger     *slog.Logger     // discarded when nil
	// Sleep waits between retries; nil sleeps on a timer, returning early
	// with ctx.Err() when ctx ends.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxAttempts bounds tries of a retryable failure (45009, 45033, -1,
	// HTTP 5xx, network); 4 when zero.
	MaxAttempts int

	mu     sync.Mutex
	token  string
	expiry time.Time
	flight *tokenFlight
}

// tokenFlight is one in-progress token fetch that concurrent callers share.
type tokenFlight struct {
	done chan struct{}
	err  error
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) log() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: defaultTimeout}
}

func (c *Client) endpoint(path string, q url.Values) string {
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	return strings.TrimRight(base, "/") + path + "?" + q.Encode()
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// final marks an error the retry loop must not repeat.
type final struct{ error }

func (f final) Unwrap() error { return f.error }

// retry runs fn until it succeeds, fails for good, or MaxAttempts retryable
// failures happened, sleeping with jittered exponential backoff between.
func (c *Client) retry(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = defaultAttempts
	}
	var err error
	for i := range attempts {
		err = fn(ctx)
		if err == nil {
			return nil
		}
		var f final
		if errors.As(err, &f) {
			return f.error
		}
		if !retryable(err) || ctx.Err() != nil || i == attempts-1 {
			break
		}
		d := backoff(i)
		c.log().Warn("wecom api call failed, retrying", "op", op, "attempt", i+1, "delay", d, "err", err)
		if serr := c.sleep(ctx, d); serr != nil {
			return fmt.Errorf("%w (gave up waiting to retry: %v)", err, serr)
		}
	}
	return err
}

// backoff is the jittered delay after the i-th failure (0-based):
// uniformly in [d/2, d] with d = base * 2^i, capped.
func backoff(i int) time.Duration {
	d := backoffBase << min(i, 16)
	d = min(d, backoffCap)
	return d/2 + rand.N(d/2+1)
}

// authed runs fn with an access token inside the retry loop; a token
// rejected as invalid or expired is dropped and fn runs once more with a
// fresh one.
func (c *Client) authed(ctx context.Context, op string, fn func(ctx context.Context, token string) error) error {
	refreshed := false
	err := c.retry(ctx, op, func(ctx context.Context) error {
		for {
			tok, err := c.accessToken(ctx)
			if err != nil {
				return final{err} // accessToken retried already
			}
			err = fn(ctx, tok)
			if !refreshed && errors.Is(err, ErrTokenInvalid) {
				refreshed = true
				c.invalidate(tok)
				c.log().Info("wecom access token rejected, refreshing", "op", op, "err", err)
				continue
			}
			return err
		}
	})
	if err != nil {
		return fmt.Errorf("wecom: %s: %w", op, err)
	}
	return nil
}

// accessToken returns a cached token, or fetches one; concurrent callers
// share a single fetch.
func (c *Client) accessToken(ctx context.Context) (string, error) {
	for {
		c.mu.Lock()
		if c.token != "" && c.now().Before(c.expiry) {
			tok := c.token
			c.mu.Unlock()
			return tok, nil
		}
		if f := c.flight; f != nil {
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if f.err == nil {
				continue
			}
			// The fetching caller's context ended; ours has not.
			if (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) && ctx.Err() == nil {
				continue
			}
			return "", f.err
		}
		f := &tokenFlight{done: make(chan struct{})}
		c.flight = f
		c.mu.Unlock()

		tok, ttl, err := c.fetchToken(ctx)
		c.mu.Lock()
		if err == nil {
			margin := min(tokenMargin, ttl/10)
			c.token, c.expiry = tok, c.now().Add(ttl-margin)
		}
		f.err = err
		c.flight = nil
		c.mu.Unlock()
		close(f.done)
		if err != nil {
			return "", err
		}
		c.log().Debug("wecom access token refreshed", "expires_in", ttl)
		return tok, nil
	}
}

// invalidate drops tok if it is still the cached token.
func (c *Client) invalidate(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == tok {
		c.token, c.expiry = "", time.Time{}
	}
}

// apiStatus is the errcode/errmsg pair every JSON answer carries.
type apiStatus struct {
	ErrCode *int   `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
}

func (s apiStatus) err() error {
	if s.ErrCode != nil && *s.ErrCode != 0 {
		return &APIError{Code: *s.ErrCode, Msg: RedactCredentials(s.ErrMsg)}
	}
	return nil
}

type tokenAnswer struct {
	apiStatus
	AccessToken string `json:"access_token"`
	ExpiresIn   int64  `json:"expires_in"`
}

func (c *Client) fetchToken(ctx context.Context) (string, time.Duration, error) {
	if c.CorpID == "" || c.CorpSecret == "" {
		return "", 0, errors.New("wecom: gettoken: corp id or secret not set")
	}
	var out tokenAnswer
	err := c.retry(ctx, "gettoken", func(ctx context.Context) error {
		u := c.endpoint("/cgi-bin/gettoken", url.Values{"corpid": {c.CorpID}, "corpsecret": {c.CorpSecret}})
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return final{redact(err)}
		}
		var o tokenAnswer
		if err := c.doJSON(req, &o); err != nil {
			return err
		}
		out = o
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("wecom: gettoken: %w", err)
	}
	if out.AccessToken == "" || out.ExpiresIn <= 0 {
		return "", 0, fmt.Errorf("wecom: gettoken: answer without token or lifetime")
	}
	return out.AccessToken, time.Duration(out.ExpiresIn) * time.Second, nil
}

// doJSON sends req and decodes a JSON answer into out, which must embed
// apiStatus; a non-zero errcode becomes an *APIError.
func (c *Client) doJSON(req *http.Request, out interface{ err() error }) error {
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return redact(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBytes+1))
	if err != nil {
		return redact(err)
	}
	if resp.StatusCode != http.StatusOK {
		return &statusError{Status: resp.StatusCode}
	}
	if len(body) > maxJSONBytes {
		return final{fmt.Errorf("answer over %d bytes", maxJSONBytes)}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return final{fmt.Errorf("decode answer: %w", err)}
	}
	return out.err()
}

// answer is a JSON answer type embedding apiStatus.
type answer[T any] interface {
	*T
	err() error
}

// postJSON posts in as JSON to path with a token and decodes the answer.
func postJSON[T any, P answer[T]](ctx context.Context, c *Client, op, path string, in any) (T, error) {
	var res T
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(in); err != nil {
		return res, fmt.Errorf("wecom: %s: encode: %w", op, err)
	}
	err := c.authed(ctx, op, func(ctx context.Context, tok string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost,
			c.endpoint(path, url.Values{"access_token": {tok}}), bytes.NewReader(buf.Bytes()))
		if err != nil {
			return final{redact(err)}
		}
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		var o T
		if err := c.doJSON(req, P(&o)); err != nil {
			return err
		}
		res = o
		return nil
	})
	return res, err
}
