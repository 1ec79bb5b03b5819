// Package egress is the one way out of the box: every outbound connection
// the daemon makes is dialled through a Ledger, which checks it against
// [privacy] egress_allow, refuses (and logs) anything else, and counts
// each destination's connections and bytes by purpose (llm, wecom,
// wecom_bot, mcp, web, models, doctor). The counts are on /metrics as
// agent_egress_bytes_total{purpose,host} and kept per hour in the
// database for `agentctl egress` (the last 24 hours).
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"agent/pkg/clock"
	"agent/pkg/metrics"
	"agent/pkg/netguard"
)

// Purpose says why the daemon connects.
type Purpose string

// The purposes.
const (
	LLM      Purpose = "llm"
	WeCom    Purpose = "wecom"
	WeComBot Purpose = "wecom_bot"
	MCP      Purpose = "mcp"
	Web      Purpose = "web"
	Models   Purpose = "models"
	Doctor   Purpose = "doctor"
	Fleet    Purpose = "fleet" // the fleet's NATS servers (pkg/fleet)
)

// ErrRefused is wrapped by a dial egress_allow does not permit.
var ErrRefused = errors.New("egress refused")

// Rule permits destinations: a host name, "*.domain" (its subdomains), an
// address or a CIDR, or "*" (any host); for one purpose or ("") all.
type Rule struct {
	Purpose Purpose
	Host    string       // lower-case name, "*.domain" or "*"
	Prefix  netip.Prefix // an address or CIDR rule
}

// RuleFor is the rule letting purpose p reach rawURL's host; false when
// rawURL names no host.
func RuleFor(p Purpose, rawURL string) (Rule, bool) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return Rule{}, false
	}
	r, err := ParseRule(string(p) + "=" + u.Hostname())
	return r, err == nil
}

