package logging

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

func TestScrubPatterns(t *testing.T) {
	cases := []struct{ in, want string }{
		// WeCom API URLs carry the token and the corp secret.
		{`Post "https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token=Xy7_kQ-9zz&debug=1": dial tcp: i/o timeout`,
			`Post "https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token=***&debug=1": dial tcp: i/o timeout`},
		{`GET /cgi-bin/gettoken?corpid=ww123&corpsecret=S3cr3tValue`, `GET /cgi-bin/gettoken?corpid=ww123&corpsecret=***`},
		{`GET /x?access_token=Tok3n: EOF`, `GET /x?access_token=***: EOF`},
		{`http://127.0.0.1:8080/console/signin?code=AbC123`, `http://127.0.0.1:8080/console/signin?code=***`},
		{"Cookie: agent_console=s3ss10n; theme=dark\nAccept: */*", "Cookie: ***\nAccept: */*"},
		// Prose about cookies and authorization keeps its text.
		{"parse cookie: malformed value in header; user=alice path=/x", "parse cookie: malformed value in header; user=alice path=/x"},
		{"authorization: denied for alice", "authorization: denied for alice"},
		{"Authorization: 0123456789abcdef0123456789", "Authorization: ***"},
		{"map[Cookie:[agent_console=s3ss10n] Accept:[*/*]]", "map[Cookie:[***] Accept:[*/*]]"},
		{`GET /x?key=a:b:c, then`, `GET /x?key=***, then`},
		{`https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=693a91f6-7xxx-4bc4`, `https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=***`},
		{`https://x.example/file?sv=2021&sig=abc%2Bdef&se=1`, `https://x.example/file?sv=2021&sig=***&se=1`},
		{`https://api.example.com/v1?api_key=abcdef123`, `https://api.example.com/v1?api_key=***`},
		{`https://api.example.com/v1?apiKey=abcdef123&x=1`, `https://api.example.com/v1?apiKey=***&x=1`},
		// Headers, as text and as Go prints an http.Header.
		{"Authorization: Bearer sk-abc\r\nHost: x", "Authorization: Bearer ***\r\nHost: x"},
		{"authorization: Basic dXNlcjpwYXNz", "authorization: Basic ***"},
		{"map[Authorization:[Bearer eyJhbGciOi] X-Api-Key:[k123456]]", "map[Authorization:[Bearer ***] X-Api-Key:[***]]"},
		{"request failed: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc rejected", "request failed: Bearer *** rejected"},
		// JSON bodies echoed into errors, also JSON inside JSON.
		{`body: {"errcode":0,"errmsg":"ok","access_token":"Tk_123-abc","expires_in":7200}`,
			`body: {"errcode":0,"errmsg":"ok","access_token":"***","expires_in":7200}`},
		{`{"msg":"{\"api_key\": \"k-1234\"}"}`, `{"msg":"{\"api_key\": \"***\"}"}`},
		{`{"Authorization":"Bearer abc"}`, `{"Authorization":"***"}`},
		// Assignments and dumps.
		{`OPENAI_API_KEY=abc123 VOICE_TOKEN='t 1' x=1`, `OPENAI_API_KEY=*** VOICE_TOKEN=*** x=1`},
		{`api_key = "sk-1"`, `api_key = ***`},
		{`{AccessToken:abc123 ExpiresIn:7200}`, `{AccessToken:*** ExpiresIn:7200}`},
		{`postgres://agent:hunter2@db:5432/x`, `postgres://agent:***@db:5432/x`},
		// Known key shapes.
		{`401: Incorrect API key provided: sk-proj-AbCdEfGhIjKlMnOpQrSt`, `401: Incorrect API key provided: sk-proj-***`},
		{`token ghp_0123456789abcdefghijABCDEFGHIJ012345 expired`, `token ghp_*** expired`},
		{`hf_abcdefghijklmnopqrstuvwxyz hf`, `hf_*** hf`},
		{`AKIAIOSFODNN7EXAMPLE`, `AKIA***`},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----",
			"-----BEGIN RSA PRIVATE KEY-----***-----END RSA PRIVATE KEY-----"},
		// Left alone: ordinary error texts, routing keys, counts.
		{`wecom: gettoken: errcode 40001: invalid credential`, `wecom: gettoken: errcode 40001: invalid credential`},
		{`p2p:wecom:zhangsan`, `p2p:wecom:zhangsan`},
		{`key=p2p:wecom:zhangsan`, `key=p2p:wecom:zhangsan`},
		{`max_tokens=4096 prompt_tokens: 12`, `max_tokens=4096 prompt_tokens: 12`},
		{`the task-management-framework-is-fine`, `the task-management-framework-is-fine`},
		{`bearer authentication failed`, `bearer authentication failed`},
		{`token=`, `token=`},
		{`明天下午三点开会`, `明天下午三点开会`},
	}
	for _, c := range cases {
		if got := ScrubPatterns(c.in); got != c.want {
			t.Errorf("ScrubPatterns(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		if again := ScrubPatterns(c.want); again != c.want {
			t.Errorf("not idempotent: ScrubPatterns(%q) = %q", c.want, again)
		}
	}
}

