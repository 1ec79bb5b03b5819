package hostguard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"localhost", "localhost"},
		{"LocalHost.:8080", "localhost"},
		{"127.0.0.1:8080", "127.0.0.1"},
		{"[::1]:8080", "::1"},
		{"[::1]", "::1"},
		{"Agent.Example.com", "agent.example.com"},
		{"agent.example.com:", "agent.example.com"},
		{"", ""},
		{"::1", ""},                     // unbracketed IPv6 is not a Host
		{"[::1", ""},                    // unclosed
		{"[::1]x", ""},                  // junk after the bracket
		{"[example.com]", ""},           // brackets hold IPv6 only
		{"[127.0.0.1]", ""},             // ... not IPv4
		{"host:80:80", ""},              // two ports
		{"host:http", ""},               // named port
		{"host:123456", ""},             // too long
		{"user@127.0.0.1", ""},          // userinfo
		{"127.0.0.1/evil", ""},          // path
		{"evil.example\r\nX: y", ""},    // header injection
		{"localhost .evil.example", ""}, // space
	}
	for _, tt := range tests {
		if got := Name(tt.in); got != tt.want {
			t.Errorf("Name(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for name, want := range map[string]bool{
		"localhost": true, "127.0.0.1": true, "127.8.9.10": true, "::1": true, "::ffff:127.0.0.1": true,
		"localhost.evil.example": false, "evil.localhost": false, "10.0.0.1": false, "0.0.0.0": false, "::": false,
		"rebind.evil.example": false, "": false, "127.0.0.1.nip.io": false,
	} {
		if got := Loopback(name); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestPolicy(t *testing.T) {
	tests := []struct {
		name   string
		p      Policy
		allow  []string
		refuse []string
	}{
		{"loopback listen, nothing listed", Policy{Listen: "127.0.0.1:8080"},
			[]string{"127.0.0.1:8080", "localhost:8080", "localhost", "[::1]:8080", "127.0.0.2"},
			[]string{"rebind.evil.example", "rebind.evil.example:8080", "192.168.1.20:8080", "", "agent.example.com"}},
		{"wildcard listen adds nothing", Policy{Listen: ":8080"},
			[]string{"127.0.0.1:8080"},
			[]string{"192.168.1.20:8080", "rebind.evil.example"}},
		{"0.0.0.0 listen adds nothing", Policy{Listen: "0.0.0.0:8080"},
			[]string{"localhost"},
			[]string{"0.0.0.0:8080"}},
		{"LAN listen allows its own address", Policy{Listen: "192.168.1.20:8080"},
			[]string{"192.168.1.20:8080", "127.0.0.1:8080"},
			[]string{"192.168.1.21:8080", "rebind.evil.example"}},
		{"named listen", Policy{Listen: "agent.lan:8080"},
			[]string{"AGENT.LAN:8080", "agent.lan."},
			[]string{"agent.lan.evil.example"}},
		{"IPv6 listen", Policy{Listen: "[fd00::5]:8080"},
			[]string{"[fd00::5]:8080"},
			[]string{"[fd00::6]:8080"}},
		{"allowed hosts", Policy{Listen: "127.0.0.1:8080", Allowed: []string{"Agent.Example.com", "agent.example.com:443", "192.168.1.20", "fd00::5"}},
			[]string{"agent.example.com", "agent.example.com:8443", "192.168.1.20:8080", "[fd00::5]"},
			[]string{"example.com", "sub.agent.example.com", "rebind.evil.example"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, h := range tt.allow {
				if !tt.p.Allows(h) {
					t.Errorf("Allows(%q) = false, want true", h)
				}
			}
			for _, h := range tt.refuse {
				if tt.p.Allows(h) {
					t.Errorf("Allows(%q) = true, want false", h)
				}
			}
		})
	}
}

func TestLocal(t *testing.T) {
	req := func(remote, host string, hdr ...string) *http.Request {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.RemoteAddr, r.Host = remote, host
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	tests := []struct {
		name string
		r    *http.Request
		want bool
	}{
		{"loopback", req("127.0.0.1:5000", "127.0.0.1:8080"), true},
		{"localhost name", req("[::1]:5000", "localhost:8080"), true},
		{"remote peer", req("192.168.1.9:5000", "127.0.0.1:8080"), false},
		{"foreign host on loopback (rebinding)", req("127.0.0.1:5000", "rebind.evil.example"), false},
		{"public host on loopback (tunnel)", req("127.0.0.1:5000", "agent.example.com"), false},
		{"X-Forwarded-For", req("127.0.0.1:5000", "127.0.0.1:8080", "X-Forwarded-For", "203.0.113.7"), false},
		{"Forwarded", req("127.0.0.1:5000", "127.0.0.1:8080", "Forwarded", "for=203.0.113.7"), false},
		{"X-Real-IP", req("127.0.0.1:5000", "127.0.0.1:8080", "X-Real-IP", "203.0.113.7"), false},
		{"X-Forwarded-Host", req("127.0.0.1:5000", "127.0.0.1:8080", "X-Forwarded-Host", "agent.example.com"), false},
		{"Via", req("127.0.0.1:5000", "127.0.0.1:8080", "Via", "1.1 proxy"), false},
		{"empty proxy header still counts", req("127.0.0.1:5000", "127.0.0.1:8080", "X-Forwarded-For", ""), false},
		{"bad remote", req("pipe", "127.0.0.1"), false},
	}
	for _, tt := range tests {
		if got := Local(tt.r); got != tt.want {
			t.Errorf("%s: Local = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestGuard(t *testing.T) {
	var refused []string
	h := Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret console") }),
		func() Policy { return Policy{Listen: "127.0.0.1:8080", Allowed: []string{"agent.example.com"}} },
		func(r *http.Request) { refused = append(refused, r.Host) })
	for host, want := range map[string]int{
		"127.0.0.1:8080": 200, "agent.example.com": 200,
		"rebind.evil.example": http.StatusMisdirectedRequest, "": http.StatusMisdirectedRequest,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
		if want != 200 && strings.Contains(rec.Body.String(), "secret") {
			t.Errorf("Host %q: the refused request reached the handler: %q", host, rec.Body)
		}
	}
	if len(refused) != 2 {
		t.Errorf("refused hook saw %q, want the two refused hosts", refused)
	}
}

func FuzzName(f *testing.F) {
	for _, s := range []string{"localhost:8080", "[::1]:80", "Agent.Example.com.", "[fe80::1%25eth0]:8080", "a:b:c", "", "[", "]:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := Name(s)
		if n == "" {
			return
		}
		if n != strings.ToLower(n) || strings.HasSuffix(n, ".") || strings.ContainsAny(n, " /@[]\r\n") {
			t.Fatalf("Name(%q) = %q: not normalised", s, n)
		}
		// A name is stable: it is its own name (IPv6 in brackets).
		again := n
		if strings.Contains(n, ":") {
			again = "[" + n + "]"
		}
		if Name(again) != n {
			t.Fatalf("Name(%q) = %q but Name(%q) = %q", s, n, again, Name(again))
		}
		if Loopback(n) && !(n == "localhost" || strings.HasPrefix(n, "127.") || strings.Contains(n, ":")) {
			t.Fatalf("Loopback(%q) from %q", n, s)
		}
	})
}

// BenchmarkAllows: the per-request cost of the allowlist (a policy with a
// named listener and three allowed names, the request's Host last).
func BenchmarkAllows(b *testing.B) {
	p := Policy{Listen: "192.168.1.20:8080", Allowed: []string{"agent.lan", "agent.example.com", "10.0.0.5"}}
	for b.Loop() {
		if !p.Allows("10.0.0.5:8080") || p.Allows("rebind.evil.example") {
			b.Fatal("wrong answer")
		}
	}
}
