package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/metrics"
	"agent/pkg/store/storetest"
)

type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestParseRule(t *testing.T) {
	for in, want := range map[string]string{
		"api.Example.com.": "api.example.com",
		"*.example.com":    "*.example.com",
		"10.0.0.0/8":       "10.0.0.0/8",
		"192.168.1.5":      "192.168.1.5/32",
		"[fd00::1]":        "fd00::1/128",
		"llm=api.x.com":    "llm=api.x.com",
		"web=*":            "web=*",
	} {
		r, err := ParseRule(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRule(%q) = %q, %v; want %q", in, r.String(), err, want)
		}
	}
	for _, bad := range []string{"", "http://x.com", "x.com:443", "spy=x.com", "a b", "user@x.com", "*x.com"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
}

// Names match names (and their subdomains for *.domain), address rules
// match address literals and what a name resolves to (every address of
// it), a purpose-bound rule only that purpose; the rest is refused before
// any connection is made, and counted.
func TestPermit(t *testing.T) {
	l := New(Config{Resolver: mapResolver{
		"lan.corp":  {netip.MustParseAddr("10.1.2.3")},
		"half.corp": {netip.MustParseAddr("10.1.2.4"), netip.MustParseAddr("8.8.8.8")},
	}})
	rules, err := ParseRules([]string{"api.example.com", "*.corp.example", "10.0.0.0/8", "web=*"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		p    Purpose
		host string
		ok   bool
	}{
		{LLM, "api.example.com", true},
		{LLM, "API.EXAMPLE.COM", true},
		{LLM, "evil.example.com", false},
		{LLM, "x.corp.example", true},
		{LLM, "corp.example", false},
		{LLM, "10.9.9.9", true},
		{LLM, "lan.corp", true},
		{LLM, "half.corp", false}, // one address outside the rule
		{MCP, "anything.net", false},
		{Web, "anything.net", true},
	} {
		ok, _, _ := l.permit(ctx, rules, c.p, c.host)
		if ok != c.ok {
			t.Errorf("%s %s: permitted %v, want %v", c.p, c.host, ok, c.ok)
		}
	}
}

// Through a real HTTP exchange: a permitted destination is counted (both
// directions, on /metrics too); a refused one fails with ErrRefused and
// is counted; the counts survive a flush into the database and show in
// the report with the refusal and the redactions.
func TestLedgerCountsAndRefuses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, strings.Repeat("x", 1000)) }))
	defer srv.Close()
	st := storetest.Open(t)
	reg := metrics.NewRegistry()
	clk := clock.NewFake(time.Now())
	l := New(Config{Metrics: reg, Clock: clk})
	l.Open(st.DB())
	l.SetRules([]Rule{{Purpose: LLM, Prefix: netip.MustParsePrefix("127.0.0.1/32")}})
	resp, err := l.Client(LLM, 5*time.Second).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, err := l.Client(MCP, 5*time.Second).Get(srv.URL); !errors.Is(err, ErrRefused) {
		t.Fatalf("MCP to an LLM-only host: %v", err)
	}
	l.Redacted(map[string]int{"phone": 2})
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Redacted(map[string]int{"phone": 1}) // pending, not flushed
	rep, err := l.Report(context.Background(), clk.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	got := map[Purpose]Entry{}
	for _, d := range rep.Destinations {
		got[d.Purpose] = d
	}
	if e := got[LLM]; e.Host != "127.0.0.1" || e.Conns != 1 || e.BytesIn < 1000 || e.BytesOut == 0 {
		t.Fatalf("llm entry %+v", e)
	}
	if e := got[MCP]; e.Refused != 1 || e.Conns != 0 {
		t.Fatalf("mcp entry %+v", e)
	}
	if rep.Redactions["phone"] != 3 || len(rep.Rules) != 1 {
		t.Fatalf("report %+v", rep)
	}
	var sb strings.Builder
	reg.WriteText(&sb)
	if !strings.Contains(sb.String(), `agent_egress_refused_total{host="127.0.0.1",purpose="mcp"} 1`) &&
		!strings.Contains(sb.String(), `agent_egress_refused_total{purpose="mcp",host="127.0.0.1"} 1`) {
		t.Fatalf("metrics:\n%s", sb.String())
	}
	// A week later the hours are gone.
	clk.Advance(8 * 24 * time.Hour)
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var n int
	st.DB().QueryRow(`SELECT count(*) FROM egress_hours`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d old rows kept", n)
	}
}

// web_fetch may reach many hosts: /metrics keeps at most maxHosts labels
// per purpose and counts the rest as "other".
func TestMetricHostsBounded(t *testing.T) {
	reg := metrics.NewRegistry()
	l := New(Config{Metrics: reg})
	l.SetRules([]Rule{{Host: "*"}})
	for i := range maxHosts + 10 {
		l.count(Web, fmt.Sprintf("h%d.example", i), func(c *Counts) { c.BytesIn += 10 })
	}
	var sb strings.Builder
	reg.WriteText(&sb)
	if n := strings.Count(sb.String(), "agent_egress_bytes_total{"); n != maxHosts+1 {
		t.Fatalf("%d series, want %d", n, maxHosts+1)
	}
	if !strings.Contains(sb.String(), `host="other"`) {
		t.Fatal("no other series")
	}
}

// Through a proxy (HTTP(S)_PROXY): the request's own host is checked
// against the rules before anything is sent, and the connection goes to
// the proxy, which the dial lets through.
func TestThroughAProxy(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "from the target") }))
	defer target.Close()
	var proxied int
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied++
		resp, err := http.Get(r.URL.String()) // a plain HTTP proxy: the absolute URL
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	}))
	defer proxy.Close()
	pu, _ := url.Parse(proxy.URL)
	l := New(Config{Proxy: http.ProxyURL(pu)})
	tu, _ := url.Parse(target.URL)
	l.SetRules([]Rule{{Purpose: LLM, Prefix: netip.MustParsePrefix(tu.Hostname() + "/32")}})
	resp, err := l.Client(LLM, 5*time.Second).Get(target.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "from the target" || proxied != 1 {
		t.Fatalf("got %q, proxied %d", body, proxied)
	}
	if _, err := l.Client(MCP, 5*time.Second).Get(target.URL); !errors.Is(err, ErrRefused) || proxied != 1 {
		t.Fatalf("MCP through the proxy: %v (proxied %d)", err, proxied)
	}
	rep, _ := l.Report(context.Background(), time.Now().Add(-time.Hour))
	var refusedMCP bool
	for _, d := range rep.Destinations {
		refusedMCP = refusedMCP || (d.Purpose == MCP && d.Refused == 1)
	}
	if !refusedMCP {
		t.Fatalf("the refusal was not counted: %+v", rep)
	}
}
