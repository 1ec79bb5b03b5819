package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"agent/pkg/clock"
)

// Defaults for Config and Options left zero.
const (
	defaultTimeout         = 60 * time.Second
	defaultMaxBody         = 8 << 20
	defaultMaxAttempts     = 4
	defaultBaseDelay       = 500 * time.Millisecond
	defaultMaxDelay        = 20 * time.Second
	defaultMaxElapsed      = 2 * time.Minute
	defaultMaxRetryAfter   = 60 * time.Second
	defaultBreakerFails    = 5
	defaultBreakerCool     = 30 * time.Second
	maxErrorBody           = 64 << 10
	defaultUserAgent       = "agent-llm/1"
	contentTypeJSON        = "application/json"
	contentTypeEventStream = "text/event-stream"
)

// Config is what a Client is made of: the endpoint, the model and its
// limits (the composition root maps the [llm] section onto them, each
// provider's default base_url filled in) plus what tests inject. BaseURL is
// required; zero Timeout means 60s.
type Config struct {
	Provider   string
	BaseURL    string
	APIKey     string
	Model      string
	VoiceModel string
	Vision     bool
	MaxTokens  int
	// Timeout bounds one HTTP attempt: the whole exchange for Chat, the
	// wait for the next line for Stream. It is a network timeout and runs
	// on the wall clock, not on Clock.
	Timeout time.Duration

	HTTPClient *http.Client // nil: a client with no overall timeout
	// Clock times the retry policy: the waits between attempts, their
	// total, Retry-After dates and the breaker's cool-down. nil: the wall
	// clock.
	Clock  clock.Clock
	Rand   func() float64 // jitter in [0,1); nil: math/rand/v2
	Logger *slog.Logger   // nil: discard
}

// RetryPolicy bounds retries of 429, 5xx and network failures. Zero fields
// take the defaults: 4 attempts, 500ms base delay doubling to at most 20s
// (with jitter: each delay is between half and all of that), 2 minutes in
// all, and a Retry-After of at most 60s honoured (a longer one is returned
// to the caller at once).
type RetryPolicy struct {
	MaxAttempts   int
	BaseDelay     time.Duration
	MaxDelay      time.Duration
	MaxElapsed    time.Duration
	MaxRetryAfter time.Duration
}

// Option adjusts a Client.
type Option func(*Client)

// WithRetry sets the retry policy.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithBreaker sets the circuit breaker: failures consecutive 5xx/network
// failures open it for cooldown. failures < 0 disables it.
func WithBreaker(failures int, cooldown time.Duration) Option {
	return func(c *Client) { c.breaker.threshold, c.breaker.cooldown = failures, cooldown }
}

// WithMaxBodyBytes bounds a response body (a whole stream included).
func WithMaxBodyBytes(n int64) Option { return func(c *Client) { c.maxBody = n } }

// Client talks to one OpenAI-compatible chat-completions endpoint. It is
// safe for concurrent use.
type Client struct {
	cfg     Config
	preset  preset
	url     string
	http    *http.Client
	clock   clock.Clock
	now     func() time.Time
	rand    func() float64
	log     *slog.Logger
	retry   RetryPolicy
	maxBody int64
	breaker breaker
}

