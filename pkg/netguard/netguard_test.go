package netguard

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
	"sync/atomic"
	"testing"

	"agent/pkg/netguard/netguardtest"
)

// server is a local HTTP server that counts the requests it got: a
// refused fetch must never reach it.
type server struct {
	*httptest.Server
	hits atomic.Int64
	port string
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	s := &server{}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret from the box") }
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	s.port = u.Port()
	return s
}

func mustRules(t *testing.T, entries ...string) []Rule {
	t.Helper()
	r, err := ParseRules(entries)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fetch does what web_fetch does: check the URL, then GET it with the
// guarded client.
func fetch(g *Guard, raw string) (string, error) {
	u, err := g.CheckURL(raw)
	if err != nil {
		return "", err
	}
	resp, err := g.Client(ClientConfig{}).Get(u.String())
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestSSRFAttemptsAreRefused(t *testing.T) {
	box := newServer(t, nil)
	p := box.port
	// public.example resolves to a public address; evil names resolve to
	// the box, the LAN or metadata.
	res := netguardtest.Resolver{
		"rebind.example":      {"127.0.0.1"},
		"lan.example":         {"10.0.0.7"},
		"metadata.example":    {"169.254.169.254"},
		"mixed.example":       {"93.184.216.34", "127.0.0.1"},
		"mapped.example":      {"::ffff:127.0.0.1"},
		"v6local.example":     {"::1"},
		"ula.example":         {"fd00:ec2::254"},
		"nat64.example":       {"64:ff9b::a9fe:a9fe"},
		"sixtofour.example":   {"2002:7f00:1::1"},
		"cgnat.example":       {"100.64.0.1"},
		"multicast.example":   {"224.0.0.1"},
		"unspecified.example": {"0.0.0.0"},
	}
	g := New(Config{Resolver: res})
	cases := []struct {
		url, why string
	}{
		{"http://127.0.0.1:" + p + "/", "loopback"},
		{"http://127.0.0.1/", "loopback"},
		{"http://[::1]/", "loopback"},
		{"http://[::1]:" + p + "/", "loopback"},
		{"http://10.0.0.1/", "private"},
		{"http://192.168.1.1/admin", "private"},
		{"http://172.20.0.1/", "private"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://100.100.100.200/", "carrier-grade NAT"},
		{"http://[fd00:ec2::254]/", "unique-local"},
		{"http://[fe80::1%25eth0]/", "zone"},
		{"http://[::ffff:127.0.0.1]/", "loopback"},
		{"http://[::ffff:a9fe:a9fe]/", "link-local"},
		{"http://[64:ff9b::7f00:1]/", "NAT64"},
		{"http://[::ffff:0:7f00:1]/", "IPv4-translated address of a loopback"},
		{"http://[::ffff:0:a9fe:a9fe]/", "IPv4-translated address of a link-local"},
		{"http://0.0.0.0/", "unspecified"},
		{"http://[::]/", "unspecified"},
		{"http://224.0.0.251/", "multicast"},
		{"http://2130706433/", "loopback"},            // decimal
		{"http://0177.0.0.1/", "loopback"},            // octal
		{"http://0x7f.0.0.1/", "loopback"},            // hex
		{"http://0x7f000001/", "loopback"},            // one hex number
		{"http://127.1/", "loopback"},                 // short form
		{"http://017700000001/", "loopback"},          // one octal number
		{"http://0251.0376.0251.0376/", "link-local"}, // octal metadata
		{"http://rebind.example/", "loopback"},
		{"http://rebind.example:" + p + "/", "port"},
		{"http://lan.example/", "private"},
		{"http://metadata.example/latest/", "link-local"},
		{"http://mixed.example/", "loopback"},
		{"http://mapped.example/", "loopback"},
		{"http://v6local.example/", "loopback"},
		{"http://ula.example/", "unique-local"},
		{"http://nat64.example/", "NAT64"},
		{"http://sixtofour.example/", "6to4"},
		{"http://cgnat.example/", "carrier-grade NAT"},
		{"http://multicast.example/", "multicast"},
		{"http://unspecified.example/", "unspecified"},
		{"file:///etc/passwd", "only http"},
		{"gopher://127.0.0.1:6379/_INFO", "only http"},
		{"ftp://example.com/", "only http"},
		{"dict://127.0.0.1:11211/", "only http"},
		{"//127.0.0.1/", "only http"},
		{"http:///nohost", "no host"},
		{"http://example.com:22/", "port 22"},
		{"https://example.com:8443/", "port 8443"},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			_, err := fetch(g, c.url)
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("fetch(%s) = %v, want a refusal", c.url, err)
			}
			if !strings.Contains(err.Error(), c.why) {
				t.Errorf("fetch(%s): %v, want it to mention %q", c.url, err, c.why)
			}
		})
	}
	if n := box.hits.Load(); n != 0 {
		t.Fatalf("the box's server got %d requests", n)
	}
}

