package voice

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// fakeSessions is a Config.Sessions: cookie "console=ID" names session ID.
type fakeSessions struct {
	mu    sync.Mutex
	valid map[string]bool
}

func newFakeSessions(ids ...string) *fakeSessions {
	f := &fakeSessions{valid: map[string]bool{}}
	for _, id := range ids {
		f.valid[id] = true
	}
	return f
}

func (f *fakeSessions) Session(r *http.Request) string {
	c, err := r.Cookie("console")
	if err != nil || !f.Valid(c.Value) {
		return ""
	}
	return c.Value
}

func (f *fakeSessions) Valid(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.valid[id]
}

// Verify accepts the key "key-ID" for session ID.
func (f *fakeSessions) Verify(id, key string) bool { return f.Valid(id) && key == "key-"+id }

func (f *fakeSessions) end(id string) {
	f.mu.Lock()
	delete(f.valid, id)
	f.mu.Unlock()
}

// dialWith dials with extra request headers (a cookie).
func dialWith(t testing.TB, url string, h http.Header) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(url, h)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

func cookie(v string) http.Header { return http.Header{"Cookie": {"console=" + v}} }

// TestEmptyTokenAdmitsNobody: without voice.token no hello is accepted,
// whatever it carries: an empty token is not "the operator".
func TestEmptyTokenAdmitsNobody(t *testing.T) {
	conv := &fakeConv{}
	cfg := fakeConfig(nil, conv)
	cfg.Token = func() string { return "" }
	cfg.Sessions = newFakeSessions("s1")
	_, hs := newServer(t, cfg)
	for _, tok := range []any{nil, "", "guess"} {
		c := dial(t, hs)
		f := c.hello(map[string]any{"token": tok, "user": "operator"})
		if f.Type != "error" || f.Code != CodeUnauthorized || !f.Fatal || !strings.Contains(f.Message, "agentctl console") {
			t.Errorf("token %v: %+v; want a fatal unauthorized that names agentctl console", tok, f)
		}
		if code := c.closed(); code != websocket.ClosePolicyViolation {
			t.Errorf("token %v: close code %d", tok, code)
		}
	}
	// A cookie that is not a valid session is no better.
	if f := dialWith(t, wsURL(hs), cookie("forged")).hello(map[string]any{"token": ""}); f.Code != CodeUnauthorized {
		t.Errorf("forged session cookie: %+v; want unauthorized", f)
	}
	if n := conv.numTurns(); n != 0 {
		t.Errorf("%d turns ran", n)
	}
}

// TestConsoleSessionIsOperator: a valid session on the upgrade request
// needs no token, speaks as the operator identity whatever the hello names,
// and is not put to the DM policy, at the hello or its turns.
func TestConsoleSessionIsOperator(t *testing.T) {
	conv := &fakeConv{}
	adm := &admitter{a: Admission{}} // refuses everyone
	cfg := fakeConfig(nil, conv)
	cfg.Token = func() string { return "secret" }
	cfg.Sessions = newFakeSessions("s1")
	cfg.Admit = adm.admit
	_, hs := newServer(t, cfg)
	c := dialWith(t, wsURL(hs), cookie("s1"))
	r := c.ready(map[string]any{"token": "", "user": "mallory", "device": "web-console", "console_key": "key-s1"})
	if r.Session != "p2p:admin:console" {
		t.Errorf("session %q; want p2p:admin:console (the operator)", r.Session)
	}
	c.send(map[string]string{"type": "text", "text": "hello"})
	if _, final := c.replies(); final != "you said: hello" {
		t.Errorf("final %q", final)
	}
	if in := conv.turns[0]; in.Channel != "admin" || in.Sender != "console" {
		t.Errorf("inbound %s:%s; want admin:console", in.Channel, in.Sender)
	}
	if len(adm.asked) != 0 {
		t.Errorf("the console session was put to the DM policy: %q", adm.asked)
	}
	// A stale token in the page does not matter either.
	dialWith(t, wsURL(hs), cookie("s1")).ready(map[string]any{"token": "old-token", "console_key": "key-s1"})
	// The cookie without its key (a page on another port of this host was
	// sent the cookie, not the key) is no operator: it needs the token.
	for _, key := range []any{nil, "", "key-s2", "wrong"} {
		f := dialWith(t, wsURL(hs), cookie("s1")).hello(map[string]any{"token": "", "console_key": key})
		if f.Type != "error" || f.Code != CodeUnauthorized {
			t.Errorf("cookie with console_key %v: %+v; want unauthorized", key, f)
		}
	}
	// With the token it is a device, put to the DM policy (which refuses
	// everyone here), never the operator.
	if f := dialWith(t, wsURL(hs), cookie("s1")).hello(map[string]any{"console_key": "wrong", "user": "bob"}); f.Session == "p2p:admin:console" || f.Code != CodeForbidden {
		t.Errorf("a cookie without its key, with the token: %+v; want the DM policy's refusal", f)
	}
}

