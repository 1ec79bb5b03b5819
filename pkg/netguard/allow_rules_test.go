package netguard

// The allow-rule semantics: how address, port, CIDR and name rules
// combine. Failing tests are findings; the rest record what held.

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"agent/pkg/netguard/netguardtest"
)

// FINDING: an address rule and a name rule with a port combine into an
// opening neither grants. "127.0.0.1" opens the box on 80/443 only, and
// "*.corp.lan:PORT" opens PORT only on the LAN addresses of those names
// (a name rule never opens loopback). Yet a *.corp.lan name that
// resolves to 127.0.0.1 reaches 127.0.0.1:PORT: addrAllowed is satisfied
// by the address rule, portAllowed by the name rule, each on its own.
func TestRulesDoNotCombineAddressAndPort(t *testing.T) {
	srv := newServer(t, nil)
	res := netguardtest.Resolver{"dash.corp.lan": {"127.0.0.1"}}
	// Each rule alone refuses the fetch (the premise).
	for _, rules := range [][]string{{"127.0.0.1"}, {"*.corp.lan:" + srv.port}} {
		g := New(Config{Resolver: res, Allow: mustRules(t, rules...)})
		if _, err := fetch(g, "http://dash.corp.lan:"+srv.port+"/"); !errors.Is(err, ErrRefused) {
			t.Fatalf("%v alone: %v, want a refusal", rules, err)
		}
	}
	g := New(Config{Resolver: res, Allow: mustRules(t, "127.0.0.1", "*.corp.lan:"+srv.port)})
	body, err := fetch(g, "http://dash.corp.lan:"+srv.port+"/")
	if !errors.Is(err, ErrRefused) || srv.hits.Load() != 0 {
		t.Errorf("127.0.0.1 (80/443) + *.corp.lan:%s reached 127.0.0.1:%s: %q, %v (hits %d)", srv.port, srv.port, body, err, srv.hits.Load())
	}
	// The same with a CIDR rule for the address.
	g = New(Config{Resolver: res, Allow: mustRules(t, "127.0.0.0/8", "dash.corp.lan:"+srv.port)})
	body, err = fetch(g, "http://dash.corp.lan:"+srv.port+"/")
	if !errors.Is(err, ErrRefused) {
		t.Errorf("127.0.0.0/8 + dash.corp.lan:%s reached the box: %q, %v", srv.port, body, err)
	}
}

// HELD: before resolution a CIDR rule's port lets any name pass CheckURL,
// but the dial decides: a public name on that port is still refused, and
// so is a name resolving into another special range.
func TestCIDRPortBeforeResolutionIsDecidedAtDial(t *testing.T) {
	srv := newServer(t, nil)
	res := netguardtest.Resolver{"public.example": {"93.184.216.34"}, "box.example": {"127.0.0.1"}}
	g := New(Config{Resolver: res, Allow: mustRules(t, "10.0.0.0/8:"+srv.port)})
	for _, host := range []string{"public.example", "box.example"} {
		u := "http://" + host + ":" + srv.port + "/"
		if _, err := g.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%s): %v (the port may apply before resolution)", u, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		c, err := g.DialContext(ctx, "tcp", host+":"+srv.port)
		cancel()
		if c != nil {
			c.Close()
		}
		if !errors.Is(err, ErrRefused) {
			t.Errorf("dial %s:%s under 10.0.0.0/8:%s: %v, want a refusal", host, srv.port, srv.port, err)
		}
	}
	if srv.hits.Load() != 0 {
		t.Errorf("the box was reached")
	}
}

// HELD: ":PORT" opens the port on public addresses only, before and after
// resolution, also for addresses an address rule allows on 80/443, and
// for every IPv6 spelling of the box.
func TestPortOnlyRuleStaysPublic(t *testing.T) {
	srv := newServer(t, nil)
	res := netguardtest.Resolver{"box.example": {"127.0.0.1"}, "mapped.example": {"::ffff:127.0.0.1"}, "lan.example": {"10.1.2.3"}}
	g := New(Config{Resolver: res, Allow: mustRules(t, ":"+srv.port, "10.1.2.3")})
	for _, u := range []string{
		"http://127.0.0.1:" + srv.port + "/",
		"http://[::ffff:127.0.0.1]:" + srv.port + "/",
		"http://[::ffff:7f00:1]:" + srv.port + "/",
		"http://0x7f.1:" + srv.port + "/",
		"http://box.example:" + srv.port + "/",
		"http://mapped.example:" + srv.port + "/",
		"http://10.1.2.3:" + srv.port + "/",
		"http://lan.example:" + srv.port + "/",
	} {
		if _, err := fetch(g, u); !errors.Is(err, ErrRefused) {
			t.Errorf("%s with :%s: %v, want a refusal", u, srv.port, err)
		}
	}
	if srv.hits.Load() != 0 {
		t.Errorf("the box was reached %d times", srv.hits.Load())
	}
}

