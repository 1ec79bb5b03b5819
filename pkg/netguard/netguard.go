// Package netguard keeps the fetches of URLs that users or the model
// supply away from the box itself, the office LAN and cloud metadata
// (server-side request forgery).
//
// A Guard checks twice. Before a request (and on every redirect hop) the
// URL must be http or https with a host; a host spelled as a number in any
// of the forms browsers and inet_aton accept (2130706433, 0177.0.0.1,
// 0x7f.1) is read as the address it means. Then at dial time, after name
// resolution, every address the name resolves to must be a public
// unicast address on port 80 or 443: loopback, private (RFC 1918),
// carrier-grade NAT, unique-local, link-local (169.254.169.254 included),
// multicast, unspecified and other special-purpose addresses are refused,
// as are IPv4 addresses wrapped in IPv6 (mapped, NAT64, 6to4) that are
// any of those. The connection goes to the address that was checked, not
// to a second lookup, so DNS rebinding cannot slip between check and use;
// a socket-level hook checks it once more just before connect.
//
// Operators widen the guard with allow rules (web.fetch_allow): a host
// name, a "*.domain", an address or a CIDR, each optionally with ":PORT";
// a lone ":PORT" allows that port on public addresses. A name rule opens
// only the LAN addresses (private, CGNAT, ULA) the name resolves to;
// loopback, link-local and other special addresses need an address or
// CIDR rule.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is what every refusal wraps.
var ErrRefused = errors.New("refused by the network guard")

// RefusedError says what was refused and why.
type RefusedError struct {
	Target string // the URL, host or address
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s is not fetched: %s", e.Target, e.Reason)
}

func (e *RefusedError) Unwrap() error { return ErrRefused }

func refuse(target, format string, args ...any) error {
	return &RefusedError{Target: target, Reason: fmt.Sprintf(format, args...)}
}

// allowHint ends the reasons an operator can change.
const allowHint = " (an operator can allow it in web.fetch_allow)"

// Rule is one parsed allow entry.
type Rule struct {
	host   string       // a lower-case name, or ".suffix" for "*.suffix"
	prefix netip.Prefix // valid for an address or CIDR
	port   int          // 0: 80 and 443 only
}

// String returns the rule as it is written in config.
func (r Rule) String() string {
	var s string
	switch {
	case r.prefix.IsValid() && r.prefix.IsSingleIP():
		s = r.prefix.Addr().String()
	case r.prefix.IsValid():
		s = r.prefix.String()
	case strings.HasPrefix(r.host, "."):
		s = "*" + r.host
	default:
		s = r.host
	}
	if r.port == 0 {
		return s
	}
	if r.prefix.IsValid() && r.prefix.Addr().Is6() {
		s = "[" + s + "]"
	}
	return s + ":" + strconv.Itoa(r.port)
}