// TestConsoleSessionEndsMidConnection: when the session ends (expiry,
// agentctl console -end), the connection's next turn is refused and the
// connection closes.
func TestConsoleSessionEndsMidConnection(t *testing.T) {
	conv := &fakeConv{}
	sessions := newFakeSessions("s1")
	cfg := fakeConfig(nil, conv)
	cfg.Sessions = sessions
	_, hs := newServer(t, cfg)
	c := dialWith(t, wsURL(hs), cookie("s1"))
	c.ready(map[string]any{"token": nil, "console_key": "key-s1"})
	sessions.end("s1")
	c.send(map[string]string{"type": "text", "text": "write SOUL.md"})
	if f := c.next(); f.Type != "error" || f.Code != CodeUnauthorized || !f.Fatal {
		t.Fatalf("turn after the session ended: %+v; want a fatal unauthorized", f)
	}
	if code := c.closed(); code != websocket.ClosePolicyViolation {
		t.Errorf("close code %d; want 1008", code)
	}
	if n := conv.numTurns(); n != 0 {
		t.Errorf("%d turns ran after the session ended", n)
	}
}

// TestEveryTurnIsAdmitted: the DM policy is asked before each turn (text
// and utterance), as it is now: a device refused since its hello (revoked,
// allow_from changed by a reload) gets no further turn.
func TestEveryTurnIsAdmitted(t *testing.T) {
	for _, kind := range []string{"text", "utterance"} {
		t.Run(kind, func(t *testing.T) {
			conv := &fakeConv{}
			adm := &admitter{a: Admission{Allowed: true}}
			cfg := fakeConfig(&fakeASR{text: "turn on the light"}, conv)
			cfg.Admit = adm.admit
			_, hs := newServer(t, cfg)
			c := dial(t, hs)
			c.ready(map[string]any{"device": "kitchen-panel", "user": nil})
			turn := func() {
				if kind == "text" {
					c.send(map[string]string{"type": "text", "text": "hi"})
					return
				}
				c.pcm(toPCM16(tone(500*time.Millisecond, 16000, 300, 0.3)), 640)
				c.end()
			}
			turn()
			if kind == "utterance" {
				c.expect("transcript")
			}
			c.replies()
			adm.mu.Lock()
			asked := len(adm.asked)
			adm.a = Admission{} // the policy changed: refused from now on
			adm.mu.Unlock()
			if asked != 2 {
				t.Errorf("Admit asked %d times for a hello and a turn; want 2", asked)
			}
			turn()
			if f := c.next(); f.Type != "error" || f.Code != CodeForbidden || !f.Fatal {
				t.Fatalf("turn after the policy changed: %+v; want a fatal forbidden", f)
			}
			if code := c.closed(); code != websocket.ClosePolicyViolation {
				t.Errorf("close code %d; want 1008", code)
			}
			if n := conv.numTurns(); n != 1 {
				t.Errorf("%d turns ran; want only the one before the change", n)
			}
			for _, p := range adm.asked {
				if strings.Join(p, ",") != "voice:kitchen-panel" {
					t.Errorf("Admit asked %q", p)
				}
			}
		})
	}
}

// TestTokenChangeClosesOldConnections: a device connected with the old
// voice.token gets no turn after the token changes.
func TestTokenChangeClosesOldConnections(t *testing.T) {
	var token atomic.Value
	token.Store("one")
	conv := &fakeConv{}
	cfg := fakeConfig(nil, conv)
	cfg.Token = func() string { return token.Load().(string) }
	_, hs := newServer(t, cfg)
	c := dial(t, hs)
	c.ready(map[string]any{"token": "one"})
	token.Store("two")
	c.send(map[string]string{"type": "text", "text": "hi"})
	if f := c.next(); f.Code != CodeUnauthorized || !f.Fatal {
		t.Fatalf("turn on the old token: %+v; want a fatal unauthorized", f)
	}
	if n := conv.numTurns(); n != 0 {
		t.Errorf("%d turns ran on the old token", n)
	}
}

// TestDeviceStillNeedsTokenWithSessions: configuring console sessions does
// not weaken the device path.
func TestDeviceStillNeedsTokenWithSessions(t *testing.T) {
	cfg := fakeConfig(nil, &fakeConv{})
	cfg.Sessions = newFakeSessions("s1")
	_, hs := newServer(t, cfg)
	if f := dial(t, hs).hello(map[string]any{"token": "guess"}); f.Code != CodeUnauthorized {
		t.Errorf("bad token without a session: %+v", f)
	}
	dial(t, hs).ready(map[string]any{"token": "secret"})
}

// A name with the channel's prefix ("voice:boss") would be checked as one
// principal (voice:voice:boss) and keyed as another (voice:boss: boss's
// folder, memory and session). Such names, control and invisible
// formatting characters, and spaces around a name ("boss\u00a0" reads as,
// and once was trimmed into, the owner boss) are refused at the hello.
func TestPrefixedNamesRefused(t *testing.T) {
	conv := &fakeConv{}
	_, hs := newServer(t, fakeConfig(nil, conv))
	for _, fields := range []map[string]any{
		{"user": "voice:boss"},
		{"user": nil, "device": "voice:boss"},
		{"device": "a:b"},
		{"user": "wecom:alice"},
		{"user": "bo\nss"},
		{"user": "boss\u00a0"},
		{"user": " boss"},
		{"user": "boss\u3000"},
		{"device": "bo\u200bss"},
		{"user": "\u202eboss"},
	} {
		c := dial(t, hs)
		if f := c.hello(fields); f.Type != "error" || f.Code != CodeBadHello || !f.Fatal {
			t.Errorf("hello %v: %+v; want a fatal bad_hello", fields, f)
		}
	}
	if n := conv.numTurns(); n != 0 {
		t.Errorf("%d turns ran", n)
	}
}
