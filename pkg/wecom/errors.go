package wecom

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
)

// Decision sentinels an *APIError matches with errors.Is.
var (
	// ErrRateLimited: 45009 (api freq out of limit), 45033 (too many
	// concurrent calls). Retried with backoff, then returned.
	ErrRateLimited = errors.New("rate limited")
	// ErrTokenInvalid: 40001, 40014, 42001. The client refreshes the token
	// and retries once.
	ErrTokenInvalid = errors.New("access token invalid")
	// ErrContentTooLong: 45002, or a text rejected locally before sending.
	ErrContentTooLong = errors.New("content too long")
	// ErrInvalidUser: the recipient was reported in invaliduser.
	ErrInvalidUser = errors.New("invalid recipient")
	// ErrMediaSize: media outside WeCom's size or type limits, detected
	// locally before uploading, or too large to download.
	ErrMediaSize = errors.New("media size or type not allowed")
)

// WeCom error codes the client makes decisions on.
const (
	CodeSystemBusy        = -1
	CodeInvalidCredential = 40001
	CodeInvalidToken      = 40014
	CodeInvalidMediaID    = 40007
	CodeTokenExpired      = 42001
	CodeContentTooLong    = 45002
	CodeFreqLimit         = 45009
	CodeTooConcurrent     = 45033
)

// APIError is a non-zero errcode from the WeCom API.
type APIError struct {
	Code int
	Msg  string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("wecom api: errcode %d: %s", e.Code, e.Msg)
}

// Is maps codes to the decision sentinels.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrRateLimited:
		return e.Code == CodeFreqLimit || e.Code == CodeTooConcurrent
	case ErrTokenInvalid:
		return e.Code == CodeInvalidCredential || e.Code == CodeInvalidToken || e.Code == CodeTokenExpired
	case ErrContentTooLong:
		return e.Code == CodeContentTooLong
	}
	return false
}

// Retryable reports whether the call may succeed if repeated after a pause.
func (e *APIError) Retryable() bool {
	return e.Code == CodeSystemBusy || e.Code == CodeFreqLimit || e.Code == CodeTooConcurrent
}

// statusError is an HTTP status the API answered instead of JSON.
type statusError struct {
	Status int
}

func (e *statusError) Error() string { return fmt.Sprintf("http status %d", e.Status) }

// retryable reports whether err is worth another attempt.
func retryable(err error) bool {
	var api *APIError
	if errors.As(err, &api) {
		return api.Retryable()
	}
	var st *statusError
	if errors.As(err, &st) {
		return st.Status >= 500 || st.Status == 429
	}
	var ne *netError
	return errors.As(err, &ne)
}

// netError is a transport failure, with the URL (and so the token or the
// secret) removed.
type netError struct {
	Op  string
	Err error
}

func (e *netError) Error() string { return RedactCredentials(e.Op + ": " + e.Err.Error()) }
func (e *netError) Unwrap() error { return e.Err }

// redact turns an *url.Error, whose text holds the full URL with
// access_token or corpsecret, into a netError that names only the path.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		path := "(url)"
		if u, perr := url.Parse(ue.URL); perr == nil {
			path = u.Path
		}
		return &netError{Op: ue.Op + " " + path, Err: redactInner(ue.Err)}
	}
	return &netError{Op: "request", Err: err}
}

// redactInner strips any nested url.Error (a redirect can nest one).
func redactInner(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return errors.New(ue.Op + " (redacted url): " + fmt.Sprint(redactInner(ue.Err)))
	}
	return err
}

// credentialRE finds an access token or corp secret given as a parameter
// (access_token=..., "corpsecret": "...") in free text.
var credentialRE = regexp.MustCompile(`(?i)\b(access_token|corpsecret)("?\s*[=:]\s*"?)[^\s&"',;)\]}]+`)

// RedactCredentials replaces the values of access_token and corpsecret
// parameters in s with "***". Error texts from the API (errmsg) and from
// the transport pass through it before they are returned, logged or
// stored; a configured secret echoed without its name is the log
// scrubber's job.
func RedactCredentials(s string) string {
	return credentialRE.ReplaceAllString(s, "${1}${2}***")
}