// A public-looking URL that redirects to the box is refused at the hop.
func TestRedirectToTheBoxIsRefused(t *testing.T) {
	box := newServer(t, nil)
	// "public" is served from loopback too, so it is allowed by name;
	// its redirect target is not.
	public := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-ip":
			http.Redirect(w, r, box.URL+"/", http.StatusFound)
		case "/to-name":
			http.Redirect(w, r, "http://rebind.example:"+box.port+"/", http.StatusMovedPermanently)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			fmt.Fprint(w, "public page")
		}
	})
	g := New(Config{
		Resolver: netguardtest.Resolver{"public.example": {"127.0.0.1"}, "rebind.example": {"127.0.0.1"}},
		Allow:    mustRules(t, "127.0.0.1:"+public.port),
	})
	base := "http://public.example:" + public.port
	if body, err := fetch(g, base+"/"); err != nil || body != "public page" {
		t.Fatalf("the allowed host: %q, %v", body, err)
	}
	for _, path := range []string{"/to-ip", "/to-name", "/to-file", "/to-metadata"} {
		_, err := fetch(g, base+path)
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want a refusal", path, err)
		}
	}
	if _, err := fetch(g, base+"/loop"); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Errorf("redirect loop: %v", err)
	}
	if n := box.hits.Load(); n != 0 {
		t.Fatalf("the box's server got %d requests", n)
	}
}

func TestAllowRules(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	res := netguardtest.Resolver{"wiki.corp.lan": {"127.0.0.1"}, "git.corp.lan": {"127.0.0.1"}, "other.lan": {"127.0.0.1"}}
	cases := []struct {
		rules []string
		url   string
		ok    bool
	}{
		{[]string{"127.0.0.1:" + srv.port}, "http://127.0.0.1:" + srv.port + "/", true},
		{[]string{"127.0.0.1"}, "http://127.0.0.1:" + srv.port + "/", false},    // address but not port
		{[]string{":" + srv.port}, "http://127.0.0.1:" + srv.port + "/", false}, // port alone: public only
		{[]string{"127.0.0.0/8:" + srv.port}, "http://127.0.0.1:" + srv.port + "/", true},
		// A name rule opens LAN addresses, never loopback.
		{[]string{"wiki.corp.lan:" + srv.port}, "http://wiki.corp.lan:" + srv.port + "/", false},
		{[]string{"wiki.corp.lan:" + srv.port}, "http://other.lan:" + srv.port + "/", false},
		{[]string{"*.corp.lan:" + srv.port}, "http://git.corp.lan:" + srv.port + "/", false},
		{[]string{"*.corp.lan:" + srv.port}, "http://other.lan:" + srv.port + "/", false},
		{[]string{"10.0.0.0/8:" + srv.port}, "http://127.0.0.1:" + srv.port + "/", false},
		{[]string{"wiki.corp.lan:" + srv.port}, "http://127.0.0.1:" + srv.port + "/", false}, // the name, not its address
	}
	for _, c := range cases {
		g := New(Config{Resolver: res, Allow: mustRules(t, c.rules...)})
		body, err := fetch(g, c.url)
		if c.ok && (err != nil || body != "ok") {
			t.Errorf("%v %s: %q, %v; want it fetched", c.rules, c.url, body, err)
		}
		if !c.ok && !errors.Is(err, ErrRefused) {
			t.Errorf("%v %s: %v; want a refusal", c.rules, c.url, err)
		}
	}
}

