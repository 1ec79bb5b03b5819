package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Sign-in: the operator runs `agentctl console` on the box. It asks the
// daemon over the 0600 admin socket (root and the service user only) for a
// one-time link, e.g. http://127.0.0.1:8080/console?code=...; opening it
// sets a session cookie and redirects to the console with the session's
// key in the URL fragment ("/#key=..."), which the page keeps in
// sessionStorage and sends in its hello. Both are needed: browsers send a
// cookie for 127.0.0.1 to every port of it, so a local user's server on
// another port could collect the cookie from a page the operator opens;
// the fragment never reaches a server and sessionStorage is per origin,
// port included. A console session is
// the operator: the voice channel admits its WebSocket without a token and
// without pairing. Nothing else (a loopback address, an empty voice.token)
// makes anyone the operator.

// Defaults of SessionConfig.
const (
	// CookieName is the session cookie.
	CookieName = "agent_console"
	// SignInPath is where one-time links point.
	SignInPath = "/console"

	DefaultLinkTTL    = 2 * time.Minute
	DefaultSessionTTL = 12 * time.Hour
	defaultMaxCodes   = 16
	defaultMaxLive    = 32
)

// SessionConfig configures Sessions. Zero fields take the defaults.
type SessionConfig struct {
	Now        func() time.Time
	LinkTTL    time.Duration // a link is redeemable this long, once; default 2 min
	SessionTTL time.Duration // a session lasts this long; default 12 h
	MaxCodes   int           // unredeemed links kept; default 16 (the oldest goes)
	MaxLive    int           // sessions kept; default 32 (the oldest goes)
	Logger     *slog.Logger
}

// Sessions holds one-time sign-in codes and console sessions, in memory
// (a restart signs everyone out). Both are 256-bit random values, stored
// as their SHA-256 so a lookup's timing says nothing about them. Safe for
// concurrent use.
type Sessions struct {
	cfg SessionConfig
	log *slog.Logger

	mu       sync.Mutex
	codes    map[[32]byte]time.Time // unredeemed codes -> expiry
	sessions map[[32]byte]time.Time // sessions -> expiry
	keys     map[[32]byte][32]byte  // sessions -> digest of their key
}

// NewSessions returns an empty store.
func NewSessions(cfg SessionConfig) *Sessions {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LinkTTL <= 0 {
		cfg.LinkTTL = DefaultLinkTTL
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.MaxCodes <= 0 {
		cfg.MaxCodes = defaultMaxCodes
	}
	if cfg.MaxLive <= 0 {
		cfg.MaxLive = defaultMaxLive
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sessions{cfg: cfg, log: log, codes: map[[32]byte]time.Time{}, sessions: map[[32]byte]time.Time{}, keys: map[[32]byte][32]byte{}}
}

// Link is a one-time sign-in link.
type Link struct {
	URL     string
	Expires time.Time
}

// NewLink mints a one-time code and returns the sign-in link under base
// ("http://127.0.0.1:8080").
func (s *Sessions) NewLink(base string) (Link, error) {
	code, err := random()
	if err != nil {
		return Link{}, fmt.Errorf("console: new sign-in code: %w", err)
	}
	now := s.cfg.Now()
	exp := now.Add(s.cfg.LinkTTL)
	s.mu.Lock()
	prune(s.codes, now)
	put(s.codes, digest(code), exp, s.cfg.MaxCodes)
	s.mu.Unlock()
	return Link{URL: strings.TrimSuffix(base, "/") + SignInPath + "?code=" + url.QueryEscape(code), Expires: exp}, nil
}

// redeem consumes code and starts a session; ok is false for a code that
// is unknown, expired or already used.
func (s *Sessions) redeem(code string) (id, key string, exp time.Time, ok bool) {
	if code == "" {
		return "", "", time.Time{}, false
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	prune(s.codes, now)
	k := digest(code)
	if _, found := s.codes[k]; !found {
		return "", "", time.Time{}, false
	}
	delete(s.codes, k) // single use, whatever happens next
	id, err := random()
	if err == nil {
		key, err = random()
	}
	if err != nil {
		s.log.Error("console session not started", "err", err)
		return "", "", time.Time{}, false
	}
	exp = now.Add(s.cfg.SessionTTL)
	prune(s.sessions, now)
	put(s.sessions, digest(id), exp, s.cfg.MaxLive)
	for k := range s.keys { // keys of sessions put or prune dropped
		if _, live := s.sessions[k]; !live {
			delete(s.keys, k)
		}
	}
	s.keys[digest(id)] = digest(key)
	return id, key, exp, true
}

// Verify reports whether id is a valid session and key its key (what the
// page got in the sign-in redirect's fragment).
func (s *Sessions) Verify(id, key string) bool {
	if id == "" || key == "" || !s.Valid(id) {
		return false
	}
	want := digest(key)
	s.mu.Lock()
	got, ok := s.keys[digest(id)]
	s.mu.Unlock()
	return ok && subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// Session returns the id of the valid session r's cookie names, or "".
func (s *Sessions) Session(r *http.Request) string {
	c, err := r.Cookie(CookieName)
	if err != nil || !s.Valid(c.Value) {
		return ""
	}
	return c.Value
}

// Valid reports whether id is a session that has not expired or been
// ended.
func (s *Sessions) Valid(id string) bool {
	if id == "" {
		return false
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.sessions[digest(id)]
	return ok && now.Before(exp)
}

// EndAll ends every session and forgets every unredeemed link; it returns
// how many sessions were live.
func (s *Sessions) EndAll() int {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	prune(s.sessions, now)
	n := len(s.sessions)
	clear(s.sessions)
	clear(s.codes)
	clear(s.keys)
	return n
}

// SignIn serves GET /console?code=...: a valid code sets the session
// cookie (HttpOnly, SameSite=Strict, Secure over TLS) and redirects to the
// console; any other code gets 403 and the way to a new link.
func (s *Sessions) SignIn() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		id, key, exp, ok := s.redeem(r.URL.Query().Get("code"))
		if !ok {
			s.log.Warn("console sign-in with an invalid, expired or used link", "remote", r.RemoteAddr)
			h.Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "This sign-in link is invalid, expired or already used.\nRun `agentctl console` on the box for a new one (it works once, within %v).\n", s.cfg.LinkTTL)
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name:     CookieName,
			Value:    id,
			Path:     "/",
			Expires:  exp,
			MaxAge:   int(s.cfg.SessionTTL / time.Second),
			HttpOnly: true,
			Secure:   r.TLS != nil,
			SameSite: http.SameSiteStrictMode,
		})
		s.log.Info("console signed in", "remote", r.RemoteAddr, "until", exp)
		http.Redirect(w, r, "/#key="+key, http.StatusSeeOther)
	})
}

// random is 32 random bytes, base64url.
func random() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func digest(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// prune drops expired entries.
func prune(m map[[32]byte]time.Time, now time.Time) {
	for k, exp := range m {
		if !now.Before(exp) {
			delete(m, k)
		}
	}
}

// put adds k, first dropping the entries that expire soonest while the
// map holds limit.
func put(m map[[32]byte]time.Time, k [32]byte, exp time.Time, limit int) {
	for len(m) >= limit {
		var first [32]byte
		var at time.Time
		for k2, e := range m {
			if at.IsZero() || e.Before(at) {
				first, at = k2, e
			}
		}
		delete(m, first)
	}
	m[k] = exp
}
