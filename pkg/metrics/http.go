package metrics

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
)

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach Flush, Hijack (WebSocket
// upgrades) and deadlines on the real writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush passes streaming writes through.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection to a protocol upgrade (the voice WebSocket).
func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hijack not supported")
	}
	s.code = http.StatusSwitchingProtocols
	return h.Hijack()
}

// InstrumentMux counts mux's requests in agent_http_requests_total by
// route pattern and status code. The pattern, not the raw path, is the
// label, so scanners cannot blow up cardinality.
func InstrumentMux(reg *Registry, mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		mux.ServeHTTP(rec, r)
		_, pattern := mux.Handler(r)
		if pattern == "" {
			pattern = "unmatched"
		}
		reg.Counter("agent_http_requests_total", "HTTP requests by route and status.",
			Labels{"route": pattern, "code": strconv.Itoa(rec.code)}).Inc()
	})
}
