package llmtest

import (
	"net"
	"sync"
)

// Refuse closes the server's port: connections are refused (ECONNREFUSED,
// the network or the service down) and open ones are dropped, until
// Accept. The address stays the same.
func (s *Server) Refuse() {
	s.tb.Helper()
	tl, ok := s.srv.Listener.(*toggleListener)
	if !ok {
		s.tb.Fatal("llmtest: Refuse needs a server from New, NewFunc or NewUnstarted")
	}
	tl.refuse()
	s.srv.CloseClientConnections()
}

// Accept opens the port again after Refuse.
func (s *Server) Accept() {
	s.tb.Helper()
	if err := s.srv.Listener.(*toggleListener).accept(); err != nil {
		s.tb.Fatalf("llmtest: listening again on %s: %v", s.srv.Listener.Addr(), err)
	}
}

// toggleListener is a listener whose port can be closed and opened again:
// while closed its Accept waits instead of failing (the server keeps
// serving once the port is back).
type toggleListener struct {
	addr net.Addr

	mu      sync.Mutex
	ln      net.Listener // nil while refusing
	changed chan struct{}
	closed  bool
}

func newToggleListener(ln net.Listener) *toggleListener {
	return &toggleListener{addr: ln.Addr(), ln: ln, changed: make(chan struct{})}
}

func (t *toggleListener) Accept() (net.Conn, error) {
	for {
		t.mu.Lock()
		ln, ch, closed := t.ln, t.changed, t.closed
		t.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		if ln == nil {
			<-ch
			continue
		}
		c, err := ln.Accept()
		if err == nil {
			return c, nil
		}
		t.mu.Lock()
		swapped := t.ln != ln && !t.closed
		t.mu.Unlock()
		if !swapped {
			return nil, err
		}
	}
}

func (t *toggleListener) refuse() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ln != nil {
		t.ln.Close()
		t.ln = nil
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

func (t *toggleListener) accept() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ln != nil || t.closed {
		return nil
	}
	ln, err := net.Listen("tcp", t.addr.String())
	if err != nil {
		return err
	}
	t.ln = ln
	close(t.changed)
	t.changed = make(chan struct{})
	return nil
}

func (t *toggleListener) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	close(t.changed)
	t.changed = make(chan struct{})
	if t.ln != nil {
		return t.ln.Close()
	}
	return nil
}

func (t *toggleListener) Addr() net.Addr { return t.addr }
