package assistant

// The [web] wiring under reloads: reloads while turns run and
// while another reload runs. Failing tests are findings; the rest record
// what held.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"agent/pkg/config"
	"agent/pkg/netguard"
	"agent/pkg/tools"
)

func fetchWeb(m *mcpAssistant, raw string) (string, error) {
	args, _ := json.Marshal(map[string]string{"url": raw})
	return m.reg.Run(context.Background(), "web_fetch", tools.Call{Args: args, Channel: "admin", User: "ops"})
}

// HELD: a reload that takes an address out of web.fetch_allow closes it
// for the next call at once (a new guard and a new transport: no pooled
// connection to the LAN host survives), and fetches running meanwhile
// stay race-free.
func TestReloadNarrowsFetchAllow(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "inside")
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	open := fmt.Sprintf("[web]\nfetch_allow = [\"127.0.0.1:%s\"]\n", u.Port())
	m := newMCPAssistant(t, open)
	if out, err := fetchWeb(m, srv.URL+"/"); err != nil {
		t.Fatalf("allowed fetch: %v", err)
	} else if len(out) == 0 {
		t.Fatalf("allowed fetch returned nothing")
	}
	// Turns fetching while [web] flips back and forth.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				fetchWeb(m, srv.URL+"/")
			}
		})
	}
	for i := range 4 {
		if i%2 == 0 {
			m.write(t, "[web]\nfetch_allow = []\n")
		} else {
			m.write(t, open)
		}
		m.reload(t)
	}
	wg.Wait()
	m.write(t, "[web]\nfetch_allow = []\n")
	m.reload(t)
	if _, err := fetchWeb(m, srv.URL+"/"); !errors.Is(err, netguard.ErrRefused) {
		t.Errorf("after the reload the box is still fetched: %v", err)
	}
}

// FINDING: two reloads at once (SIGHUP in the daemon loop and `agentctl
// reload` through the admin socket both call Daemon.Reload, which does
// not serialise) race on Assistant.webCfg: reloadWeb reads it and
// registerWeb writes it with no lock. The race detector reports it; the
// visible effect is that the web tools can end up built from the older
// of the two files while the newer one is the configuration in force.
func TestConcurrentReloadsOfWeb(t *testing.T) {
	m := newMCPAssistant(t, "")
	a, b := *m.cfg, *m.cfg
	a.Web.FetchAllow = []string{"10.1.0.0/16"}
	b.Web.FetchAllow = []string{"10.2.0.0/16"}
	a.Web.Engines = []string{config.EngineGitHub}
	var wg sync.WaitGroup
	for _, next := range []*config.Config{&a, &b} {
		wg.Go(func() {
			for range 20 {
				m.Reload(context.Background(), next)
			}
		})
	}
	wg.Wait()
	// Reload b last, alone: the tools must follow it.
	m.Reload(context.Background(), &b)
	if _, ok := m.reg.Get("web_search"); !ok {
		t.Errorf("web_search missing after reloading b")
	}
}
