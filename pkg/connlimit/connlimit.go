// Package connlimit bounds the connections a listener hands to a server:
// a global cap of which a reserve is kept for health probes, and a cap per
// client address.
//
// A full pool does not turn the newcomer away: it makes room by closing a
// connection that waits on its client — an idle keep-alive first;
// otherwise, when the client is at its own cap, that client's stalest (the
// one whose request, or before a first request whose connection, started
// earliest); when the whole listener is full, the stalest among the
// clients holding at least half as many such connections as the one
// holding the most. A connection whose request has arrived
// whole (its body read to the end: the server is working on it) and a
// hijacked one (a WebSocket) are never closed here. So slow headers and
// trickled bodies compete with each other, a flood from many addresses
// takes its room from the heaviest of them, and a request that was sent
// whole is answered.
//
// Only when nothing can be closed does a newcomer get a reserved slot, on
// which Guard serves the health paths and answers everything else 503; when
// the reserve is full too the connection is closed at once.
//
// The order of eviction is the order of events, not of clock readings:
// tests need no timing. The clock only paces the warning log.
package connlimit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config sizes a Listener.
type Config struct {
	// Max is the most connections open at once, reserved ones included
	// (at least 1).
	Max int
	// Reserve is the part of Max kept for connections that arrive when
	// nothing can be evicted; Guard lets them reach the health paths only.
	// It is cut to Max-1.
	Reserve int
	// PerClient is the most (unreserved) connections of one client address
	// (Client); 0 or more than Max-Reserve: Max-Reserve.
	PerClient int
	// PerLoopback replaces PerClient for a loopback address, behind which
	// a TCP tunnel or a local reverse proxy puts many clients; 0: PerClient.
	PerLoopback int
	// Now is the clock of the warning log; default time.Now.
	Now func() time.Time
	// Logger gets at most one warning per LogEvery while connections are
	// evicted or refused; nil: none.
	Logger   *slog.Logger
	LogEvery time.Duration // default 1 minute
}

// Stats counts what a Listener did.
type Stats struct {
	Open     int    // connections open now, reserved ones included
	Reserved int    // of Open, on reserved slots
	Accepted uint64 // connections handed to the server since the start
	Evicted  uint64 // connections closed to make room for a newer one
	Refused  uint64 // connections closed on arrival (nothing to evict, reserve full)
}

type phase uint8

const (
	phaseNew        phase = iota // accepted, no request read yet
	phaseReading                 // headers read, the body still arriving
	phaseServing                 // the request arrived whole: never evicted
	phaseResponding              // the response is being written: evicted last
	phaseIdle                    // between requests (keep-alive)
	phaseHijacked                // taken over by a protocol upgrade: never evicted
)

// Listener wraps a net.Listener; see the package comment. Pass its
// ConnState and ConnContext to the http.Server, and wrap the handler
// with Guard.
type Listener struct {
	net.Listener
	cfg  Config
	soft int // Max - Reserve: the pool of ordinary connections

	mu        sync.Mutex
	conns     map[*Conn]struct{}
	perClient map[string]int
	normal    int
	reserved  int
	seq       uint64
	lastLog   time.Time
	evicted   uint64
	refused   uint64

	accepted atomic.Uint64
}

// Wrap returns ln bounded by cfg.
func Wrap(ln net.Listener, cfg Config) *Listener {
	cfg.Max = max(cfg.Max, 1)
	cfg.Reserve = min(max(cfg.Reserve, 0), cfg.Max-1)
	soft := cfg.Max - cfg.Reserve
	if cfg.PerClient <= 0 || cfg.PerClient > soft {
		cfg.PerClient = soft
	}
	if cfg.PerLoopback <= 0 {
		cfg.PerLoopback = cfg.PerClient
	}
	cfg.PerLoopback = min(cfg.PerLoopback, soft)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LogEvery <= 0 {
		cfg.LogEvery = time.Minute
	}
	return &Listener{Listener: ln, cfg: cfg, soft: soft, conns: map[*Conn]struct{}{}, perClient: map[string]int{}}
}

// Limits returns the effective configuration (after Wrap's adjustments).
func (l *Listener) Limits() Config { return l.cfg }

// Accept returns the next connection that fits, closing what it evicts and
// what it refuses.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c := l.take(nc); c != nil {
			return c, nil
		}
	}
}

