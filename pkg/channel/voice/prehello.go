package voice

import (
	"strconv"
	"time"

	"github.com/gorilla/websocket"
)

// pendingSlot is a connection that has not said hello yet.
type pendingSlot struct {
	client string // connlimit.Client of its remote address
	seq    uint64 // arrival order: the lowest is evicted first
}

// enter registers c, from client, as a connection waiting for its hello.
// It returns the waiting connections to close to make room for it (the
// client's oldest when the client is at MaxPendingPerClient; at MaxPending,
// the oldest of the address with the most waiting), or why c is refused: the server is stopping, or
// MaxConns devices are connected already.
func (s *Server) enter(c *conn, client string) (victims []*conn, refused string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, "the voice channel is stopping"
	}
	if len(s.authed) >= s.lim.MaxConns {
		return nil, "too many voice connections (" + strconv.Itoa(s.lim.MaxConns) + "); try again shortly"
	}
	if s.pending == nil {
		s.pending, s.pendingPer, s.authed = map[*conn]pendingSlot{}, map[string]int{}, map[*conn]struct{}{}
	}
	evict := func(from string) {
		var oldest *conn
		var seq uint64
		for o, p := range s.pending {
			if p.client == from && (oldest == nil || p.seq < seq) {
				oldest, seq = o, p.seq
			}
		}
		if oldest != nil {
			s.unpend(oldest)
			s.evicted++
			victims = append(victims, oldest)
		}
	}
	if s.pendingPer[client] >= s.lim.MaxPendingPerClient {
		evict(client)
	}
	if len(s.pending) >= s.lim.MaxPending {
		evict(s.heaviestPending())
	}
	s.pendingSeq++
	s.pending[c] = pendingSlot{client: client, seq: s.pendingSeq}
	s.pendingPer[client]++
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return victims, ""
}

// heaviestPending is the client address with the most connections
// waiting for their hello (ties: the one with the oldest); mu held.
func (s *Server) heaviestPending() string {
	oldest := map[string]uint64{}
	for _, p := range s.pending {
		if o, ok := oldest[p.client]; !ok || p.seq < o {
			oldest[p.client] = p.seq
		}
	}
	var top string
	for k, n := range s.pendingPer {
		if t := s.pendingPer[top]; top == "" || n > t || n == t && oldest[k] < oldest[top] {
			top = k
		}
	}
	return top
}

// unpend takes c out of the waiting connections; false if it was not
// there (it said hello, or was evicted). Called with mu held.
func (s *Server) unpend(c *conn) bool {
	p, ok := s.pending[c]
	if !ok {
		return false
	}
	delete(s.pending, c)
	if n := s.pendingPer[p.client] - 1; n > 0 {
		s.pendingPer[p.client] = n
	} else {
		delete(s.pendingPer, p.client)
	}
	return true
}

// helloDone moves c, whose hello was accepted, from the waiting
// connections to the devices. false: c must end, because it was evicted
// meanwhile (it is being closed) or MaxConns devices are connected (it is
// told busy here).
func (s *Server) helloDone(c *conn) bool {
	s.mu.Lock()
	waiting := s.unpend(c)
	full := len(s.authed) >= s.lim.MaxConns
	if waiting && !full {
		s.authed[c] = struct{}{}
	}
	s.mu.Unlock()
	if !waiting {
		return false
	}
	if full {
		c.reject(CodeBusy, "too many voice connections ("+strconv.Itoa(s.lim.MaxConns)+"); try again shortly", websocket.CloseTryAgainLater)
		return false
	}
	return true
}

// leave forgets c when its connection ends.
func (s *Server) leave(c *conn) {
	s.mu.Lock()
	s.unpend(c)
	delete(s.authed, c)
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// evictReason is the close reason of a connection evicted before its hello.
const evictReason = "too many connections without a hello"

// evict ends c, a connection waiting for its hello, to make room for a
// newer one: the client sees 1013 (try again later). The cancel comes
// first, so a connection still upgrading sees it in upgraded.
func (c *conn) evict() {
	c.cancel()
	c.wsMu.Lock()
	ws := c.ws
	c.wsMu.Unlock()
	if ws != nil {
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseTryAgainLater, evictReason), time.Now().Add(time.Second))
		ws.NetConn().Close()
	}
}

// upgraded records c's WebSocket; false (and the connection closed) when
// c was evicted (1013) or the server began stopping (1001) while it was
// upgrading.
func (c *conn) upgraded(ws *websocket.Conn) bool {
	c.wsMu.Lock()
	c.ws = ws
	c.wsMu.Unlock()
	if c.ctx.Err() == nil {
		return true
	}
	code, reason := websocket.CloseTryAgainLater, evictReason
	c.s.mu.Lock()
	if c.s.closed {
		code, reason = websocket.CloseGoingAway, "agent stopping"
	}
	c.s.mu.Unlock()
	ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	ws.Close()
	return false
}