// A name rule opens the LAN addresses its name resolves to, and nothing
// else special: loopback, link-local and metadata need an address rule.
func TestNameRulesOpenOnlyTheLAN(t *testing.T) {
	res := netguardtest.Resolver{
		"wiki.corp.lan": {"10.255.255.1"}, "git.corp.lan": {"fd12::1"}, "localhost.corp.lan": {"127.0.0.1"},
		"meta.corp.lan": {"169.254.169.254"}, "ec2.corp.lan": {"fd00:ec2::254"}, "cgnat.corp.lan": {"100.64.0.9"},
	}
	g := New(Config{Resolver: res, Allow: mustRules(t, "*.corp.lan")})
	for host, open := range map[string]bool{"wiki.corp.lan": true, "git.corp.lan": true, "cgnat.corp.lan": true,
		"localhost.corp.lan": false, "meta.corp.lan": false, "ec2.corp.lan": false} {
		ctx, cancel := context.WithTimeout(context.Background(), 50e6)
		c, err := g.DialContext(ctx, "tcp", host+":80")
		cancel()
		if c != nil {
			c.Close()
		}
		if refused := errors.Is(err, ErrRefused); refused == open {
			t.Errorf("%s: %v (want open %v)", host, err, open)
		}
	}
}

func TestParseRule(t *testing.T) {
	good := map[string]string{
		"wiki.corp.lan":     "wiki.corp.lan",
		"Wiki.Corp.Lan.":    "wiki.corp.lan",
		"*.corp.lan":        "*.corp.lan",
		"*.corp.lan:8080":   "*.corp.lan:8080",
		"10.1.0.0/16":       "10.1.0.0/16",
		"10.1.2.3/16":       "10.1.0.0/16",
		"192.168.1.20":      "192.168.1.20",
		"192.168.1.20:8443": "192.168.1.20:8443",
		"fd00::/8":          "fd00::/8",
		"[fd00::1]":         "fd00::1",
		"[fd00::1]:8080":    "[fd00::1]:8080",
		"[fd00::/8]:8080":   "[fd00::/8]:8080",
		"::ffff:10.0.0.1":   "10.0.0.1",
		":8080":             ":8080",
		" intranet:80 ":     "intranet:80",
	}
	for in, want := range good {
		r, err := ParseRule(in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", in, err)
			continue
		}
		if r.String() != want {
			t.Errorf("ParseRule(%q) = %s, want %s", in, r, want)
		}
	}
	for _, bad := range []string{"", "http://wiki", "wiki/path", "10.0.0.0/33", "wiki:0", "wiki:70000", "wiki:x",
		"[fd00::1", "[wiki]:80", "fe80::1%eth0", "0177.0.0.1", "2130706433", "*.", "a..b", "-a.b", "[fd00::1]x"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted it", bad)
		}
	}
	_, err := ParseRules([]string{"ok.lan", "bad/", "also bad:"})
	if err == nil || !strings.Contains(err.Error(), "bad/") || !strings.Contains(err.Error(), "also bad") {
		t.Errorf("ParseRules: %v, want both bad entries named", err)
	}
}

