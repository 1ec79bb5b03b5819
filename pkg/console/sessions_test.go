package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is an injectable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// signIn opens link on h and returns the response.
func signIn(t *testing.T, h http.Handler, link string) *httptest.ResponseRecorder {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", u.RequestURI(), nil))
	return rec
}

// sessionCookie is the cookie a successful sign-in set.
func sessionCookie(t *testing.T, rec *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	for _, c := range rec.Result().Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", CookieName, rec.Header())
	return nil
}

// withCookie is a request carrying c.
func withCookie(c *http.Cookie) *http.Request {
	r := httptest.NewRequest("GET", "/voice", nil)
	if c != nil {
		r.AddCookie(c)
	}
	return r
}

func TestSignInLinkIsSingleUse(t *testing.T) {
	clk := newClock()
	s := NewSessions(SessionConfig{Now: clk.now})
	link, err := s.NewLink("http://127.0.0.1:8080/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link.URL, "http://127.0.0.1:8080/console?code=") || !link.Expires.Equal(clk.now().Add(2*time.Minute)) {
		t.Fatalf("link %+v", link)
	}
	rec := signIn(t, s.SignIn(), link.URL)
	loc := rec.Header().Get("Location")
	key, ok := strings.CutPrefix(loc, "/#key=")
	if rec.Code != http.StatusSeeOther || !ok || len(key) < 40 {
		t.Fatalf("sign-in: %d %q; want 303 to /#key=KEY", rec.Code, loc)
	}
	c := sessionCookie(t, rec)
	// The cookie is the operator only with its key (a server on another
	// port of this host is sent the cookie, never the fragment).
	if !s.Verify(c.Value, key) || s.Verify(c.Value, "") || s.Verify(c.Value, key+"x") || s.Verify("forged", key) {
		t.Error("Verify accepts a session without its key, or a key without its session")
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge != int((12*time.Hour)/time.Second) {
		t.Errorf("cookie %+v; want HttpOnly, SameSite=Strict, Path=/, Max-Age 12h", c)
	}
	if id := s.Session(withCookie(c)); id == "" || id != c.Value {
		t.Errorf("Session(cookie) = %q", id)
	}
	// The same link again, a minute later: refused, no cookie.
	clk.advance(time.Minute)
	again := signIn(t, s.SignIn(), link.URL)
	if again.Code != http.StatusForbidden || len(again.Result().Cookies()) != 0 {
		t.Fatalf("second use: %d cookies %v; want 403 and none", again.Code, again.Result().Cookies())
	}
	if !strings.Contains(again.Body.String(), "agentctl console") {
		t.Errorf("refusal %q does not say how to get a new link", again.Body)
	}
}

func TestSignInLinkExpires(t *testing.T) {
	clk := newClock()
	s := NewSessions(SessionConfig{Now: clk.now})
	link, _ := s.NewLink("http://127.0.0.1:8080")
	clk.advance(2*time.Minute + time.Second)
	if rec := signIn(t, s.SignIn(), link.URL); rec.Code != http.StatusForbidden {
		t.Fatalf("expired link: %d; want 403", rec.Code)
	}
	// Just inside the window it works.
	link, _ = s.NewLink("http://127.0.0.1:8080")
	clk.advance(2*time.Minute - time.Second)
	if rec := signIn(t, s.SignIn(), link.URL); rec.Code != http.StatusSeeOther {
		t.Fatalf("link within 2 minutes: %d; want 303", rec.Code)
	}
}

func TestSessionCookieChecks(t *testing.T) {
	clk := newClock()
	s := NewSessions(SessionConfig{Now: clk.now, SessionTTL: time.Hour})
	link, _ := s.NewLink("http://127.0.0.1:8080")
	code, _ := url.Parse(link.URL)
	good := sessionCookie(t, signIn(t, s.SignIn(), link.URL))
	tests := []struct {
		name string
		c    *http.Cookie
	}{
		{"no cookie", nil},
		{"empty value", &http.Cookie{Name: CookieName, Value: ""}},
		{"forged value", &http.Cookie{Name: CookieName, Value: strings.Repeat("A", len(good.Value))}},
		{"right value, wrong cookie name", &http.Cookie{Name: "session", Value: good.Value}},
		{"the sign-in code as a session", &http.Cookie{Name: CookieName, Value: code.Query().Get("code")}},
	}
	for _, tt := range tests {
		if id := s.Session(withCookie(tt.c)); id != "" {
			t.Errorf("%s: accepted as session %q", tt.name, id)
		}
	}
	// A session is not a sign-in code either.
	if rec := signIn(t, s.SignIn(), "/console?code="+good.Value); rec.Code != http.StatusForbidden {
		t.Errorf("session id redeemed as a code: %d", rec.Code)
	}
	if s.Session(withCookie(good)) == "" {
		t.Fatal("the good cookie was refused")
	}
	// Expired: refused, on the request and by Valid (open connections).
	clk.advance(time.Hour)
	if s.Session(withCookie(good)) != "" || s.Valid(good.Value) {
		t.Error("an expired session is still accepted")
	}
}

func TestEndAll(t *testing.T) {
	s := NewSessions(SessionConfig{})
	a, _ := s.NewLink("http://127.0.0.1:8080")
	b, _ := s.NewLink("http://127.0.0.1:8080")
	c := sessionCookie(t, signIn(t, s.SignIn(), a.URL))
	if n := s.EndAll(); n != 1 {
		t.Errorf("EndAll = %d; want 1", n)
	}
	if s.Valid(c.Value) {
		t.Error("session valid after EndAll")
	}
	if rec := signIn(t, s.SignIn(), b.URL); rec.Code != http.StatusForbidden {
		t.Errorf("unredeemed link after EndAll: %d; want 403", rec.Code)
	}
}

func TestStoreIsBounded(t *testing.T) {
	clk := newClock()
	s := NewSessions(SessionConfig{Now: clk.now, MaxCodes: 3, MaxLive: 2})
	var links []Link
	for range 5 {
		l, _ := s.NewLink("http://127.0.0.1:8080")
		links = append(links, l)
		clk.advance(time.Second)
	}
	if len(s.codes) != 3 {
		t.Fatalf("%d codes kept; want 3", len(s.codes))
	}
	if rec := signIn(t, s.SignIn(), links[0].URL); rec.Code != http.StatusForbidden {
		t.Error("the oldest link survived the bound")
	}
	var cookies []*http.Cookie
	for _, l := range links[2:] {
		cookies = append(cookies, sessionCookie(t, signIn(t, s.SignIn(), l.URL)))
		clk.advance(time.Second)
	}
	if s.Valid(cookies[0].Value) || !s.Valid(cookies[1].Value) || !s.Valid(cookies[2].Value) {
		t.Error("the session bound did not drop the oldest session")
	}
}
