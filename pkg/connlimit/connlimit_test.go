package connlimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

// pipeConn is one end of a net.Pipe that says it comes from remote.
type pipeConn struct {
	net.Conn
	remote net.Addr
}

func (p pipeConn) RemoteAddr() net.Addr { return p.remote }

// rig drives a Listener without sockets: arrive hands it a connection the
// way Accept does.
type rig struct {
	t *testing.T
	l *Listener
}

func newRig(t *testing.T, cfg Config) *rig {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // only to have a net.Listener; never accepted from
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &rig{t: t, l: Wrap(ln, cfg)}
}

// peer is the client side of a connection that arrived.
type peer struct {
	net.Conn
	c *Conn // nil: refused
}

// closed reports whether the server side was closed (a read sees EOF).
func (p peer) closed() bool {
	p.Conn.SetReadDeadline(time.Now().Add(5 * time.Second)) // a hang guard, not a timing assertion
	_, err := p.Conn.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
}

func (r *rig) arrive(remote string) peer {
	r.t.Helper()
	server, client := net.Pipe()
	r.t.Cleanup(func() { client.Close(); server.Close() })
	return peer{Conn: client, c: r.l.take(pipeConn{Conn: server, remote: fakeAddr(remote)})}
}

func (r *rig) state(p peer, st http.ConnState) { r.l.ConnState(p.c, st) }

func (r *rig) want(open, reserved int, evicted, refused uint64) {
	r.t.Helper()
	got := r.l.Stats()
	if got.Open != open || got.Reserved != reserved || got.Evicted != evicted || got.Refused != refused {
		r.t.Fatalf("stats %+v; want open %d reserved %d evicted %d refused %d", got, open, reserved, evicted, refused)
	}
}

func TestGlobalCapEvictsTheStalest(t *testing.T) {
	r := newRig(t, Config{Max: 3})
	a := r.arrive("10.0.0.1:1")
	b := r.arrive("10.0.0.2:1")
	c := r.arrive("10.0.0.3:1")
	r.state(a, http.StateActive)
	r.state(b, http.StateActive)
	r.state(c, http.StateActive) // c's request started last; a's first
	r.want(3, 0, 0, 0)
	d := r.arrive("10.0.0.4:1")
	if d.c == nil {
		t.Fatal("newcomer refused; want the stalest connection evicted")
	}
	if !a.closed() {
		t.Fatal("the connection whose request started first was not closed")
	}
	r.want(3, 0, 1, 0)
	// A connection that went idle is evicted before older requests in flight.
	r.state(c, http.StateIdle)
	e := r.arrive("10.0.0.5:1")
	if e.c == nil || !c.closed() {
		t.Fatal("the idle keep-alive connection was not the one evicted")
	}
	// A keep-alive connection that starts a new request becomes the youngest.
	r.state(b, http.StateIdle)
	r.state(b, http.StateActive)
	r.arrive("10.0.0.6:1")
	if !d.closed() {
		t.Fatal("want d (accepted before b's second request started) evicted")
	}
	r.want(3, 0, 3, 0)
}

// A full listener takes room from the client holding the most connections,
// not from a light client whose request is older.
func TestGlobalCapTakesFromTheHeaviestClient(t *testing.T) {
	r := newRig(t, Config{Max: 5})
	light := r.arrive("198.51.100.7:1")
	r.state(light, http.StateActive) // the stalest request of all
	var heavy []peer
	for i := range 4 {
		heavy = append(heavy, r.arrive(fmt.Sprintf("203.0.113.1:%d", i)))
		r.state(heavy[i], http.StateActive)
	}
	newcomer := r.arrive("192.0.2.50:1")
	if newcomer.c == nil || !heavy[0].closed() {
		t.Fatal("want the heavy client's stalest connection evicted")
	}
	light.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := light.Read(make([]byte, 1)); !isTimeout(err) {
		t.Fatalf("the light client's connection was closed: %v", err)
	}
	// Between equally heavy clients the one holding the stalest loses.
	r2 := newRig(t, Config{Max: 4})
	a1, b1 := r2.arrive("10.0.0.1:1"), r2.arrive("10.0.0.2:1")
	a2, b2 := r2.arrive("10.0.0.1:2"), r2.arrive("10.0.0.2:2")
	for _, p := range []peer{b1, a1, a2, b2} { // b's first request started before a's
		r2.state(p, http.StateActive)
	}
	r2.arrive("10.0.0.3:1")
	if !b1.closed() {
		t.Fatal("want b's stalest connection evicted (b and a hold two each; b's request started first)")
	}
}