func TestScrubberLongestSecretFirstAndEscapedForms(t *testing.T) {
	sc := &Scrubber{}
	sc.Set([]string{"abcd", "abcdefgh", "p+ss/w0rd\"x"})
	for in, leak := range map[string]string{
		"x abcdefgh y":                           "efgh",
		"q=" + url.QueryEscape("p+ss/w0rd\"x"):   "w0rd",
		`{"v":"p+ss/w0rd\"x"}`:                   "w0rd",
		"path/" + url.PathEscape("p+ss/w0rd\"x"): "w0rd",
	} {
		if got := sc.Scrub(in); strings.Contains(got, leak) {
			t.Errorf("Scrub(%q) = %q: leaks %q", in, got, leak)
		}
	}
}

func TestNilScrubberStillRemovesShapes(t *testing.T) {
	var sc *Scrubber
	if got := sc.Scrub("GET /x?access_token=abc123"); got != "GET /x?access_token=***" {
		t.Fatalf("nil Scrubber: %q", got)
	}
	var b strings.Builder
	log := New(&b, new(slog.LevelVar), Options{}, nil)
	u, _ := url.Parse("https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token=TOKEN123")
	log.Warn("send failed", "url", u, "err", fmt.Errorf("wecom: %w", &url.Error{Op: "Post", URL: u.String(), Err: errors.New("EOF")}),
		"n", 3, "who", "wecom:alice")
	if out := b.String(); strings.Contains(out, "TOKEN123") || !strings.Contains(out, "who=wecom:alice") || !strings.Contains(out, "n=3") {
		t.Fatalf("log line: %s", out)
	}
}

func TestJSONHandlerKeepsCleanValues(t *testing.T) {
	var b strings.Builder
	log := New(&b, new(slog.LevelVar), Options{JSON: true}, &Scrubber{})
	log.Info("x", "list", []int{1, 2}, "hdr", map[string][]string{"Authorization": {"Bearer abcdefghijklmnopqrstuvwxyz"}})
	out := b.String()
	if !strings.Contains(out, `"list":[1,2]`) || strings.Contains(out, "abcdefghijklmnop") {
		t.Fatalf("json line: %s", out)
	}
}

// FuzzScrub: any text; the scrubber never panics, is idempotent, and
// neither a configured secret nor a token after access_token= survives,
// whatever surrounds them.
func FuzzScrub(f *testing.F) {
	for _, s := range []string{"", "access_token=", "Authorization: Bearer ", `{"api_key":"`, "sk-", "https://u:p@h/",
		"?key=", "-----BEGIN PRIVATE KEY-----", "\x00\xff", "明天", "token:", `\"secret\": \"`} {
		f.Add(s, s, "Tok3nValue")
	}
	sc := &Scrubber{}
	const secret = "Zq9-configured-SECRET"
	sc.Set([]string{secret})
	f.Fuzz(func(t *testing.T, pre, post, tok string) {
		in := pre + secret + post
		got := sc.Scrub(in)
		if strings.Contains(got, secret) {
			t.Fatalf("configured secret survived: %q -> %q", in, got)
		}
		if again := sc.Scrub(got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, got, again)
		}
		if tok = strings.Map(alnum, tok); len(tok) >= 4 {
			in = pre + "?access_token=" + tok + "&" + post
			if got := sc.Scrub(in); strings.Contains(got, "access_token="+tok) {
				t.Fatalf("access_token survived: %q -> %q", in, got)
			}
			in = pre + "\nAuthorization: Bearer " + tok + "\n" + post
			if got := sc.Scrub(in); strings.Contains(got, "Bearer "+tok) {
				t.Fatalf("bearer token survived: %q -> %q", in, got)
			}
		}
	})
}

func alnum(r rune) rune {
	if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
		return r
	}
	return -1
}

func BenchmarkScrub(b *testing.B) {
	sc := &Scrubber{}
	sc.Set([]string{"sk-0123456789abcdef", "corp-secret-value", "voice-token-1"})
	for _, in := range []string{
		"turn finished",
		`wecom: send: Post "https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token=abc": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
		strings.Repeat("api access token: sk- -----BEGIN x", 3000),         // many candidates, no match: linear
		strings.Repeat("-----BEGIN PRIVATE KEY-----", 2000) + "-----END x", // BEGINs without an END: linear
		strings.Repeat(`"token":"\a`, 5000),
	} {
		b.Run(fmt.Sprint(len(in)), func(b *testing.B) {
			for b.Loop() {
				sc.Scrub(in)
			}
		})
	}
}