// ParseRule parses an allow entry: "wiki.corp.lan", "*.corp.lan",
// "10.1.0.0/16", "192.168.1.20", "fd00::/8", "[fd00::1]", each optionally
// followed by ":PORT" (an IPv6 address or prefix then in brackets), or
// ":PORT" alone.
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Rule{}, errors.New("empty entry")
	}
	body, port := s, 0
	if strings.HasPrefix(body, "[") {
		end := strings.IndexByte(body, ']')
		if end < 0 {
			return Rule{}, fmt.Errorf("%q: missing ]", s)
		}
		rest := body[end+1:]
		body = body[1:end]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return Rule{}, fmt.Errorf("%q: want [ADDRESS]:PORT", s)
			}
			n, err := parsePort(p)
			if err != nil {
				return Rule{}, fmt.Errorf("%q: %v", s, err)
			}
			port = n
		}
		if !strings.Contains(body, ":") {
			return Rule{}, fmt.Errorf("%q: brackets are for IPv6 addresses", s)
		}
	} else if i := strings.LastIndexByte(body, ':'); i >= 0 && strings.Count(body, ":") == 1 {
		n, err := parsePort(body[i+1:])
		if err != nil {
			return Rule{}, fmt.Errorf("%q: %v", s, err)
		}
		body, port = body[:i], n
		if body == "" {
			return Rule{port: port}, nil
		}
	}
	if strings.Contains(body, "/") {
		p, err := netip.ParsePrefix(body)
		if err != nil {
			return Rule{}, fmt.Errorf("%q: not a CIDR such as 10.1.0.0/16", s)
		}
		return Rule{prefix: unmapPrefix(p).Masked(), port: port}, nil
	}
	if a, err := netip.ParseAddr(body); err == nil {
		if a.Zone() != "" {
			return Rule{}, fmt.Errorf("%q: an address with a zone cannot be allowed", s)
		}
		a = a.Unmap()
		return Rule{prefix: netip.PrefixFrom(a, a.BitLen()), port: port}, nil
	}
	if _, ok := looseIPv4(body); ok {
		return Rule{}, fmt.Errorf("%q: write the address as four decimal numbers", s)
	}
	host := strings.TrimSuffix(strings.ToLower(body), ".")
	wild := false
	if h, ok := strings.CutPrefix(host, "*."); ok {
		host, wild = h, true
	}
	if !validName(host) {
		return Rule{}, fmt.Errorf("%q: not a host name, *.domain, address or CIDR", s)
	}
	if wild {
		host = "." + host
	}
	return Rule{host: host, port: port}, nil
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return n, nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// validName reports whether s is a DNS name: dot-separated labels of
// letters, digits, '-' and '_'.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// ParseRules parses every entry; the error names each bad one.
func ParseRules(entries []string) ([]Rule, error) {
	var rules []Rule
	var errs []error
	for _, e := range entries {
		r, err := ParseRule(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rules = append(rules, r)
	}
	return rules, errors.Join(errs...)
}

// Resolver looks names up (*net.Resolver; tests inject their own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config of a Guard.
type Config struct {
	Allow    []Rule
	Resolver Resolver // nil: net.DefaultResolver
	// DialTimeout bounds one connection attempt (default 10 s).
	DialTimeout time.Duration
	Logger      *slog.Logger
}

// Guard checks URLs and dials only what they may reach.
type Guard struct {
	allow    []Rule
	resolver Resolver
	dialer   net.Dialer
	logger   *slog.Logger
}

// New returns a Guard.
func New(cfg Config) *Guard {
	g := &Guard{allow: cfg.Allow, resolver: cfg.Resolver, logger: cfg.Logger}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	g.dialer = net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	return g
}

// CheckURL checks what can be checked before dialing: the scheme, the
// host and the port. It returns the URL to request: a host spelled as a
// number in another form is rewritten as the address it means.
func (g *Guard) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, refuse(short(raw), "not a URL")
	}
	if err := g.checkParsed(u); err != nil {
		return nil, err
	}
	return u, nil
}

// checkParsed checks (and may rewrite the host of) u.
func (g *Guard) checkParsed(u *url.URL) error {
	target := short(u.Redacted())
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return refuse(target, "only http:// and https:// URLs are fetched")
	default:
		return refuse(target, "only http:// and https:// URLs are fetched, not %s://", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return refuse(target, "the URL has no host")
	}
	host := u.Hostname()
	if strings.ContainsRune(host, '%') {
		return refuse(target, "an address with a zone is never fetched")
	}
	if a, ok := looseIPv4(host); ok {
		// What a browser or inet_aton would connect to.
		if p := u.Port(); p != "" {
			u.Host = net.JoinHostPort(a.String(), p)
		} else {
			u.Host = a.String()
		}
	}
	port, err := urlPort(u)
	if err != nil {
		return refuse(target, "%v", err)
	}
	// The address itself is checked at dial time; a literal can be
	// refused now, with the same reason.
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		return g.checkAddr(u.Hostname(), a, port)
	}
	if !g.portAllowed(strings.ToLower(u.Hostname()), netip.Addr{}, port) {
		return refuse(target, "port %d is not fetched (80 and 443 are)%s", port, allowHint)
	}
	return nil
}

func urlPort(u *url.URL) (int, error) {
	p := u.Port()
	if p == "" {
		if strings.EqualFold(u.Scheme, "https") {
			return 443, nil
		}
		return 80, nil
	}
	return parsePort(p)
}