// HELD: IPv6 brackets in rules, and mapped spellings, mean what they say.
func TestBracketRules(t *testing.T) {
	good := map[string]string{
		"[::ffff:127.0.0.1]:8080": "127.0.0.1:8080",
		"[fd00::/8]":              "fd00::/8",
		"::ffff:10.0.0.0/104":     "10.0.0.0/8",
		"[::1]:9000":              "[::1]:9000",
	}
	for in, want := range good {
		r, err := ParseRule(in)
		if err != nil || r.String() != want {
			t.Errorf("ParseRule(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
	for _, bad := range []string{"[wiki.corp.lan:80]", "[fd00::]/8", "[10.0.0.1]:80", "fd00::/8:8080", "[fd00::1]:", "[fd00::1]:0", "*.corp.lan:"} {
		if r, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted it as %s", bad, r)
		}
	}
	// An IPv6 rule does not open the IPv4 box, nor the other way round.
	srv := newServer(t, nil)
	g := New(Config{Allow: mustRules(t, "[::1]:"+srv.port)})
	if _, err := fetch(g, "http://127.0.0.1:"+srv.port+"/"); !errors.Is(err, ErrRefused) {
		t.Errorf("[::1] opened 127.0.0.1: %v", err)
	}
}

// HELD: a redirect from an allowed LAN host to another port or address of
// the box is checked at the hop and at the dial.
func TestRedirectFromAllowedHostToTheBox(t *testing.T) {
	box := newServer(t, nil)
	lan := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:"+box.port+"/", http.StatusFound)
	})
	g := New(Config{Allow: mustRules(t, "127.0.0.1:"+lan.port)})
	if _, err := fetch(g, "http://127.0.0.1:"+lan.port+"/"); !errors.Is(err, ErrRefused) {
		t.Errorf("redirect to another port of the box: %v", err)
	}
	if box.hits.Load() != 0 {
		t.Errorf("the box was reached")
	}
}

// FINDING: a name rule opens carrier-grade NAT addresses, and Alibaba
// Cloud's instance metadata service (RAM role credentials included) lives
// at 100.100.100.200, inside 100.64.0.0/10. Name rules were already closed to
// 169.254.169.254 and fd00:ec2::254; a "*.corp.lan" name
// pointing at 100.100.100.200 still reaches ECS metadata, on the cloud
// most likely to host an appliance for a Chinese office.
func TestNameRuleDoesNotOpenAlibabaMetadata(t *testing.T) {
	// checkAddr is what DialContext applies to every resolved address; no
	// packet is sent.
	g := New(Config{Allow: mustRules(t, "*.corp.lan")})
	if err := g.checkAddr("meta.corp.lan", netip.MustParseAddr("100.100.100.200"), 80); !errors.Is(err, ErrRefused) {
		t.Errorf("*.corp.lan opened 100.100.100.200 (Alibaba Cloud metadata): %v", err)
	}
	// Other CGNAT addresses stay open to the name rule (Tailscale, ISP NAT).
	if err := g.checkAddr("nas.corp.lan", netip.MustParseAddr("100.100.1.5"), 80); err != nil {
		t.Errorf("nas.corp.lan (100.100.1.5) refused: %v", err)
	}
	// An address rule still opens it for an operator who means it.
	g = New(Config{Allow: mustRules(t, "100.100.100.200")})
	if err := g.checkAddr("meta.corp.lan", netip.MustParseAddr("100.100.100.200"), 80); err != nil {
		t.Errorf("an address rule for 100.100.100.200: %v", err)
	}
}