// ParseRule reads one egress_allow entry: "api.example.com",
// "*.example.com", "10.0.0.0/8", "192.168.1.5", "[fd00::1]", "*", each
// optionally prefixed by "PURPOSE=" ("web=*").
func ParseRule(s string) (Rule, error) {
	var r Rule
	s = strings.TrimSpace(s)
	if p, rest, ok := strings.Cut(s, "="); ok {
		r.Purpose, s = Purpose(strings.TrimSpace(p)), strings.TrimSpace(rest)
		if !knownPurpose(r.Purpose) {
			return r, fmt.Errorf("%q: unknown purpose %q (llm, wecom, wecom_bot, mcp, web, models, doctor, fleet)", s, r.Purpose)
		}
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if s == "" {
		return r, errors.New("empty entry")
	}
	if pfx, err := netip.ParsePrefix(s); err == nil {
		r.Prefix = pfx.Masked()
		return r, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		r.Prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return r, nil
	}
	host := strings.ToLower(strings.TrimSuffix(s, "."))
	name := strings.TrimPrefix(host, "*.")
	if host != "*" && (name == "" || strings.ContainsAny(name, "/:@ *")) {
		return r, fmt.Errorf("%q is not a host name, *.domain, address, CIDR or *", s)
	}
	r.Host = host
	return r, nil
}

// ParseRules reads every entry.
func ParseRules(entries []string) ([]Rule, error) {
	var out []Rule
	var errs []error
	for _, e := range entries {
		r, err := ParseRule(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func knownPurpose(p Purpose) bool {
	switch p {
	case LLM, WeCom, WeComBot, MCP, Web, Models, Doctor, Fleet:
		return true
	}
	return false
}

// String is the rule as written.
func (r Rule) String() string {
	s := r.Host
	if r.Prefix.IsValid() {
		s = r.Prefix.String()
	}
	if r.Purpose != "" {
		s = string(r.Purpose) + "=" + s
	}
	return s
}

// matchName reports whether the rule permits host (a name or an address
// literal) for p, before resolution.
func (r Rule) matchName(p Purpose, host string) bool {
	if r.Purpose != "" && r.Purpose != p {
		return false
	}
	if r.Prefix.IsValid() {
		a, err := netip.ParseAddr(host)
		return err == nil && r.Prefix.Contains(a.Unmap())
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	switch {
	case r.Host == "*":
		return true
	case strings.HasPrefix(r.Host, "*."):
		return strings.HasSuffix(h, r.Host[1:])
	}
	return h == r.Host
}

// matchAddr reports whether an address rule permits a for p.
func (r Rule) matchAddr(p Purpose, a netip.Addr) bool {
	return (r.Purpose == "" || r.Purpose == p) && r.Prefix.IsValid() && r.Prefix.Contains(a.Unmap())
}

// Resolver looks names up (net.DefaultResolver; netguard's, so tests
// inject one resolver for both).
type Resolver = netguard.Resolver

// Config of a Ledger.
type Config struct {
	Clock    clock.Clock
	Logger   *slog.Logger
	Metrics  *metrics.Registry // nil: none
	Resolver Resolver          // nil: net.DefaultResolver
	// DialTimeout bounds one connection attempt (10 s).
	DialTimeout time.Duration
	// Proxy picks the proxy of a request (http.ProxyFromEnvironment:
	// HTTP(S)_PROXY, NO_PROXY); nil: none.
	Proxy func(*http.Request) (*url.URL, error)
}

// Ledger dials and counts. The zero policy (no SetRules) permits
// everything; the daemon sets the rules before it connects anywhere.
type Ledger struct {
	c      Config
	dialer net.Dialer
	rules  atomic.Pointer[[]Rule]

	mu      sync.Mutex
	pending map[key]*Counts // not yet flushed to the database
	series  map[key]*series // metrics
	hosts   map[Purpose]int // distinct host labels per purpose (bounded)
	proxies map[string]bool // proxy hosts ProxyFor chose (the dial permits them)
	store   *ledgerStore    // nil: counts only in memory (see Open)
}

type key struct {
	hour    int64 // unix hour
	purpose Purpose
	host    string
}

type series struct {
	bytes   *metrics.Counter
	refused *metrics.Counter
}

// Counts are one destination's traffic.
type Counts struct {
	Conns    int64 `json:"conns"`
	Refused  int64 `json:"refused"`
	BytesOut int64 `json:"bytes_out"`
	BytesIn  int64 `json:"bytes_in"`
}

// New returns a Ledger.
func New(cfg Config) *Ledger {
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	return &Ledger{c: cfg, dialer: net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second},
		pending: map[key]*Counts{}, series: map[key]*series{}, hosts: map[Purpose]int{}, proxies: map[string]bool{}}
}

// SetRules replaces what egress_allow permits (a reload applies to the
// next connection).
func (l *Ledger) SetRules(rules []Rule) {
	rs := append([]Rule(nil), rules...)
	l.rules.Store(&rs)
}

// Rules are the rules in force (nil: everything permitted).
func (l *Ledger) Rules() []Rule {
	if p := l.rules.Load(); p != nil {
		return *p
	}
	return nil
}

// Dialer is a DialContext for purpose p: the destination must be
// permitted; the connection is counted.
func (l *Ledger) Dialer(p Purpose) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return l.dial(ctx, p, network, addr, nil)
	}
}

// Wrap is Dialer over another dial function (a guard that resolves and
// checks addresses itself, as netguard does): the destination must be
// permitted, then next dials it and the connection is counted.
func (l *Ledger) Wrap(p Purpose, next func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return l.dial(ctx, p, network, addr, next)
	}
}

// Transport is an HTTP transport whose connections go through Dialer(p).
// When the environment names a proxy for a request (Config.Proxy), the
// request's own host is checked against the rules (and refused there) and
// the connection goes to the proxy, counted under the proxy's host.
func (l *Ledger) Transport(p Purpose) *http.Transport {
	return &http.Transport{
		Proxy:                 l.ProxyFor(p),
		DialContext:           l.Dialer(p),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          8,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       60 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Client is an HTTP client on Transport(p).
func (l *Ledger) Client(p Purpose, timeout time.Duration) *http.Client {
	return &http.Client{Transport: l.Transport(p), Timeout: timeout}
}

// ProxyFor is the proxy function of purpose p's transports (websocket
// dialers take it too): the request's host must be permitted; then the
// proxy the environment names, which the dial permits as the proxy.
func (l *Ledger) ProxyFor(p Purpose) func(*http.Request) (*url.URL, error) {
	if l.c.Proxy == nil {
		return nil
	}
	return func(req *http.Request) (*url.URL, error) {
		u, err := l.c.Proxy(req)
		if err != nil || u == nil {
			return u, err // direct: the dial checks the host
		}
		host := req.URL.Hostname()
		if rules := l.rules.Load(); rules != nil {
			ok, _, perr := l.permit(req.Context(), *rules, p, host)
			if perr != nil {
				return nil, perr
			}
			if !ok {
				l.count(p, host, func(c *Counts) { c.Refused++ })
				l.c.Logger.Warn("egress refused: not in privacy.egress_allow", "purpose", p, "host", host, "via", "proxy")
				return nil, fmt.Errorf("%w: %s (%s) is not in privacy.egress_allow", ErrRefused, host, p)
			}
		}
		l.mu.Lock()
		l.proxies[strings.ToLower(u.Hostname())] = true
		l.mu.Unlock()
		return u, nil
	}
}

func (l *Ledger) dial(ctx context.Context, p Purpose, network, addr string, next func(context.Context, string, string) (net.Conn, error)) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	target := addr
	l.mu.Lock()
	viaProxy := l.proxies[strings.ToLower(host)]
	l.mu.Unlock()
	if rules := l.rules.Load(); rules != nil && !viaProxy {
		ok, resolved, err := l.permit(ctx, *rules, p, host)
		if err != nil {
			return nil, err
		}
		if !ok {
			l.count(p, host, func(c *Counts) { c.Refused++ })
			l.c.Logger.Warn("egress refused: not in privacy.egress_allow", "purpose", p, "host", host, "port", port)
			return nil, fmt.Errorf("%w: %s (%s) is not in privacy.egress_allow", ErrRefused, host, p)
		}
		if resolved.IsValid() {
			target = net.JoinHostPort(resolved.String(), port) // the address that was checked
		}
	}
	if next == nil {
		next = l.dialer.DialContext
	}
	conn, err := next(ctx, network, target)
	if err != nil {
		return nil, err
	}
	l.count(p, host, func(c *Counts) { c.Conns++ })
	return &countedConn{Conn: conn, l: l, p: p, host: host}, nil
}

// permit decides host for p: a name or address rule on the host as
// written; else, when there are address rules, the host's addresses (all
// of them permitted), returning the one to dial.
func (l *Ledger) permit(ctx context.Context, rules []Rule, p Purpose, host string) (bool, netip.Addr, error) {
	hasAddr := false
	for _, r := range rules {
		if r.matchName(p, host) {
			return true, netip.Addr{}, nil
		}
		hasAddr = hasAddr || r.Prefix.IsValid()
	}
	if _, err := netip.ParseAddr(host); err == nil || !hasAddr {
		return false, netip.Addr{}, nil
	}
	addrs, err := l.c.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return false, netip.Addr{}, fmt.Errorf("egress: resolving %s: %w", host, err)
	}
	for _, a := range addrs {
		ok := false
		for _, r := range rules {
			ok = ok || r.matchAddr(p, a)
		}
		if !ok {
			return false, netip.Addr{}, nil
		}
	}
	return true, addrs[0].Unmap(), nil
}

// maxHosts bounds the host labels per purpose on /metrics (web_fetch may
// reach many): the rest count under "other".
const maxHosts = 64

func (l *Ledger) count(p Purpose, host string, f func(*Counts)) {
	host = strings.ToLower(host)
	hour := l.c.Clock.Now().Unix() / 3600
	l.mu.Lock()
	defer l.mu.Unlock()
	k := key{hour, p, host}
	c := l.pending[k]
	if c == nil {
		c = &Counts{}
		l.pending[k] = c
	}
	before := *c
	f(c)
	if l.c.Metrics == nil {
		return
	}
	s := l.metric(p, host)
	if d := c.Refused - before.Refused; d > 0 {
		s.refused.Add(float64(d))
	}
	if d := (c.BytesIn + c.BytesOut) - (before.BytesIn + before.BytesOut); d > 0 {
		s.bytes.Add(float64(d))
	}
}

// metric is the series of p and host (l.mu held).
func (l *Ledger) metric(p Purpose, host string) *series {
	k := key{purpose: p, host: host}
	if s := l.series[k]; s != nil {
		return s
	}
	if l.hosts[p] >= maxHosts {
		k.host = "other"
		if s := l.series[k]; s != nil {
			return s
		}
	} else {
		l.hosts[p]++
	}
	labels := metrics.Labels{"purpose": string(p), "host": k.host}
	s := &series{
		bytes:   l.c.Metrics.Counter("agent_egress_bytes_total", "Bytes sent and received on outbound connections, by purpose and destination host.", labels),
		refused: l.c.Metrics.Counter("agent_egress_refused_total", "Outbound connections refused by privacy.egress_allow, by purpose and destination host.", labels),
	}
	l.series[k] = s
	return s
}

// countedConn counts a connection's bytes.
type countedConn struct {
	net.Conn
	l    *Ledger
	p    Purpose
	host string
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.l.count(c.p, c.host, func(x *Counts) { x.BytesIn += int64(n) })
	}
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.l.count(c.p, c.host, func(x *Counts) { x.BytesOut += int64(n) })
	}
	return n, err
}
