// Package hostguard decides which HTTP requests the agent's listener
// answers, by their Host header, and which of them count as local.
//
// DNS rebinding: a web page on rebind.evil.example re-resolves its own name
// to 127.0.0.1 and then talks to the agent through the visitor's browser,
// same-origin as far as the browser knows. Its requests carry Host
// rebind.evil.example, so a listener that answers only the names it is
// known by (loopback, server.listen's host, server.allowed_hosts) is out of
// its reach. Guard answers every other Host with 421 and nothing else.
//
// Local: a request from a loopback address with a loopback Host and no
// proxy headers. It is not an identity — a tunnel, a reverse proxy that
// strips its headers, or any local user looks the same — so it gates only
// what is harmless to show the box's own users (metrics, health details),
// never the operator's rights.
package hostguard

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// ProxyHeaders are the request headers that say a proxy or tunnel relayed
// the request: a request that has any is not local, whatever its address.
var ProxyHeaders = []string{
	"Forwarded",
	"X-Forwarded-For",
	"X-Forwarded-Host",
	"X-Forwarded-Proto",
	"X-Forwarded-Port",
	"X-Forwarded-Server",
	"X-Real-IP",
	"X-Client-IP",
	"X-Original-Forwarded-For",
	"X-ProxyUser-IP",
	"True-Client-IP",
	"CF-Connecting-IP",
	"Fastly-Client-IP",
	"X-Cluster-Client-IP",
	"Via",
}

// Proxied reports whether h carries any of ProxyHeaders.
func Proxied(h http.Header) bool {
	for _, k := range ProxyHeaders {
		if _, ok := h[http.CanonicalHeaderKey(k)]; ok {
			return true
		}
	}
	return false
}

// Name returns the host of a Host header value ("Example.COM.:8080" ->
// "example.com", "[::1]:80" -> "::1"): lower case, without the port, the
// brackets of an IPv6 literal or a trailing dot. "" when it is empty or
// malformed.
func Name(host string) string {
	h := host
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return ""
		}
		rest := h[end+1:]
		if rest != "" && !validPort(rest) {
			return ""
		}
		h = h[1:end]
		if ip, err := netip.ParseAddr(h); err != nil || !ip.Is6() || ip.Zone() != "" {
			return "" // brackets hold an IPv6 address without a zone
		}
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		if strings.IndexByte(h[:i], ':') >= 0 {
			return "" // an unbracketed IPv6 literal or garbage
		}
		if !validPort(h[i:]) {
			return ""
		}
		h = h[:i]
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if ip, err := netip.ParseAddr(h); err == nil && ip.Zone() == "" || dnsName(h) {
		return h
	}
	return ""
}

// dnsName accepts dot-separated labels of letters, digits, '-' and '_'
// (what a browser puts in Host: IDNs arrive as punycode).
func dnsName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	label := 0 // length of the label so far
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_':
			if label++; label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return label > 0
}

// validPort accepts ":" followed by 0 to 5 digits (":" alone is what some
// clients send for the default port).
func validPort(p string) bool {
	if len(p) == 0 || p[0] != ':' || len(p) > 6 {
		return false
	}
	for _, c := range p[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Loopback reports whether name (as Name returns it) is "localhost" or a
// loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.1).
func Loopback(name string) bool {
	if name == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.Unmap().IsLoopback()
}

// Local reports whether r came from this machine directly: a loopback peer
// address, a loopback Host and no proxy headers. See the package comment
// for what it must not be used for.
func Local(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback() && Loopback(Name(r.Host)) && !Proxied(r.Header)
}

// Policy says which Host names the listener answers.
type Policy struct {
	// Listen is server.listen: its host is allowed unless it is a
	// wildcard (empty, 0.0.0.0, ::).
	Listen string
	// Allowed is server.allowed_hosts: names or addresses, a port ignored.
	Allowed []string
}

// Names lists the allowed names besides loopback ones, normalised.
func (p Policy) Names() []string {
	var out []string
	if host, _, err := net.SplitHostPort(p.Listen); err == nil && !wildcard(host) {
		if n := Name(bracket(host)); n != "" && !Loopback(n) {
			out = append(out, n)
		}
	}
	for _, a := range p.Allowed {
		if n := Name(bracket(a)); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Allows reports whether a request with Host host is answered.
func (p Policy) Allows(host string) bool {
	n := Name(host)
	switch {
	case n == "":
		return false
	case Loopback(n):
		return true
	}
	if h, _, err := net.SplitHostPort(p.Listen); err == nil && !wildcard(h) && Name(bracket(h)) == n {
		return true
	}
	for _, a := range p.Allowed {
		if Name(bracket(a)) == n {
			return true
		}
	}
	return false
}

// bracket puts a bare IPv6 literal (as a config value may hold it) in
// brackets so Name reads it as a host, not a host:port.
func bracket(h string) string {
	if strings.Count(h, ":") > 1 && !strings.HasPrefix(h, "[") {
		return "[" + h + "]"
	}
	return h
}

func wildcard(host string) bool {
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

// Guard answers requests whose Host policy() does not allow with 421
// Misdirected Request (a short plain-text body, no other content) and
// passes the rest to next. policy is asked per request, so it may follow
// configuration reloads. refused, when set, is told of each refusal.
func Guard(next http.Handler, policy func() Policy, refused func(r *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if policy().Allows(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		if refused != nil {
			refused(r)
		}
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Connection", "close")
		w.WriteHeader(http.StatusMisdirectedRequest)
		w.Write([]byte("421 misdirected request: this host name is not served here (server.allowed_hosts)\n"))
	})
}
