package daemon

import (
	"net/http"
	"sync"
	"time"

	"agent/pkg/clip"
	"agent/pkg/hostguard"
)

// hostGuard answers only requests whose Host names this agent: loopback,
// server.listen's host, server.allowed_hosts (which follow reloads). Any
// other Host — a DNS-rebinding page, a tunnel that passes on a public name
// nobody listed — gets 421 on every path, /healthz and the channels'
// callbacks included.
func (d *Daemon) hostGuard(next http.Handler) http.Handler {
	refused := d.metrics.Counter("agent_http_host_refused_total", "HTTP requests refused (421) for a Host that is not loopback, server.listen's host or in server.allowed_hosts.", nil)
	var mu sync.Mutex
	var lastLog time.Time
	return hostguard.Guard(next, func() hostguard.Policy {
		s := d.config().Server
		return hostguard.Policy{Listen: s.Listen, Allowed: s.AllowedHosts}
	}, func(r *http.Request) {
		refused.Inc()
		mu.Lock()
		quiet := d.now().Sub(lastLog) < time.Minute
		if !quiet {
			lastLog = d.now()
		}
		mu.Unlock()
		if !quiet { // once a minute: a flood of them must not flood the journal
			d.logger.Warn("HTTP request for a host name this agent does not serve refused (421)", "host", clip.String(r.Host, 80),
				"path", clip.String(r.URL.Path, 80), "remote", r.RemoteAddr,
				"fix", "if this is your public name (a platform's callback through a proxy or tunnel), add it to server.allowed_hosts and agentctl reload")
		}
	})
}
