package websearch

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kinds of engine failure; an *EngineError matches its kind with
// errors.Is.
var (
	// ErrAuth: the engine rejected or wants credentials; Fix names the
	// config key.
	ErrAuth = errors.New("credentials rejected")
	// ErrRateLimited: too many requests or the plan's quota is spent;
	// RetryAfter says for how long when the engine told.
	ErrRateLimited = errors.New("rate limited")
	// ErrUnavailable: unreachable, timed out or a 5xx.
	ErrUnavailable = errors.New("unavailable")
	// ErrMalformed: the answer is not the JSON the API documents.
	ErrMalformed = errors.New("malformed response")
	// ErrRejected: the engine refused the request (another 4xx), e.g.
	// SearXNG without the JSON format enabled.
	ErrRejected = errors.New("request refused")

	// ErrNoResults: the engine answered with nothing.
	ErrNoResults = errors.New("no results")
	// ErrNotConfigured: the engine asked for is not configured.
	ErrNotConfigured = errors.New("not configured")
)

// EngineError is one engine's failure. Its text never holds the API key
// nor the query.
type EngineError struct {
	Engine string
	Status int // HTTP status; 0 when there was no response
	// RetryAfter is how long a rate-limited engine asked to wait (0:
	// unknown).
	RetryAfter time.Duration
	Kind       error  // ErrAuth, ErrRateLimited, ...
	Msg        string // what went wrong
	Fix        string // what an operator can do, if anything
}

func (e *EngineError) Error() string {
	var b strings.Builder
	b.WriteString(e.Engine)
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Fix != "" {
		b.WriteString(" (")
		b.WriteString(e.Fix)
		b.WriteString(")")
	}
	return b.String()
}

// Is matches the error's kind.
func (e *EngineError) Is(target error) bool { return target != nil && target == e.Kind }

// Reason is the failure in a few words, for the header of a tool answer.
func Reason(err error) string {
	var ee *EngineError
	switch {
	case errors.Is(err, ErrNoResults):
		return "no results"
	case errors.As(err, &ee):
		switch {
		case errors.Is(ee, ErrRateLimited):
			if ee.RetryAfter > 0 {
				return "rate limited, retry in " + roundUp(ee.RetryAfter).String()
			}
			return "rate limited"
		case errors.Is(ee, ErrAuth):
			return "credentials rejected"
		case errors.Is(ee, ErrMalformed):
			return "malformed response"
		case errors.Is(ee, ErrUnavailable):
			if ee.Status != 0 {
				return fmt.Sprintf("HTTP %d", ee.Status)
			}
			return "unreachable"
		case ee.Status != 0:
			return fmt.Sprintf("refused (HTTP %d)", ee.Status)
		}
		return ee.Msg
	case err != nil:
		return err.Error()
	}
	return ""
}

func roundUp(d time.Duration) time.Duration {
	if d < time.Second {
		return time.Second
	}
	return d.Round(time.Second)
}

// SearchError says why no engine answered.
type SearchError struct {
	Failures []Failure
}

func (e *SearchError) Error() string {
	if len(e.Failures) == 0 {
		return "web search failed: no engine was tried"
	}
	parts := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		var ee *EngineError
		if errors.As(f.Err, &ee) {
			parts[i] = ee.Error()
		} else {
			parts[i] = f.Engine + ": " + f.Err.Error()
		}
	}
	return "web search failed: " + strings.Join(parts, "; ")
}

// Unwrap gives each engine's error to errors.Is and errors.As.
func (e *SearchError) Unwrap() []error {
	out := make([]error, len(e.Failures))
	for i, f := range e.Failures {
		out[i] = f.Err
	}
	return out
}
