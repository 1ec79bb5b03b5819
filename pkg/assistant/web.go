package assistant

import (
	"context"
	"net/http"
	"reflect"

	"agent/pkg/buildinfo"
	"agent/pkg/config"
	"agent/pkg/document"
	"agent/pkg/egress"
	"agent/pkg/netguard"
	"agent/pkg/readdoc"
	"agent/pkg/tools"
	"agent/pkg/webfetch"
	"agent/pkg/websearch"
)

// webTools are web_fetch (always: it needs no configuration) and
// web_search (when [web] configures an engine). Every URL web_fetch reads
// passes the SSRF guard with web.fetch_allow; engine base URLs are the
// operator's and are not guarded.
func (a *Assistant) webTools(cfg *config.Config) []tools.Tool {
	w := cfg.Web
	rules, err := netguard.ParseRules(w.FetchAllow)
	if err != nil { // config validation refused these already
		a.logger.Warn("web.fetch_allow", "err", err)
	}
	log := a.logger.With("component", "web")
	var around func(netguard.DialFunc) netguard.DialFunc
	var searchHTTP *http.Client
	if a.d.Egress != nil {
		around = func(next netguard.DialFunc) netguard.DialFunc { return a.d.Egress.Wrap(egress.Web, next) }
		searchHTTP = a.d.Egress.Client(egress.Web, w.Timeout.Duration)
	}
	f := webfetch.New(webfetch.Config{
		Guard:     netguard.New(netguard.Config{Allow: rules, Resolver: a.d.Resolver, Logger: log}),
		Around:    around,
		Timeout:   w.Timeout.Duration,
		MaxBytes:  int64(w.FetchMaxMB) << 20,
		PDF:       a.pdfBytes,
		UserAgent: "Mozilla/5.0 (compatible; agent/" + buildinfo.Version() + "; web_fetch)",
		Clock:     a.clock,
		Logger:    log,
	})
	ts := []tools.Tool{f.Tool()}
	r := websearch.New(websearch.Config{Web: w, HTTP: searchHTTP, Clock: a.clock, Logger: log})
	if len(r.Engines()) > 0 {
		ts = append(ts, r.Tool())
	}
	return ts
}

// registerWeb registers the web tools of cfg, replacing those of an
// earlier config; web_search goes when no engine is configured any more.
func (a *Assistant) registerWeb(cfg *config.Config) error {
	ts := a.webTools(cfg)
	for _, t := range ts {
		if err := a.reg.Replace(t); err != nil {
			return err
		}
	}
	if len(ts) == 1 {
		a.reg.Unregister("web_search")
	}
	a.webCfg = cloneWeb(cfg.Web)
	return nil
}

// reloadWeb applies a changed [web] section. Reloads may overlap (SIGHUP
// and agentctl reload): each builds from the configuration in force when
// it holds the lock, so the last one leaves the tools of the newest file.
func (a *Assistant) reloadWeb() {
	a.webMu.Lock()
	defer a.webMu.Unlock()
	next := a.config()
	if reflect.DeepEqual(a.webCfg, next.Web) {
		return
	}
	if err := a.registerWeb(next); err != nil {
		a.logger.Error("web tools", "err", err)
		return
	}
	a.logger.Info("web tools reloaded", "web_search", a.hasTool("web_search"))
}

func (a *Assistant) hasTool(name string) bool {
	_, ok := a.reg.Get(name)
	return ok
}

func cloneWeb(w config.Web) config.Web {
	w.Engines = append([]string(nil), w.Engines...)
	w.FetchAllow = append([]string(nil), w.FetchAllow...)
	return w
}

// pdfBytes converts a downloaded PDF in the sandbox (web_fetch).
func (a *Assistant) pdfBytes(ctx context.Context, data []byte) (*document.Doc, error) {
	sb, err := a.readySandbox(ctx)
	if err != nil {
		return nil, err
	}
	return readdoc.PDFBytes(ctx, sb, data)
}
