package voice

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// dialFrom opens a voice connection from the loopback address src: on
// Linux all of 127/8 is local, so each address is another client.
func dialFrom(t *testing.T, hs *httptest.Server, src string) (*client, *http.Response, error) {
	t.Helper()
	nd := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	d := websocket.Dialer{NetDialContext: nd.DialContext, HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.Dial(wsURL(hs), nil)
	if err != nil {
		if resp == nil {
			if _, lerr := net.Listen("tcp", src+":0"); lerr != nil {
				t.Skipf("cannot use %s (needs the whole 127/8 on loopback): %v", src, lerr)
			}
		}
		return nil, resp, err
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}, resp, nil
}

func mustDialFrom(t *testing.T, hs *httptest.Server, src string) *client {
	t.Helper()
	c, resp, err := dialFrom(t, hs, src)
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dial from %s: %v (HTTP %d)", src, err, code)
	}
	return c
}

// The attack of the issue: 16 sockets that never say hello locked every
// voice client out. Now they hold pre-hello slots of their own address
// only; a device from another address, and one from the same address (a
// tunnel makes every client one address), still gets in. The hello
// timeout is long here: it is not what lets them in.
func TestIdleSocketsDoNotLockOutDevices(t *testing.T) {
	cfg := fakeConfig(nil, &fakeConv{})
	cfg.Limits.HelloTimeout = time.Hour
	s, hs := newServer(t, cfg)
	var idle []*client
	for range 16 {
		idle = append(idle, mustDialFrom(t, hs, "127.0.0.2"))
	}
	if st := s.Stats(); st.Pending != 8 || st.Evicted != 8 {
		t.Fatalf("after 16 idle sockets from one address: %+v; want 8 pending (the per-address cap), 8 evicted", st)
	}
	// The oldest were closed with "try again later".
	if code := idle[0].closed(); code != websocket.CloseTryAgainLater {
		t.Errorf("evicted idle socket closed with %d; want %d", code, websocket.CloseTryAgainLater)
	}
	other := mustDialFrom(t, hs, "127.0.0.3")
	other.ready(map[string]any{"device": "kitchen"})
	same := mustDialFrom(t, hs, "127.0.0.2")
	same.ready(map[string]any{"device": "hall"})
	for _, c := range []*client{other, same} { // both work
		c.send(map[string]string{"type": "text", "text": "hi"})
		if _, final := c.replies(); final != "you said: hi" {
			t.Fatalf("reply %q", final)
		}
	}
	s.mu.Lock()
	devices := len(s.authed)
	s.mu.Unlock()
	if st := s.Stats(); st.Pending != 7 || devices != 2 { // (evicted sockets may still be closing: Connections is not exact)
		t.Errorf("stats %+v, %d devices; want 7 pending and 2 devices", st, devices)
	}
}

// Pre-hello connections from many addresses fill only the pre-hello
// slots: connected devices keep working, new devices still get in, and the
// device cap counts devices only.
func TestPendingDoNotCountAgainstDevices(t *testing.T) {
	cfg := fakeConfig(nil, &fakeConv{})
	cfg.Limits.HelloTimeout = time.Hour
	cfg.Limits.MaxConns = 2
	cfg.Limits.MaxPending = 4
	cfg.Limits.MaxPendingPerClient = 2
	s, hs := newServer(t, cfg)
	first := mustDialFrom(t, hs, "127.0.0.1")
	first.ready(map[string]any{"device": "first"})
	for i := range 6 { // three addresses, two each: over the global pre-hello cap
		mustDialFrom(t, hs, "127.0.0."+string(rune('4'+i%3)))
	}
	if st := s.Stats(); st.Pending != 4 || st.Evicted != 2 {
		t.Fatalf("stats %+v; want 4 pending (the cap), 2 evicted", st)
	}
	first.send(map[string]string{"type": "text", "text": "still here"})
	if _, final := first.replies(); final != "you said: still here" {
		t.Fatalf("connected device: reply %q", final)
	}
	second := mustDialFrom(t, hs, "127.0.0.1")
	second.ready(map[string]any{"device": "second"})
	// Two devices: the cap. A third is refused before the upgrade, however
	// few pre-hello slots are taken.
	if _, resp, err := dialFrom(t, hs, "127.0.0.8"); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third device: %v; want 503", err)
	}
}

// Two connections pass the door while one device slot is free; the second
// to say hello is told busy and closed with "try again later".
func TestHelloWhenDevicesAreFull(t *testing.T) {
	cfg := fakeConfig(nil, &fakeConv{})
	cfg.Limits.MaxConns = 1
	s, hs := newServer(t, cfg)
	a := dial(t, hs)
	b := dial(t, hs)
	a.ready(map[string]any{"device": "a"})
	if f := b.hello(map[string]any{"device": "b"}); f.Type != "error" || f.Code != CodeBusy || !f.Fatal {
		t.Fatalf("second hello answered %+v; want a fatal busy error", f)
	}
	if code := b.closed(); code != websocket.CloseTryAgainLater {
		t.Errorf("close code %d; want %d", code, websocket.CloseTryAgainLater)
	}
	// The device slot is still a's, and it is freed when a leaves.
	a.ws.Close()
	waitIdle(t, s)
	c := dial(t, hs)
	c.ready(map[string]any{"device": "c"})
}

// A socket that never says hello is closed after HelloTimeout and frees
// its slot.
func TestHelloTimeoutFreesTheSlot(t *testing.T) {
	cfg := fakeConfig(nil, nil)
	cfg.Limits.HelloTimeout = 50 * time.Millisecond
	s, hs := newServer(t, cfg)
	dial(t, hs).closed() // fails if the socket is still open after a while
	waitIdle(t, s)
	if st := s.Stats(); st.Pending != 0 || st.Connections != 0 {
		t.Fatalf("stats %+v after the hello timeout; want nothing left", st)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pendingPer) != 0 || len(s.authed) != 0 {
		t.Fatalf("books not balanced: pendingPer %v authed %d", s.pendingPer, len(s.authed))
	}
}

// Close during pre-hello connections: they end, nothing is left behind.
func TestCloseWithPendingConnections(t *testing.T) {
	cfg := fakeConfig(nil, nil)
	cfg.Limits.HelloTimeout = time.Hour
	s, hs := newServer(t, cfg)
	for range 5 {
		dial(t, hs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Pending != 0 || st.Connections != 0 {
		t.Fatalf("stats %+v after Close", st)
	}
}

// When all pre-hello slots are taken, room is made at the address holding
// the most: a device that connected first, from an address of its own,
// keeps its slot and finishes its hello.
func TestFullPendingTakesFromTheHeaviestAddress(t *testing.T) {
	cfg := fakeConfig(nil, &fakeConv{})
	cfg.Limits.HelloTimeout = time.Hour
	cfg.Limits.MaxPending = 4
	cfg.Limits.MaxPendingPerClient = 4
	s, hs := newServer(t, cfg)
	device := mustDialFrom(t, hs, "127.0.0.1") // connected, hello not sent yet
	var idle []*client
	for range 6 {
		idle = append(idle, mustDialFrom(t, hs, "127.0.0.2"))
	}
	if st := s.Stats(); st.Pending != 4 || st.Evicted != 3 {
		t.Fatalf("stats %+v; want 4 pending, 3 evicted", st)
	}
	if code := idle[0].closed(); code != websocket.CloseTryAgainLater {
		t.Errorf("the heavy address's oldest socket closed with %d; want %d", code, websocket.CloseTryAgainLater)
	}
	device.ready(map[string]any{"device": "early"})
}