// serve runs a request through Guard on p's connection; the handler reads
// the body to its end.
func (r *rig) serve(p peer, method, body string) {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, "/x", rd)
	req = req.WithContext(r.l.ConnContext(req.Context(), p.c))
	r.l.Guard(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { io.ReadAll(req.Body) })).ServeHTTP(httptest.NewRecorder(), req)
}

// A request that arrived whole (body read to its end, or none) is the
// server's to finish: a newcomer evicts one still waiting on its client,
// never it; with nothing else to evict the newcomer is refused.
func TestRequestsThatArrivedWholeAreNotEvicted(t *testing.T) {
	r := newRig(t, Config{Max: 3})
	whole := r.arrive("10.0.0.1:1")
	r.state(whole, http.StateActive)
	r.serve(whole, "POST", "<xml>callback</xml>")
	get := r.arrive("10.0.0.2:1")
	r.state(get, http.StateActive)
	r.serve(get, "GET", "")
	trickle := r.arrive("10.0.0.3:1") // headers only: its body never ends
	r.state(trickle, http.StateActive)
	r.arrive("10.0.0.4:1")
	if !trickle.closed() {
		t.Fatal("the connection still waiting for its body was not the one evicted")
	}
	r.want(3, 0, 1, 0)
	fresh := r.arrive("10.0.0.5:1") // evicts 10.0.0.4 (no request yet)
	r.state(fresh, http.StateActive)
	r.serve(fresh, "GET", "")
	if late := r.arrive("10.0.0.6:1"); late.c != nil {
		t.Fatal("want the newcomer refused: every connection is being served")
	}
	r.want(3, 0, 2, 1)
	// Once answered (idle again) it may go.
	r.state(whole, http.StateIdle)
	if again := r.arrive("10.0.0.7:1"); again.c == nil || !whole.closed() {
		t.Fatal("the idle connection was not evicted for the newcomer")
	}
}

// Loopback has a cap of its own: a tunnel or a local proxy puts many
// clients behind 127.0.0.1.
func TestLoopbackCap(t *testing.T) {
	r := newRig(t, Config{Max: 20, PerClient: 2, PerLoopback: 5})
	for i := range 5 {
		if p := r.arrive(fmt.Sprintf("127.0.0.1:%d", i)); p.c == nil {
			t.Fatal("refused under the loopback cap")
		}
	}
	r.arrive("[::1]:1")
	r.arrive("10.0.0.1:1")
	r.arrive("10.0.0.1:2")
	r.want(8, 0, 0, 0)
	r.arrive("127.0.0.1:9") // over 5: evicts loopback's own
	r.arrive("10.0.0.1:3")  // over 2: evicts its own
	r.want(8, 0, 2, 0)
	if got := newRig(t, Config{Max: 10, Reserve: 2, PerLoopback: 50}).l.Limits().PerLoopback; got != 8 {
		t.Errorf("PerLoopback above Max-Reserve: %d; want 8", got)
	}
}

// A busy client with more fresh requests than any flooding address holds
// old ones is not where the room is taken: the flood's stalest goes.
func TestGlobalCapSparesABusyClientsFreshRequests(t *testing.T) {
	r := newRig(t, Config{Max: 7})
	var flood []peer
	for i := range 4 { // two flooding addresses, two slow requests each, old
		flood = append(flood, r.arrive(fmt.Sprintf("10.9.0.%d:%d", 1+i%2, i)))
		r.state(flood[i], http.StateActive)
	}
	var busy []peer
	for i := range 3 { // then three fresh callbacks from one busy address
		busy = append(busy, r.arrive(fmt.Sprintf("127.0.0.1:%d", i)))
	}
	r.arrive("192.0.2.1:1")
	if !flood[0].closed() {
		t.Fatal("want the flood's stalest connection evicted, not the busy client's fresh one")
	}
	for i, p := range busy {
		p.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := p.Read(make([]byte, 1)); !isTimeout(err) {
			t.Fatalf("busy client's connection %d was closed: %v", i, err)
		}
	}
}

