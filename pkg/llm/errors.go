package llm

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors carry the decision a caller has to make. Every error from
// Chat and Stream that is not the caller's own (context cancellation, the
// Stream callback's error) is an *APIError wrapping exactly one of them.
var (
	// ErrRateLimited: HTTP 429. Retried unless the provider says the quota
	// is spent; APIError.RetryAfter says when to try again.
	ErrRateLimited = errors.New("rate limited")
	// ErrServer: HTTP 5xx (and 408/409). Retried.
	ErrServer = errors.New("server error")
	// ErrUnavailable: the endpoint could not be reached, timed out, or the
	// circuit breaker is open. Retried, except when the breaker is open.
	ErrUnavailable = errors.New("model unavailable")
	// ErrBadRequest: the provider rejected the request (400, 404, 422...).
	// Never retried: the same request fails the same way.
	ErrBadRequest = errors.New("bad request")
	// ErrAuth: HTTP 401/403, a missing or wrong API key. Never retried.
	ErrAuth = errors.New("authentication failed")
	// ErrContentFilter: the provider's content filter refused the prompt or
	// cut the reply (finish_reason "content_filter"). Never retried.
	ErrContentFilter = errors.New("content filtered")
	// ErrMalformed: the reply could not be understood (bad JSON, bad SSE,
	// a truncated stream, a body over the size limit). Never retried.
	ErrMalformed = errors.New("malformed response")
)

// APIError describes a failed call. Err is one of the sentinel errors; Cause,
// when set, is the underlying transport or decoding error (so errors.Is
// finds context.DeadlineExceeded for a timeout).
type APIError struct {
	Provider   string
	Status     int           // HTTP status, 0 when none was received
	Code       string        // the provider's error code or type, if any
	Message    string        // the provider's error message, or what went wrong
	RetryAfter time.Duration // from Retry-After / retry-after-ms, or the breaker's cool-down
	Attempts   int           // HTTP attempts made
	Err        error         // a sentinel error
	Cause      error
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("llm: ")
	b.WriteString(e.Provider)
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Cause != nil && (e.Message == "" || !strings.Contains(e.Message, e.Cause.Error())) {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	return b.String()
}

// Unwrap returns the sentinel error and the cause.
func (e *APIError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// retryable reports whether another attempt may succeed.
func (e *APIError) retryable() bool {
	switch e.Err {
	case ErrRateLimited:
		// A spent quota does not come back in seconds.
		return e.Code != "insufficient_quota"
	case ErrServer, ErrUnavailable:
		return true
	}
	return false
}

// breakerFailure reports whether the error says the endpoint is unhealthy.
func (e *APIError) breakerFailure() bool {
	return e.Err == ErrServer || e.Err == ErrUnavailable
}

var contentFilterCodes = map[string]bool{
	"content_filter":           true,
	"content_policy_violation": true,
	"data_inspection_failed":   true, // DashScope
}

// classifyStatus maps an HTTP status (and provider error code) to a sentinel.
func classifyStatus(status int, code string) error {
	switch {
	case contentFilterCodes[code]:
		return ErrContentFilter
	case status == http.StatusTooManyRequests:
		return ErrRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ErrAuth
	case status == http.StatusRequestTimeout || status == http.StatusConflict:
		return ErrServer
	case status >= 500:
		return ErrServer
	case status >= 400:
		return ErrBadRequest
	}
	return ErrServer
}

// parseRetryAfter reads retry-after-ms (OpenAI) or Retry-After in seconds or
// as an HTTP date. It returns 0 when absent or unparsable.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || s > 1e6 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