// New checks cfg and returns a Client.
func New(cfg Config, opts ...Option) (*Client, error) {
	p, ok := presets[cfg.Provider]
	if !ok {
		return nil, fmt.Errorf("llm: unknown provider %q (want openai, deepseek, dashscope, ollama, vllm or custom)", cfg.Provider)
	}
	base := cfg.BaseURL
	if base == "" {
		return nil, fmt.Errorf("llm: provider %q needs a base_url", cfg.Provider)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm: base_url %q: want an http or https URL", base)
	}
	if cfg.Model == "" {
		return nil, errors.New("llm: model is required")
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("llm: max_tokens %d is negative", cfg.MaxTokens)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	c := &Client{
		cfg:     cfg,
		preset:  p,
		url:     strings.TrimRight(base, "/") + "/chat/completions",
		http:    cfg.HTTPClient,
		clock:   clock.Or(cfg.Clock),
		rand:    cfg.Rand,
		log:     cfg.Logger,
		maxBody: defaultMaxBody,
		breaker: breaker{threshold: defaultBreakerFails, cooldown: defaultBreakerCool},
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	c.now = c.clock.Now
	if c.rand == nil {
		c.rand = rand.Float64
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("component", "llm", "provider", cfg.Provider)
	for _, o := range opts {
		o(c)
	}
	c.breaker.now = c.now
	r := &c.retry
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = defaultMaxAttempts
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = defaultBaseDelay
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = defaultMaxDelay
	}
	if r.MaxElapsed <= 0 {
		r.MaxElapsed = defaultMaxElapsed
	}
	if r.MaxRetryAfter <= 0 {
		r.MaxRetryAfter = defaultMaxRetryAfter
	}
	if c.maxBody <= 0 {
		c.maxBody = defaultMaxBody
	}
	return c, nil
}

// Provider returns the configured provider name.
func (c *Client) Provider() string { return c.cfg.Provider }

// Model returns the model for a turn: the voice model for voice and
// hardware turns when one is set, the main model otherwise.
func (c *Client) Model(voice bool) string {
	if voice && c.cfg.VoiceModel != "" {
		return c.cfg.VoiceModel
	}
	return c.cfg.Model
}

// BreakerState returns "closed", "open" or "half-open".
func (c *Client) BreakerState() string { return c.breaker.state() }

// Chat sends req and waits for the whole reply. Errors are an *APIError
// (see the sentinel errors), or the context's error when ctx ends. A reply
// cut by the content filter is returned together with an error wrapping
// ErrContentFilter.
func (c *Client) Chat(ctx context.Context, req Request) (Response, error) {
	req.Stream = false
	return c.do(ctx, req, nil)
}

// Stream sends req with streaming on, calls fn with each fragment as it
// arrives and returns the assembled reply. A failure before the first
// fragment is retried like Chat; after it, the partial reply is returned
// with the error. An error from fn stops the stream and is returned as is.
func (c *Client) Stream(ctx context.Context, req Request, fn func(Delta) error) (Response, error) {
	req.Stream = true
	if fn == nil {
		fn = func(Delta) error { return nil }
	}
	return c.do(ctx, req, fn)
}

func (c *Client) do(ctx context.Context, req Request, emit func(Delta) error) (Response, error) {
	if req.Model == "" {
		req.Model = c.cfg.Model
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = c.cfg.MaxTokens
	}
	body, err := encodeRequest(c.preset, c.cfg.Vision, req)
	if err != nil {
		return Response{}, &APIError{Provider: c.cfg.Provider, Err: ErrBadRequest, Message: "encoding request", Cause: err}
	}
	start := c.now()
	var last *APIError
	for attempt := 1; ; attempt++ {
		ok, probe, wait := c.breaker.allow()
		if !ok {
			msg := "circuit breaker open"
			if last != nil {
				msg += " (last failure: " + last.Error() + ")"
			}
			return Response{}, &APIError{Provider: c.cfg.Provider, Err: ErrUnavailable, Message: msg, RetryAfter: wait, Attempts: attempt - 1}
		}
		resp, emitted, err := c.attempt(ctx, body, req.Stream, emit)
		if err == nil {
			c.breaker.done(probe, true, false)
			return resp, nil
		}
		if ctx.Err() != nil {
			c.breaker.done(probe, false, false)
			return resp, fmt.Errorf("llm: %s: %w", c.cfg.Provider, ctx.Err())
		}
		var cb callbackError
		if errors.As(err, &cb) {
			c.breaker.done(probe, true, false)
			return resp, cb.err
		}
		var ae *APIError
		if !errors.As(err, &ae) {
			ae = &APIError{Err: ErrUnavailable, Cause: err}
		}
		ae.Provider, ae.Attempts = c.cfg.Provider, attempt
		last = ae
		switch {
		case ae.breakerFailure():
			if c.breaker.done(probe, false, true) {
				c.log.Warn("circuit breaker open", "cooldown", c.breaker.cooldown, "err", ae)
			}
		case ae.Err == ErrMalformed:
			c.breaker.done(probe, false, false)
		default: // the server answered sensibly
			c.breaker.done(probe, true, false)
		}
		if !ae.retryable() || emitted || attempt >= c.retry.MaxAttempts {
			return resp, ae
		}
		delay := ae.RetryAfter
		if delay > c.retry.MaxRetryAfter {
			return resp, ae
		}
		if delay == 0 {
			delay = c.backoff(attempt)
		}
		if c.now().Sub(start)+delay > c.retry.MaxElapsed {
			return resp, ae
		}
		c.log.Warn("retrying", "attempt", attempt, "delay", delay, "err", ae)
		if fn, ok := ctx.Value(retryNoticeKey{}).(func(int, time.Duration, error)); ok {
			fn(attempt, delay, ae)
		}
		if err := clock.Sleep(ctx, c.clock, delay); err != nil {
			return Response{}, fmt.Errorf("llm: %s: %w", c.cfg.Provider, err)
		}
	}
}

// backoff returns the jittered delay before attempt+1.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.retry.BaseDelay
	for i := 1; i < attempt && d < c.retry.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, c.retry.MaxDelay)
	return d/2 + time.Duration(c.rand()*float64(d/2))
}

// errAttemptTimeout is the cause when Config.Timeout cuts an attempt.
var errAttemptTimeout = fmt.Errorf("attempt timed out: %w", context.DeadlineExceeded)

