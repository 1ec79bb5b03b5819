package daemon

import (
	"encoding/json"
	"net/http"
	"time"

	"agent/pkg/buildinfo"
	"agent/pkg/health"
	"agent/pkg/hostguard"
	"agent/pkg/metrics"
)

func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", d.handleHealthz)
	d.consoleRoutes(mux)  // GET / and the sign-in link (console.go)
	d.channels.Mount(mux) // each channel's routes (channels.go)
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		// The listener may be public (platform callbacks); metrics are for
		// the box itself and a local scraper.
		if !fromLoopback(r) {
			http.Error(w, "metrics are served to loopback clients only", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		d.metrics.WriteText(w)
	})
	return d.hostGuard(metrics.InstrumentMux(d.metrics, mux)) // every path: DNS rebinding (hosts.go)
}

type healthzBody struct {
	Status  string          `json:"status"`
	Version string          `json:"version"`
	Uptime  string          `json:"uptime"`
	Checks  []health.Result `json:"checks"`
	Reasons []string        `json:"reasons,omitempty"`
}

func (d *Daemon) handleHealthz(w http.ResponseWriter, r *http.Request) {
	rep := d.checker.Run(r.Context())
	body := healthzBody{Status: "ok", Version: buildinfo.Version(), Uptime: d.now().Sub(d.started).Round(time.Second).String(), Checks: rep.Checks}
	code := http.StatusOK
	if !rep.Healthy {
		body.Status, code = "unhealthy", http.StatusServiceUnavailable
		for _, c := range rep.Checks {
			if c.Status == health.Failing {
				body.Reasons = append(body.Reasons, c.Name+": "+c.Detail)
			}
		}
	}
	if !fromLoopback(r) {
		// Remote load balancers get the verdict, not paths and details.
		body = healthzBody{Status: body.Status, Version: body.Version}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(body)
}

// fromLoopback: a loopback peer with a loopback Host and no proxy headers
// (a tunnel or proxy on the box relays from anywhere). It gates metrics
// and health details, never anyone's rights (hostguard.Local).
func fromLoopback(r *http.Request) bool { return hostguard.Local(r) }
