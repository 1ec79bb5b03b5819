package connlimit

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// dialFrom opens a TCP connection to addr from the loopback address src
// (127.0.0.0/8 is all local on Linux: each is a different client).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from %s (needs the whole 127/8 on loopback): %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// slowBody starts a POST whose body never arrives beyond its first byte.
func slowBody(t *testing.T, src, addr string) net.Conn {
	c := dialFrom(t, src, addr)
	fmt.Fprintf(c, "POST /callback HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nx")
	return c
}

// postFrom sends a complete POST from src and returns the status line.
func postFrom(t *testing.T, src, addr, path string) string {
	t.Helper()
	c := dialFrom(t, src, addr)
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a hang guard
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi", path)
	b, _ := io.ReadAll(c)
	line, _, _ := strings.Cut(string(b), "\r\n")
	return line
}

// The attack of the issue against a bare http.Server (no read timeouts:
// the limiter alone): slow-body POSTs from one address, then from many,
// beyond both caps. Other clients, the flooding address itself (a tunnel
// makes every client one address) and the health path are still served.
func TestSlowBodyFloodDoesNotStarveOthers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(ln, Config{Max: 24, Reserve: 2, PerClient: 8})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /callback", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("POST /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := &http.Server{Handler: l.Guard(mux, "/healthz"), ConnState: l.ConnState, ConnContext: l.ConnContext}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	flood := 0
	for i := range 30 { // one address, far over its cap
		slowBody(t, "127.0.0.2", addr)
		flood = i + 1
	}
	for a := 3; a < 8; a++ { // five more addresses: 40 more, over the global cap
		for range 8 {
			slowBody(t, fmt.Sprintf("127.0.0.%d", a), addr)
			flood++
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for l.Stats().Accepted < uint64(flood) { // every flood connection reached the server
		if time.Now().After(deadline) {
			t.Fatalf("flood not accepted: %+v", l.Stats())
		}
		time.Sleep(5 * time.Millisecond) // polling for a condition, bounded
	}
	for _, src := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.9"} {
		if got := postFrom(t, src, addr, "/callback"); got != "HTTP/1.1 200 OK" {
			t.Errorf("POST from %s during the flood: %q", src, got)
		}
		if got := postFrom(t, src, addr, "/healthz"); got != "HTTP/1.1 200 OK" {
			t.Errorf("health from %s during the flood: %q", src, got)
		}
	}
	st := l.Stats()
	if st.Open > 24 || st.Evicted == 0 {
		t.Errorf("stats %+v: want at most 24 open and evictions", st)
	}
	t.Logf("after the flood: %+v", st)
}

// Clients that never read their responses (pipelined GETs of a page into
// a small receive window) cannot pin every slot until the write timeout:
// a response being written is evicted, last, for a newcomer, and a
// complete POST from another address is served.
func TestUnreadResponsesDoNotPinSlots(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(ln, Config{Max: 10, Reserve: 2, PerClient: 4})
	page := strings.Repeat("x", 64<<10)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, page) })
	mux.HandleFunc("POST /callback", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		io.WriteString(w, "ok")
	})
	srv := &http.Server{Handler: l.Guard(mux, "/healthz"), ConnState: l.ConnState, ConnContext: l.ConnContext}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	for _, src := range []string{"127.0.0.2", "127.0.0.3"} {
		for range 4 {
			c := dialFrom(t, src, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetReadBuffer(1024)
			}
			var b strings.Builder
			for range 200 {
				b.WriteString("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			}
			go io.WriteString(c, b.String()) // and never read
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for { // every ordinary slot is writing a response nobody reads
		st := l.Stats()
		if st.Accepted >= 8 && st.Open >= 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the non-reading clients were not all accepted: %+v", st)
		}
		time.Sleep(5 * time.Millisecond) // polling for a condition, bounded
	}
	time.Sleep(100 * time.Millisecond) // let their writes block (no assertion on time)
	if got := postFrom(t, "127.0.0.9", addr, "/callback"); got != "HTTP/1.1 200 OK" {
		t.Fatalf("POST from another address while responses go unread: %q (%+v)", got, l.Stats())
	}
}