func TestHijackedAreNeverEvictedReserveServesHealth(t *testing.T) {
	r := newRig(t, Config{Max: 3, Reserve: 1})
	if got := r.l.Limits(); got.PerClient != 2 {
		t.Fatalf("per-client default %d; want Max-Reserve = 2", got.PerClient)
	}
	a := r.arrive("10.0.0.1:1")
	b := r.arrive("10.0.0.2:1")
	r.state(a, http.StateHijacked)
	r.state(b, http.StateHijacked)
	// Nothing to evict: the newcomer gets the reserved slot.
	c := r.arrive("10.0.0.3:1")
	if c.c == nil || !c.c.Reserved() {
		t.Fatalf("want a reserved slot, got %+v", c.c)
	}
	r.want(3, 1, 0, 0)
	// The reserve rotates like the rest: a newer one takes its place.
	d := r.arrive("10.0.0.4:1")
	if d.c == nil || !d.c.Reserved() || !c.closed() {
		t.Fatal("the reserved slot did not go to the newcomer")
	}
	r.want(3, 1, 1, 0)
	// With the reserve hijacked as well, newcomers are refused and closed.
	r.state(d, http.StateHijacked)
	e := r.arrive("10.0.0.5:1")
	if e.c != nil || !e.closed() {
		t.Fatal("want the newcomer refused and closed")
	}
	r.want(3, 1, 1, 1)
	// Closing a hijacked connection frees its slot for an ordinary one.
	a.c.Close()
	if f := r.arrive("10.0.0.6:1"); f.c == nil || f.c.Reserved() {
		t.Fatal("a freed slot was not reused")
	}
}

func TestPerClientCapEvictsOnlyTheClientsOwn(t *testing.T) {
	r := newRig(t, Config{Max: 10, PerClient: 2})
	other := r.arrive("192.0.2.9:5")
	r.state(other, http.StateActive) // the oldest request of all
	x1 := r.arrive("192.0.2.1:1")
	x2 := r.arrive("192.0.2.1:2")
	r.state(x1, http.StateActive)
	r.state(x2, http.StateActive)
	x3 := r.arrive("192.0.2.1:3")
	if x3.c == nil || !x1.closed() {
		t.Fatal("the client's own stalest connection was not evicted")
	}
	r.want(3, 0, 1, 0)
	// The other client's older connection was not touched.
	other.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := other.Read(make([]byte, 1)); !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Fatalf("another client's connection was closed: %v", err)
	}
	// A client whose connections are all hijacked is refused (no reserve).
	r.state(x2, http.StateHijacked)
	r.state(x3, http.StateHijacked)
	if x4 := r.arrive("192.0.2.1:4"); x4.c != nil {
		t.Fatal("want refused: every connection of the client is hijacked and there is no reserve")
	}
	// IPv6 peers of one /64 count as one client.
	r2 := newRig(t, Config{Max: 10, PerClient: 1})
	v1 := r2.arrive("[2001:db8:1:2::1]:1")
	r2.arrive("[2001:db8:1:2:ffff::9]:1")
	if !v1.closed() {
		t.Fatal("two addresses of one /64 were counted as two clients")
	}
	r2.arrive("[2001:db8:1:3::1]:1")
	r2.want(2, 0, 1, 0)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestCloseReleasesOnceAndLeavesNothing(t *testing.T) {
	r := newRig(t, Config{Max: 4, Reserve: 1, PerClient: 2})
	var peers []peer
	for i := range 8 {
		peers = append(peers, r.arrive("10.0.0."+string(rune('1'+i%3))+":1"))
	}
	for _, p := range peers {
		if p.c != nil {
			p.c.Close()
			p.c.Close() // twice: counted once
		}
	}
	r.want(0, 0, r.l.Stats().Evicted, 0)
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if len(r.l.conns) != 0 || len(r.l.perClient) != 0 || r.l.normal != 0 || r.l.reserved != 0 {
		t.Fatalf("left behind: conns %d perClient %v normal %d reserved %d", len(r.l.conns), r.l.perClient, r.l.normal, r.l.reserved)
	}
}

