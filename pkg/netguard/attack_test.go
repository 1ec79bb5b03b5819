package netguard

// Attacks on the SSRF guard (security review of issue 16). Tests named
// TestAttack* that fail show a finding; the others are attacks that held
// and stay as regression tests.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/netguard/netguardtest"
)

// FINDING: a name rule allows the name whatever it resolves to, loopback
// and link-local included. An operator who allows the intranet
// ("*.corp.lan:8080") also allows any name under it that resolves to
// 127.0.0.1 (a "localhost.corp.lan" record is a common DNS default) or to
// 169.254.169.254, and so the daemon's own loopback listener (/metrics,
// the detailed /healthz) and cloud metadata, to anything the model reads.
// "*.corp.lan" was meant to open the LAN, not the box.
func TestAttackNameRuleReachesTheBox(t *testing.T) {
	box := newServer(t, nil) // the daemon's loopback listener
	res := netguardtest.Resolver{
		"wiki.corp.lan":      {"10.1.2.3"},
		"localhost.corp.lan": {"127.0.0.1"},
		"rebind.corp.lan":    {"10.1.2.3", "127.0.0.1"},
	}
	g := New(Config{Allow: mustRules(t, "*.corp.lan:"+box.port), Resolver: res})
	for _, host := range []string{"localhost.corp.lan", "rebind.corp.lan"} {
		body, err := fetch(g, "http://"+host+":"+box.port+"/metrics")
		if err == nil {
			t.Errorf("allow *.corp.lan:%s: http://%s:%s/metrics (127.0.0.1) was fetched: %q", box.port, host, box.port, body)
		}
	}
	// Metadata through a name rule, checked at dial time.
	g = New(Config{Allow: mustRules(t, "*.corp.lan"), Resolver: netguardtest.Resolver{"meta.corp.lan": {"169.254.169.254"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := g.DialContext(ctx, "tcp", "meta.corp.lan:80")
	if c != nil {
		c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "link-local") {
		t.Errorf("allow *.corp.lan: meta.corp.lan (169.254.169.254) passed the guard (dial: %v)", err)
	}
}

// --- Attacks that held. ---

// Addresses spelled so that a naive check misses what they mean.
func TestAttackAddressSpellings(t *testing.T) {
	for _, s := range []string{
		"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::127.0.0.1",
		"64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:7f00:1::1", "2002:a9fe:a9fe::", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
		"fe80::1", "fd00:ec2::254", "::", "0.0.0.0", "255.255.255.255", "100.100.100.200", "192.0.0.192",
	} {
		if Why(netip.MustParseAddr(s)) == "" {
			t.Errorf("%s is not refused", s)
		}
	}
	g := New(Config{Resolver: netguardtest.Resolver{}})
	for _, raw := range []string{
		"http://0/", "http://0x7f.1/", "http://0x7F.0X0.0.01/", "http://127.0.0.1./", "http://[::ffff:7f00:1]/",
		"http://[fe80::1%25eth0]/", "http://%31%32%37.0.0.1/", "http://127.0.0.1%2523/", "http://evil.example@127.0.0.1/",
		"http://127.0.0.1:80@evil.example:8080/", "http://[::1]:443/", "https://169.254.169.254/", "HTTP://127.1/",
		"http:127.0.0.1/", "http:/127.0.0.1/", "http://127.0.0.1:0443/", "//127.0.0.1/", "http://[0:0:0:0:0:ffff:7f00:0001]/",
		"http://[::ffff:0:7f00:1]/", "http://[0:0:0:0:ffff:0:7f00:1]/", "http://[::ffff:0:127.0.0.1]/",
	} {
		if u, err := g.CheckURL(raw); err == nil {
			port, _ := urlPort(u)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			c, derr := g.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), fmt.Sprint(port)))
			cancel()
			if c != nil {
				c.Close()
			}
			if derr == nil {
				t.Errorf("%s passed the URL check (as %s) and was dialed", raw, u)
			}
		}
	}
}

// Non-ASCII spellings of the box: the transport maps them to ASCII
// (IDNA) before dialing, and the dial check sees the result.
func TestAttackIDNSpellings(t *testing.T) {
	box := newServer(t, nil)
	g := New(Config{Allow: mustRules(t, ":"+box.port), Resolver: netguardtest.Resolver{"localhost": {"127.0.0.1"}}})
	for _, host := range []string{"ⓛⓞⓒⓐⓛⓗⓞⓢⓣ", "ｌｏｃａｌｈｏｓｔ", "１２７.０.０.１", "127。0。0。1", "127．0．0．1", "LOCALHOST."} {
		if _, err := fetch(g, "http://"+host+":"+box.port+"/"); err == nil {
			t.Errorf("%s was fetched", host)
		}
	}
	if n := box.hits.Load(); n != 0 {
		t.Errorf("the box was reached %d times", n)
	}
}

// A public name with one private answer among public ones, and a name
// that answers differently on every lookup: refused, and looked up once.
func TestAttackMixedAnswers(t *testing.T) {
	box := newServer(t, nil)
	var n atomic.Int64
	res := resolverFunc(func(_ context.Context, _, host string) ([]netip.Addr, error) {
		n.Add(1)
		return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("::ffff:127.0.0.1")}, nil
	})
	g := New(Config{Allow: mustRules(t, ":"+box.port), Resolver: res})
	if _, err := fetch(g, "http://mixed.example:"+box.port+"/"); err == nil {
		t.Error("a name with a loopback answer was fetched")
	}
	if box.hits.Load() != 0 {
		t.Error("the box was reached")
	}
}

// Redirect hops are counted and checked, relative ones included.
func TestAttackRedirectChain(t *testing.T) {
	box := newServer(t, nil)
	var hops atomic.Int64
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loop":
			hops.Add(1)
			http.Redirect(w, r, "/loop?"+fmt.Sprint(hops.Load()), http.StatusTemporaryRedirect)
		case "/rel":
			w.Header().Set("Location", "//127.0.0.1:"+box.port+"/")
			w.WriteHeader(http.StatusMovedPermanently)
		case "/dot":
			w.Header().Set("Location", "http://2130706433:"+box.port+"/")
			w.WriteHeader(http.StatusSeeOther)
		}
	})
	g := New(Config{Allow: mustRules(t, "127.0.0.1:"+srv.port, ":"+box.port), Resolver: netguardtest.Resolver{"pub.example": {"127.0.0.1"}}})
	_, err := fetch(g, "http://pub.example:"+srv.port+"/loop")
	if err == nil || !strings.Contains(err.Error(), "redirects") || hops.Load() == 0 || hops.Load() > 6 {
		t.Errorf("loop: %v after %d hops", err, hops.Load())
	}
	for _, p := range []string{"/rel", "/dot"} {
		if _, err := fetch(g, "http://pub.example:"+srv.port+p); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want a refusal", p, err)
		}
	}
	if box.hits.Load() != 0 {
		t.Error("the box was reached")
	}
	_ = url.URL{}
}