// attempt makes one HTTP exchange. emitted reports whether the stream
// callback was called (a retry would repeat text the user has seen).
func (c *Client) attempt(ctx context.Context, body []byte, stream bool, emit func(Delta) error) (resp Response, emitted bool, err error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(c.cfg.Timeout, func() { cancel(errAttemptTimeout) })
	defer timer.Stop()

	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return Response{}, false, &APIError{Err: ErrBadRequest, Message: "building request", Cause: err}
	}
	hreq.Header.Set("Content-Type", contentTypeJSON)
	hreq.Header.Set("User-Agent", defaultUserAgent)
	if stream {
		hreq.Header.Set("Accept", contentTypeEventStream)
	} else {
		hreq.Header.Set("Accept", contentTypeJSON)
	}
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	hres, err := c.http.Do(hreq)
	if err != nil {
		return Response{}, false, c.netErr(actx, err)
	}
	defer hres.Body.Close()

	if hres.StatusCode < 200 || hres.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(hres.Body, maxErrorBody))
		code, msg := parseErrorBody(b)
		return Response{}, false, &APIError{
			Status:     hres.StatusCode,
			Code:       code,
			Message:    msg,
			RetryAfter: parseRetryAfter(hres.Header, c.now()),
			Err:        classifyStatus(hres.StatusCode, code),
		}
	}

	mt, _, _ := mime.ParseMediaType(hres.Header.Get("Content-Type"))
	if !stream || mt == contentTypeJSON {
		// A server that ignores stream:true answers with one JSON body.
		b, err := io.ReadAll(io.LimitReader(hres.Body, c.maxBody+1))
		if err != nil {
			return Response{}, false, c.netErr(actx, err)
		}
		if int64(len(b)) > c.maxBody {
			return Response{}, false, &APIError{Status: hres.StatusCode, Err: ErrMalformed, Message: fmt.Sprintf("response larger than %d bytes", c.maxBody)}
		}
		resp, werr, err := decodeResponse(b)
		if err != nil {
			return Response{}, false, &APIError{Status: hres.StatusCode, Err: ErrMalformed, Message: err.Error()}
		}
		if werr != nil {
			return Response{}, false, &APIError{Status: hres.StatusCode, Code: werr.Code, Message: werr.Message, Err: classifyStatus(http.StatusInternalServerError, werr.Code)}
		}
		if stream {
			d := Delta{Content: resp.Message.Content, Reasoning: resp.Message.ReasoningContent}
			for i, tc := range resp.Message.ToolCalls {
				d.ToolCalls = append(d.ToolCalls, ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			if err := emit(d); err != nil {
				return resp, true, callbackError{err}
			}
			emitted = true
		}
		return resp, emitted, filtered(resp)
	}

	sr := &streamReader{emit: emit, onLine: func() { timer.Reset(c.cfg.Timeout) }}
	resp, err = sr.read(&limitReader{r: hres.Body, n: c.maxBody})
	if err != nil {
		var ae *APIError
		var cb callbackError
		switch {
		case errors.As(err, &ae), errors.As(err, &cb):
		case errors.Is(err, errStreamTooLarge):
			err = &APIError{Err: ErrMalformed, Message: fmt.Sprintf("stream larger than %d bytes", c.maxBody)}
		default:
			err = c.netErr(actx, err)
		}
		return resp, sr.emitted, err
	}
	return resp, sr.emitted, filtered(resp)
}

// filtered returns an ErrContentFilter error when the reply was cut by the
// provider's filter.
func filtered(resp Response) error {
	if resp.FinishReason == FinishContentFilter {
		return &APIError{Status: http.StatusOK, Err: ErrContentFilter, Message: "the reply was stopped by the provider's content filter"}
	}
	return nil
}

// netErr wraps a transport error. When the caller's context ended, do
// returns that instead.
func (c *Client) netErr(actx context.Context, err error) error {
	if cause := context.Cause(actx); errors.Is(cause, errAttemptTimeout) {
		return &APIError{Err: ErrUnavailable, Message: fmt.Sprintf("no answer within %s", c.cfg.Timeout), Cause: cause}
	}
	return &APIError{Err: ErrUnavailable, Cause: err}
}

// limitReader returns errStreamTooLarge once more than n bytes were read.
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		// One more byte tells a body of exactly n from a longer one.
		var one [1]byte
		k, err := l.r.Read(one[:])
		if k > 0 {
			return 0, errStreamTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.r.Read(p)
	l.n -= int64(k)
	return k, err
}

type retryNoticeKey struct{}

// WithRetryNotice returns a context whose calls report each retry to fn
// (attempt number, the wait before the next one, the error), so a caller
// can tell its user that an answer is delayed.
func WithRetryNotice(ctx context.Context, fn func(attempt int, delay time.Duration, err error)) context.Context {
	return context.WithValue(ctx, retryNoticeKey{}, fn)
}