// Many goroutines arriving, changing state and closing at once (run with
// -race): the books balance at the end.
func TestConcurrentChurn(t *testing.T) {
	r := newRig(t, Config{Max: 16, Reserve: 2, PerClient: 4})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				server, client := net.Pipe()
				c := r.l.take(pipeConn{Conn: server, remote: fakeAddr("10.1.0." + string(rune('0'+g%4)) + ":1")})
				if c != nil {
					r.l.ConnState(c, []http.ConnState{http.StateActive, http.StateIdle, http.StateHijacked}[i%3])
					if i%2 == 0 {
						c.Close()
					}
				}
				client.Close()
			}
		}()
	}
	wg.Wait()
	st := r.l.Stats()
	if st.Open > 16 || st.Reserved > 2 {
		t.Fatalf("over the caps: %+v", st)
	}
	r.l.mu.Lock()
	var open []*Conn
	for c := range r.l.conns {
		open = append(open, c)
	}
	r.l.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
	r.want(0, 0, r.l.Stats().Evicted, r.l.Stats().Refused)
	if st.Accepted+st.Refused != 1600 {
		t.Fatalf("accepted %d + refused %d != 1600 arrivals", st.Accepted, st.Refused)
	}
}

func TestGuard(t *testing.T) {
	r := newRig(t, Config{Max: 2, Reserve: 1})
	a := r.arrive("10.0.0.1:1")
	r.state(a, http.StateHijacked)
	res := r.arrive("10.0.0.2:1")
	if res.c == nil || !res.c.Reserved() {
		t.Fatal("want a reserved slot")
	}
	h := r.l.Guard(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { io.WriteString(w, "served") }), "/healthz", "/livez")
	call := func(c *Conn, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req = req.WithContext(r.l.ConnContext(req.Context(), c))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := call(res.c, "/healthz"); w.Code != 200 || w.Body.String() != "served" || w.Header().Get("Connection") != "close" {
		t.Errorf("reserved /healthz: %d %q Connection=%q", w.Code, w.Body, w.Header().Get("Connection"))
	}
	if w := call(res.c, "/wecom/callback"); w.Code != http.StatusServiceUnavailable || w.Header().Get("Connection") != "close" || w.Header().Get("Retry-After") == "" {
		t.Errorf("reserved other path: %d headers %v", w.Code, w.Header())
	}
	if w := call(a.c, "/wecom/callback"); w.Code != 200 || w.Header().Get("Connection") != "" {
		t.Errorf("ordinary connection: %d headers %v", w.Code, w.Header())
	}
	if w := call(nil, "/wecom/callback"); w.Code != 200 {
		t.Errorf("request without a limited connection: %d", w.Code)
	}
}

func TestWarningIsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	r := newRig(t, Config{Max: 1, Logger: slog.New(slog.NewTextHandler(&buf, nil)), LogEvery: time.Minute, Now: func() time.Time { return now }})
	for range 5 {
		r.arrive("10.0.0.1:1")
	}
	if n := strings.Count(buf.String(), "connection limit reached"); n != 1 {
		t.Fatalf("%d warnings within a minute; want 1:\n%s", n, buf.String())
	}
	now = now.Add(time.Minute)
	r.arrive("10.0.0.1:1")
	if n := strings.Count(buf.String(), "connection limit reached"); n != 2 {
		t.Fatalf("%d warnings after a minute; want 2", n)
	}
	if !strings.Contains(buf.String(), "evicted_total=5") {
		t.Errorf("warning lacks the eviction count:\n%s", buf.String())
	}
}

func TestClient(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:8080":            "192.0.2.1",
		"[::ffff:192.0.2.1]:1":      "192.0.2.1",
		"[2001:db8:a:b:c:d:e:f]:1":  "2001:db8:a:b::/64",
		"[::1]:5":                   "::1",
		"@":                         "@",
		"":                          "",
		"[fe80::1%eth0]:1":          "fe80::1%eth0",
		"not-an-ip.example:443":     "not-an-ip.example",
		"127.0.0.1:1":               "127.0.0.1",
		"[2001:db8:a:b::1]:65535":   "2001:db8:a:b::/64",
		"[2001:db8:a:c::1]:1":       "2001:db8:a:c::/64",
		"192.0.2.1":                 "192.0.2.1",
		"[2001:db8::1]":             "[2001:db8::1]",
		"2001:db8::1":               "2001:db8::1",
		"[2001:db8:a:b::1%zone]:80": "2001:db8:a:b::1%zone",
	} {
		if got := Client(in); got != want {
			t.Errorf("Client(%q) = %q; want %q", in, got, want)
		}
	}
}

func FuzzClient(f *testing.F) {
	for _, s := range []string{"192.0.2.1:1", "[::1]:1", "@", "[", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		Client(s) // no panic
	})
}