// take admits nc, closing the connections evicted for it, or closes nc
// when it is refused (nil).
func (l *Listener) take(nc net.Conn) *Conn {
	c, victims := l.admit(nc)
	for _, v := range victims {
		v.closeConn()
	}
	if c == nil {
		nc.Close()
		return nil
	}
	l.accepted.Add(1)
	return c
}

// admit places nc in a pool, choosing the connections to evict for it; nil
// when it is refused.
func (l *Listener) admit(nc net.Conn) (*Conn, []*Conn) {
	client := Client(addrString(nc.RemoteAddr()))
	c := &Conn{Conn: nc, l: l, client: client}
	capacity := l.cfg.PerClient
	if ip := net.ParseIP(client); ip != nil && ip.IsLoopback() {
		capacity = l.cfg.PerLoopback
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var victims []*Conn
	evict := func(pred func(*Conn) bool) bool {
		v := l.stalest(pred)
		if v == nil {
			return false
		}
		l.remove(v)
		l.evicted++
		victims = append(victims, v)
		return true
	}
	fits := l.perClient[client] < capacity ||
		evict(func(o *Conn) bool { return !o.reserved && o.client == client })
	fits = fits && (l.normal < l.soft || evict(l.heavy()))
	if !fits && l.cfg.Reserve > 0 {
		if l.reserved < l.cfg.Reserve || evict(func(o *Conn) bool { return o.reserved }) {
			c.reserved = true
			fits = true
		}
	}
	if len(victims) > 0 || !fits {
		if !fits {
			l.refused++
		}
		l.warnLocked()
	}
	if !fits {
		return nil, victims
	}
	l.seq++
	c.seq, c.open = l.seq, true
	l.conns[c] = struct{}{}
	if c.reserved {
		l.reserved++
	} else {
		l.normal++
		l.perClient[client]++
	}
	return c, victims
}

// heavy chooses where the global pool makes room: among the clients
// holding at least half as many evictable connections as the heaviest one
// (stalest then picks an idle one, else the one waiting longest). So a
// flood from some addresses takes its room from itself — its connections
// are the old ones — not from a client with a request or two in flight,
// nor from a busy client's fresh requests.
func (l *Listener) heavy() func(*Conn) bool {
	count := map[string]int{}
	top := 0
	for c := range l.conns {
		if c.reserved || !c.evictable() {
			continue
		}
		count[c.client]++
		top = max(top, count[c.client])
	}
	floor := max(1, (top+1)/2)
	return func(o *Conn) bool { return !o.reserved && count[o.client] >= floor }
}

// stalest returns the connection to evict among those pred accepts: an
// idle one first, then the one whose current request started first; never
// one being served or hijacked. nil when there is none.
func (l *Listener) stalest(pred func(*Conn) bool) *Conn {
	var best *Conn
	// Idle first, then those whose request is still arriving, and only
	// then one whose response is being written (a client that does not
	// read its responses would otherwise pin the slot until the write
	// timeout; a real response, a WeCom ack, is a few bytes written once).
	rank := func(c *Conn) int {
		switch c.phase {
		case phaseIdle:
			return 0
		case phaseResponding:
			return 2
		}
		return 1
	}
	better := func(a, b *Conn) bool { // a is staler than b
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		return a.seq < b.seq
	}
	for c := range l.conns {
		if !c.evictable() || !pred(c) {
			continue
		}
		if best == nil || better(c, best) {
			best = c
		}
	}
	return best
}

// remove takes c out of its pool; false when it already was.
func (l *Listener) remove(c *Conn) bool {
	if !c.open {
		return false
	}
	c.open = false
	delete(l.conns, c)
	if c.reserved {
		l.reserved--
		return true
	}
	l.normal--
	if n := l.perClient[c.client] - 1; n > 0 {
		l.perClient[c.client] = n
	} else {
		delete(l.perClient, c.client)
	}
	return true
}

func (l *Listener) warnLocked() {
	if l.cfg.Logger == nil {
		return
	}
	now := l.cfg.Now()
	if !l.lastLog.IsZero() && now.Sub(l.lastLog) < l.cfg.LogEvery {
		return
	}
	l.lastLog = now
	l.cfg.Logger.Warn("connection limit reached: evicting the stalest connections (a slow or idle client, or a flood)",
		"open", len(l.conns), "max", l.cfg.Max, "per_client", l.cfg.PerClient, "reserve", l.cfg.Reserve,
		"evicted_total", l.evicted, "refused_total", l.refused)
}

// Stats returns the counters.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: len(l.conns), Reserved: l.reserved, Accepted: l.accepted.Load(), Evicted: l.evicted, Refused: l.refused}
}

