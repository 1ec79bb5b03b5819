package daemon

import (
	"log/slog"
	"net"
	"net/http"
	"time"

	"agent/pkg/config"
	"agent/pkg/connlimit"
)

// HTTPTimeouts bound each phase of a request on server.listen. Zero fields
// take the defaults (tests shorten them). A hijacked connection (a
// channel's WebSocket) leaves them behind: net/http clears the deadlines on
// hijack and the channel sets its own.
type HTTPTimeouts struct {
	ReadHeader time.Duration // request line and headers; default 5 s
	Read       time.Duration // headers and body (callbacks are < 1 MB); default 10 s
	Write      time.Duration // from the end of the headers to the end of the response; default 30 s
	Idle       time.Duration // a keep-alive connection between requests; default 60 s
}

func (t HTTPTimeouts) withDefaults() HTTPTimeouts {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&t.ReadHeader, 5*time.Second)
	def(&t.Read, 10*time.Second)
	def(&t.Write, 30*time.Second)
	def(&t.Idle, 60*time.Second)
	return t
}

const (
	// maxHeaderBytes bounds a request's line and headers (net/http's
	// default is 1 MB; ours are a query string and a few headers).
	maxHeaderBytes = 64 << 10
	// fdReserve is the part of RLIMIT_NOFILE kept for everything but HTTP
	// clients: the database and its WAL, models, MCP server pipes, the
	// admin socket and its clients, outgoing API calls, logs.
	fdReserve = 256
)

// healthPaths are what a connection on a reserved slot may ask for.
var healthPaths = []string{"/healthz", "/livez"}

// httpServer builds the server for server.listen and bounds ln: at most
// server.max_conns connections (fewer when RLIMIT_NOFILE is too low for
// them), server.max_conns_per_client from one address other than
// loopback, a reserve for /healthz and /livez (connlimit).
func (d *Daemon) httpServer(ln net.Listener, cfg *config.Config) (*http.Server, *connlimit.Listener) {
	maxConns := cfg.Server.MaxConns
	if soft, ok := connlimit.NoFile(); ok {
		if n, clamped := connlimit.FitNoFile(maxConns, soft, fdReserve); clamped {
			d.logger.Warn("server.max_conns lowered to fit the open-file limit", "max_conns", maxConns, "now", n,
				"nofile", soft, "kept_for_other_files", fdReserve, "fix", "raise LimitNOFILE= in the unit (the shipped one sets 65536)")
			maxConns = n
		}
	}
	lim := connlimit.Wrap(ln, connlimit.Config{
		Max:       maxConns,
		Reserve:   healthReserve(maxConns),
		PerClient: cfg.Server.MaxConnsPerClient,
		// Loopback is not held to max_conns_per_client: behind it are a
		// TCP tunnel's or a local proxy's clients (platforms' callbacks among
		// them) and the daemon's own probe. A flood through it takes its
		// room from its own connections still waiting on their client,
		// never from a callback that arrived whole (connlimit).
		PerLoopback: maxConns,
		Now:         d.now,
		Logger:      d.logger.With("component", "http"),
	})
	eff := lim.Limits()
	d.metrics.Gauge("agent_http_max_conns", "Connections server.listen accepts at once (server.max_conns, fitted to RLIMIT_NOFILE).", nil).Set(float64(eff.Max))
	stat := func(f func(connlimit.Stats) float64) func() float64 { return func() float64 { return f(lim.Stats()) } }
	d.metrics.GaugeFunc("agent_http_connections", "Open connections on server.listen.", nil, stat(func(s connlimit.Stats) float64 { return float64(s.Open) }))
	d.metrics.GaugeFunc("agent_http_connections_reserved", "Of them, on the slots kept for /healthz and /livez.", nil, stat(func(s connlimit.Stats) float64 { return float64(s.Reserved) }))
	d.metrics.GaugeFunc("agent_http_connections_evicted", "Connections closed to make room for newer ones since start (a flood or slow clients).", nil, stat(func(s connlimit.Stats) float64 { return float64(s.Evicted) }))
	d.metrics.GaugeFunc("agent_http_connections_refused", "Connections closed on arrival since start (nothing to evict, reserve full).", nil, stat(func(s connlimit.Stats) float64 { return float64(s.Refused) }))

	to := d.opts.HTTPTimeouts.withDefaults()
	return &http.Server{
		Handler:           lim.Guard(d.routes(), healthPaths...),
		ReadHeaderTimeout: to.ReadHeader,
		ReadTimeout:       to.Read,
		WriteTimeout:      to.Write,
		IdleTimeout:       to.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         lim.ConnState,
		ConnContext:       lim.ConnContext,
		ErrorLog:          slog.NewLogLogger(d.logger.Handler(), slog.LevelWarn),
	}, lim
}

// healthReserve is the share of maxConns kept for health probes.
func healthReserve(maxConns int) int { return max(2, maxConns/64) }