// short bounds a URL in messages.
func short(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// Why says why a is refused, or "" when it is a public unicast address.
func Why(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		for _, r := range blocked4 {
			if r.p.Contains(a) {
				return r.why
			}
		}
		return ""
	}
	for _, r := range blocked6 {
		if r.p.Contains(a) {
			return r.why
		}
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		if why := Why(netip.AddrFrom4([4]byte(b[12:16]))); why != "" {
			return "a NAT64 address of " + why
		}
	case translated.Contains(a):
		// SIIT's IPv4-translated form (RFC 2765): a translator delivers
		// it to the IPv4 address in its last 32 bits.
		if why := Why(netip.AddrFrom4([4]byte(b[12:16]))); why != "" {
			return "an IPv4-translated address of " + why
		}
	case sixToFour.Contains(a):
		if why := Why(netip.AddrFrom4([4]byte(b[2:6]))); why != "" {
			return "a 6to4 address of " + why
		}
	}
	return ""
}

type blockedRange struct {
	p   netip.Prefix
	why string
}

// The special-purpose ranges (IANA registries) that are not public
// unicast destinations.
var (
	blocked4 = []blockedRange{
		{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address"},
		{netip.MustParsePrefix("10.0.0.0/8"), "a private (LAN) address"},
		{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
		{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address (this box)"},
		{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (cloud metadata lives there)"},
		{netip.MustParsePrefix("172.16.0.0/12"), "a private (LAN) address"},
		{netip.MustParsePrefix("192.0.0.0/24"), "a reserved address"},
		{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
		{netip.MustParsePrefix("192.88.99.0/24"), "a reserved address"},
		{netip.MustParsePrefix("192.168.0.0/16"), "a private (LAN) address"},
		{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
		{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
		{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
		{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
		{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	}
	blocked6 = []blockedRange{
		{netip.MustParsePrefix("::/128"), "an unspecified address"},
		{netip.MustParsePrefix("::1/128"), "a loopback address (this box)"},
		{netip.MustParsePrefix("::/96"), "an IPv4-compatible address"},
		{netip.MustParsePrefix("64:ff9b:1::/48"), "a local NAT64 address"},
		{netip.MustParsePrefix("100::/64"), "a discard address"},
		{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
		{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
		{netip.MustParsePrefix("fc00::/7"), "a unique-local (LAN) address"},
		{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
		{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
		{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
	}
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	translated = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// checkAddr checks one destination address and port; host is how the
// URL named it.
func (g *Guard) checkAddr(host string, a netip.Addr, port int) error {
	a = a.Unmap()
	if a.Zone() != "" {
		return refuse(host, "an address with a zone is never fetched")
	}
	target := host
	if h := strings.Trim(host, "[]"); h != a.String() {
		target = fmt.Sprintf("%s (%s)", host, a)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	why := Why(a)
	if why == "" {
		if !g.portAllowed(host, a, port) {
			return refuse(target, "port %d is not fetched (80 and 443 are)%s", port, allowHint)
		}
		return nil
	}
	// A refused address needs one rule that opens both it and the port:
	// "127.0.0.1" and "*.corp.lan:8080" together do not open 127.0.0.1:8080.
	opened := false
	for _, r := range g.allow {
		if !r.opens(host, a) {
			continue
		}
		if port == 80 || port == 443 || r.port == port {
			return nil
		}
		opened = true
	}
	if opened {
		return refuse(target, "port %d is not fetched (80 and 443 are)%s", port, allowHint)
	}
	return refuse(target, "%s%s", why, allowHint)
}

// OpensTheBox reports whether r is an address or CIDR rule that covers
// loopback or a cloud metadata address (worth a warning in config).
func (r Rule) OpensTheBox() bool {
	if !r.prefix.IsValid() {
		return false
	}
	for _, a := range []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback(), netip.MustParseAddr("169.254.169.254"), metadataAddrs[0], metadataAddrs[1]} {
		if r.prefix.Contains(a) {
			return true
		}
	}
	return false
}

// opens reports whether r opens a (a refused address) named host: an
// address or CIDR rule containing it, or a name rule when a is on the
// LAN (private, CGNAT, ULA) and not a cloud metadata address.
func (r Rule) opens(host string, a netip.Addr) bool {
	return r.matches(host, a) && (r.prefix.IsValid() || isLAN(a))
}

// matches reports whether r names host or a (port aside).
func (r Rule) matches(host string, a netip.Addr) bool {
	switch {
	case r.prefix.IsValid():
		return a.IsValid() && r.prefix.Contains(a)
	case strings.HasPrefix(r.host, "."):
		return strings.HasSuffix(host, r.host)
	case r.host != "":
		return host == r.host
	}
	return false
}

// lanRanges are the addresses a name rule may open.
var lanRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
}

func isLAN(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range lanRanges {
		if p.Contains(a) {
			return !slices.Contains(metadataAddrs, a)
		}
	}
	return false
}

// metadataAddrs are cloud metadata services inside the LAN ranges (those
// at 169.254.x.x are link-local, refused anyway): AWS's IPv6 one and
// Alibaba Cloud's, which hands out RAM role credentials.
var metadataAddrs = []netip.Addr{netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}

// portAllowed reports whether port may be used to reach host at a (a may
// be the zero Addr before resolution).
func (g *Guard) portAllowed(host string, a netip.Addr, port int) bool {
	if port == 80 || port == 443 {
		return true
	}
	host = strings.TrimSuffix(host, ".")
	for _, r := range g.allow {
		if r.port != port {
			continue
		}
		if r.host == "" && !r.prefix.IsValid() {
			// ":PORT": public destinations only.
			if !a.IsValid() || Why(a) == "" {
				return true
			}
			continue
		}
		if r.matches(host, a) || !a.IsValid() && r.prefix.IsValid() {
			// Before resolution a CIDR rule's port may apply; the dial
			// decides.
			return true
		}
	}
	return false
}

// DialContext resolves addr's host, checks every address it resolves to
// and connects to a checked one. It is an http.Transport's DialContext.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, refuse(addr, "not HOST:PORT")
	}
	port, err := parsePort(portStr)
	if err != nil {
		return nil, refuse(addr, "%v", err)
	}
	var addrs []netip.Addr
	if a, ok := looseIPv4(host); ok {
		addrs = []netip.Addr{a}
	} else if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if !validName(strings.TrimSuffix(strings.ToLower(host), ".")) {
			return nil, refuse(host, "not a host name")
		}
		addrs, err = g.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("look up %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("look up %s: no addresses", host)
		}
	}
	// One refused address refuses the name: a public name has no
	// business resolving to the LAN, and dialing "the others" would let a
	// rebinding answer race.
	for _, a := range addrs {
		if err := g.checkAddr(host, a, port); err != nil {
			g.logger.Warn("fetch refused", "host", host, "addr", a.Unmap().String(), "err", err)
			return nil, err
		}
	}
	var firstErr error
	for _, a := range addrs {
		a = a.Unmap()
		d := g.dialer
		checked := netip.AddrPortFrom(a, uint16(port))
		d.Control = func(_, address string, _ syscall.RawConn) error {
			// The socket connects to exactly what was checked.
			got, err := netip.ParseAddrPort(address)
			if err != nil || got.Addr().Unmap() != checked.Addr() || got.Port() != checked.Port() {
				return refuse(address, "not the checked address %s", checked)
			}
			return nil
		}
		c, err := d.DialContext(ctx, network, checked.String())
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// ClientConfig bounds a guarded client.
type ClientConfig struct {
	Timeout      time.Duration // the whole request, body included (default 30 s)
	MaxRedirects int           // default 5
	// Around, when set, wraps the guard's dial (the egress ledger checks
	// and counts the connection the guard then makes).
	Around func(DialFunc) DialFunc
}

// DialFunc is a DialContext.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// Client returns an HTTP client whose every connection goes through the
// guard and whose redirects are checked hop by hop. It never uses a proxy
// (a proxy would do its own resolution, past the guard).
func (g *Guard) Client(cfg ClientConfig) *http.Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxRedirects <= 0 {
		cfg.MaxRedirects = 5
	}
	dial := DialFunc(g.DialContext)
	if cfg.Around != nil {
		dial = cfg.Around(dial)
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           16,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        60 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  cfg.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > cfg.MaxRedirects {
				return fmt.Errorf("stopped after %d redirects (a redirect loop?)", cfg.MaxRedirects)
			}
			return g.checkParsed(req.URL)
		},
	}
}

// looseIPv4 reads host as an IPv4 address in the forms inet_aton and the
// WHATWG URL standard accept: one to four parts separated by dots (a
// trailing dot allowed), each decimal, octal (leading 0) or hexadecimal
// (0x), the last part filling the remaining bytes. Only such spellings
// that differ from plain dotted decimal matter, but all are read.
func looseIPv4(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseNum(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseNum(s string) (uint64, bool) {
	base := 10
	switch {
	case len(s) > 1 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
		if s == "" {
			return 0, true
		}
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" || len(s) > 16 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
}