// ConnState is the http.Server hook that tells the listener what each
// connection is doing (idle connections are evicted first, hijacked ones
// never).
func (l *Listener) ConnState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*Conn)
	if !ok || c == nil || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateActive:
		l.seq++
		c.phase, c.seq = phaseReading, l.seq
	case http.StateIdle:
		l.seq++
		c.phase, c.seq = phaseIdle, l.seq
	case http.StateHijacked:
		c.phase = phaseHijacked
	}
}

type ctxKey struct{}

// ConnContext is the http.Server hook that makes a request's connection
// known to Guard.
func (l *Listener) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*Conn); ok && c != nil && c.l == l {
		return context.WithValue(ctx, ctxKey{}, c)
	}
	return ctx
}

// Guard wraps the server's handler. It serves only the given paths
// (exactly) to a connection on a reserved slot, and closes it after the
// response; other requests on it get 503. On an ordinary connection it
// tells the listener when the request has arrived whole (at once without a
// body, else when the handler reads the body to its end): from then on
// the connection is not evicted.
func (l *Listener) Guard(next http.Handler, healthPaths ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(ctxKey{}).(*Conn)
		if c == nil {
			next.ServeHTTP(w, r)
			return
		}
		if !c.reserved {
			if r.Body == nil || r.Body == http.NoBody {
				l.serving(c)
			} else {
				r.Body = &bodyEnd{ReadCloser: r.Body, end: func() { l.serving(c) }}
			}
			next.ServeHTTP(&respWriter{ResponseWriter: w, start: func() { l.responding(c) }}, r)
			return
		}
		w.Header().Set("Connection", "close") // give the slot back
		if slices.Contains(healthPaths, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the server is at its connection limit; try again shortly", http.StatusServiceUnavailable)
	})
}

// serving marks c's request as arrived whole.
func (l *Listener) serving(c *Conn) {
	l.mu.Lock()
	if c.phase == phaseNew || c.phase == phaseReading {
		c.phase = phaseServing
	}
	l.mu.Unlock()
}

// responding marks c's response as being written.
func (l *Listener) responding(c *Conn) {
	l.mu.Lock()
	if c.phase == phaseNew || c.phase == phaseReading || c.phase == phaseServing {
		c.phase = phaseResponding
	}
	l.mu.Unlock()
}

// respWriter calls start once, when the response begins. It passes
// Flush, Hijack (protocol upgrades) and Unwrap through.
type respWriter struct {
	http.ResponseWriter
	start func()
	once  sync.Once
}

func (w *respWriter) WriteHeader(code int) {
	if code >= 200 {
		w.once.Do(w.start)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *respWriter) Write(b []byte) (int, error) {
	w.once.Do(w.start)
	return w.ResponseWriter.Write(b)
}

func (w *respWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *respWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("connlimit: hijack not supported")
	}
	return h.Hijack()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bodyEnd calls end once when the body has been read to its end.
type bodyEnd struct {
	io.ReadCloser
	end  func()
	once sync.Once
}

func (b *bodyEnd) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.end)
	}
	return n, err
}

// Conn is a connection handed out by a Listener; closing it frees its slot.
type Conn struct {
	net.Conn
	l        *Listener
	client   string
	reserved bool // set before the Conn is shared

	// Guarded by l.mu.
	open  bool
	phase phase
	seq   uint64 // order of the last accept or request start

	closeOnce sync.Once
	closeErr  error
}

// evictable reports whether c may be closed for a newcomer; l.mu held.
func (c *Conn) evictable() bool { return c.phase != phaseServing && c.phase != phaseHijacked }

// Reserved reports whether c holds a reserved slot (health paths only).
func (c *Conn) Reserved() bool { return c.reserved }

// Close frees the slot and closes the connection.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.remove(c)
	c.l.mu.Unlock()
	return c.closeConn()
}

// CloseWrite half-closes a TCP connection (net/http uses it to let the
// client read a final response before the reset).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *Conn) closeConn() error {
	c.closeOnce.Do(func() { c.closeErr = c.Conn.Close() })
	return c.closeErr
}

// Client is the key a remote address is counted under: the IP of an IPv4
// peer or of ::1, the /64 prefix of another IPv6 one (one subscriber's
// network), the address itself when it is not host:port (all unix-socket
// peers share one).
func Client(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	if ip.IsLoopback() {
		return ip.String()
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