func TestWhy(t *testing.T) {
	public := []string{"93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e",
		"64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8", "::ffff:0:808:808", "172.32.0.1", "100.128.0.1", "11.0.0.1"}
	for _, s := range public {
		if why := Why(netip.MustParseAddr(s)); why != "" {
			t.Errorf("Why(%s) = %q, want public", s, why)
		}
	}
	private := []string{"127.0.0.1", "127.255.255.254", "10.255.0.1", "172.16.0.1", "172.31.255.255", "192.168.0.1",
		"100.64.0.1", "100.127.255.255", "169.254.169.254", "0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250",
		"255.255.255.255", "240.0.0.1", "192.0.0.170", "198.18.0.1", "::", "::1", "::127.0.0.1", "::ffff:10.0.0.1",
		"fc00::1", "fdff::1", "fe80::1", "fec0::1", "ff02::1", "2001:db8::1", "2001::1", "100::1", "64:ff9b:1::1",
		"64:ff9b::a00:1", "2002:a9fe:a9fe::", "::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "::ffff:0:a00:1", "::ffff:0:0:0"}
	for _, s := range private {
		if why := Why(netip.MustParseAddr(s)); why == "" {
			t.Errorf("Why(%s) = public, want refused", s)
		}
	}
}

func TestLooseIPv4(t *testing.T) {
	cases := map[string]string{
		"127.0.0.1": "127.0.0.1", "2130706433": "127.0.0.1", "0x7f000001": "127.0.0.1", "0177.0.0.1": "127.0.0.1",
		"0x7f.0.0.1": "127.0.0.1", "127.1": "127.0.0.1", "127.0.1": "127.0.0.1", "10.1": "10.0.0.1",
		"017700000001": "127.0.0.1", "1.2.3.4.": "1.2.3.4", "0": "0.0.0.0", "0x": "0.0.0.0", "3232235521": "192.168.0.1",
	}
	for in, want := range cases {
		a, ok := looseIPv4(in)
		if !ok || a.String() != want {
			t.Errorf("looseIPv4(%q) = %v %v, want %s", in, a, ok, want)
		}
	}
	for _, name := range []string{"example.com", "1.2.3.4.5", "256.1.1.1", "4294967296", "1.2.3.256", "09.1.1.1", "1e3", "a.b", "", "0x1g", "1.2.65536"} {
		if a, ok := looseIPv4(name); ok {
			t.Errorf("looseIPv4(%q) = %v, want not an address", name, a)
		}
	}
}

// CheckURL rewrites numeric spellings to the address they mean, so the
// request line and TLS name are the plain address.
func TestCheckURLCanonicalises(t *testing.T) {
	g := New(Config{Allow: mustRules(t, "127.0.0.0/8")})
	u, err := g.CheckURL("http://0x7f.1:80/x?y=1")
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != "127.0.0.1:80" {
		t.Fatalf("host %q", u.Host)
	}
	if _, err := g.CheckURL("https://user:pw@public.example/path"); err != nil {
		t.Fatalf("a public URL with userinfo: %v", err)
	}
	if _, err := g.CheckURL("http://exa mple.com/"); !errors.Is(err, ErrRefused) {
		t.Fatalf("a URL with a space: %v", err)
	}
}

// The socket-level hook refuses an address other than the checked one
// (a resolver that changes its answer between check and connect cannot
// matter: the dial uses the checked address itself).
func TestDialUsesTheCheckedAddress(t *testing.T) {
	var calls atomic.Int64
	res := resolverFunc(func(ctx context.Context, network, host string) ([]netip.Addr, error) {
		// First answer public, then loopback: only one lookup happens.
		if calls.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	})
	g := New(Config{Resolver: res, Allow: mustRules(t, "192.0.2.0/24")})
	ctx, cancel := context.WithTimeout(context.Background(), 200e6)
	defer cancel()
	_, err := g.DialContext(ctx, "tcp", "flip.example:80")
	if err == nil {
		t.Fatal("dialed a documentation address")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d lookups, want 1", n)
	}
}

type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return f(ctx, network, host)
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1/", "http://2130706433/", "https://[::ffff:127.0.0.1]:443/", "gopher://x",
		"http://0x7f.1/", "http://a.b.c:8080/", "http://[fe80::1%25eth0]/", "//x", "http://%31%32%37.0.0.1/"} {
		f.Add(s)
	}
	g := New(Config{Resolver: netguardtest.Resolver{}})
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := g.CheckURL(raw)
		if err != nil {
			return
		}
		// Whatever passes is http(s) with a host, and a literal address
		// in it is public.
		if u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "HTTP" && u.Scheme != "HTTPS" && !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https") {
			t.Fatalf("%q passed with scheme %q", raw, u.Scheme)
		}
		if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && Why(a) != "" {
			t.Fatalf("%q passed with address %s", raw, a)
		}
		if a, ok := looseIPv4(u.Hostname()); ok && Why(a) != "" {
			t.Fatalf("%q passed with a numeric host meaning %s", raw, a)
		}
	})
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"wiki", "*.a.b:80", "10.0.0.0/8", "[fd00::1]:8080", ":443", "[::/0]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		// What parses prints as something that parses to the same rule.
		r2, err := ParseRule(r.String())
		if err != nil || r2 != r {
			t.Fatalf("%q -> %s -> %v %v", s, r, r2, err)
		}
	})
}
