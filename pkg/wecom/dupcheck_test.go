package wecom_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

// checkFields decodes the duplicate-check fields of a sent request.
func checkFields(t *testing.T, raw []byte) (enable, interval int64, present bool) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	_, p1 := m["enable_duplicate_check"]
	_, p2 := m["duplicate_check_interval"]
	var b struct {
		Enable   int64 `json:"enable_duplicate_check"`
		Interval int64 `json:"duplicate_check_interval"`
	}
	json.Unmarshal(raw, &b)
	return b.Enable, b.Interval, p1 || p2
}

// Without the option a request carries no check fields (as before); with
// it, every kind of message carries enable_duplicate_check=1 and the
// interval in whole seconds, capped at WeCom's documented four hours.
func TestDuplicateCheckFields(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.srv.PutMedia("M1", wecomtest.Media{Kind: "image", Data: []byte("12345")})
	e.srv.PutMedia("V1", wecomtest.Media{Kind: "video", Data: []byte("12345")})
	if err := e.c.SendText(ctx, "u", "plain"); err != nil {
		t.Fatal(err)
	}
	if _, _, present := checkFields(t, e.srv.Messages()[0].Raw); present {
		t.Fatalf("a send without the option carries check fields: %s", e.srv.Messages()[0].Raw)
	}
	sends := []struct {
		name string
		send func(opt wecom.SendOption) error
	}{
		{"text", func(o wecom.SendOption) error { return e.c.SendText(ctx, "u", "t", o) }},
		{"markdown", func(o wecom.SendOption) error { return e.c.SendMarkdown(ctx, "u", "**m**", o) }},
		{"image", func(o wecom.SendOption) error { return e.c.SendMedia(ctx, "u", wecom.MediaImage, "M1", o) }},
		{"video", func(o wecom.SendOption) error { return e.c.SendVideo(ctx, "u", "V1", "title", "desc", o) }},
		{"link", func(o wecom.SendOption) error {
			return e.c.SendLink(ctx, "u", "title", "", "https://example.com/", "", o)
		}},
	}
	for _, c := range []struct {
		in   time.Duration
		want int64
	}{{90 * time.Second, 90}, {1500 * time.Millisecond, 2}, {5 * time.Hour, 4 * 3600}} {
		for _, s := range sends {
			before := len(e.srv.Messages())
			if err := s.send(wecom.DuplicateCheck(c.in)); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			msgs := e.srv.Messages()
			if len(msgs) != before+1 {
				t.Fatalf("%s with interval %v: not delivered", s.name, c.in)
			}
			if en, iv, _ := checkFields(t, msgs[before].Raw); en != 1 || iv != c.want {
				t.Fatalf("%s with %v: enable %d interval %d, want 1 %d: %s", s.name, c.in, en, iv, c.want, msgs[before].Raw)
			}
		}
	}
	before := len(e.srv.Messages())
	if err := e.c.SendText(ctx, "u", "zero", wecom.DuplicateCheck(0)); err != nil {
		t.Fatal(err)
	}
	if _, _, present := checkFields(t, e.srv.Messages()[before].Raw); present {
		t.Fatal("DuplicateCheck(0) sent check fields")
	}
}

// The fake applies the check as documented: the same request JSON with the
// check on, within the interval, is answered errcode 0 but not delivered;
// a different recipient, content or interval, a request without the
// check, or the same request after the interval is delivered.
func TestDuplicateCheckDropsOnlyTheSameRequestInTheWindow(t *testing.T) {
	e := newEnv(t)
	e.srv.SetClock(e.clock.Now)
	ctx := context.Background()
	dc := wecom.DuplicateCheck(10 * time.Minute)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.c.SendText(ctx, "alice", "OK", dc))
	must(e.c.SendText(ctx, "alice", "OK", dc)) // dropped
	must(e.c.SendText(ctx, "bob", "OK", dc))
	must(e.c.SendText(ctx, "alice", "OK!", dc))
	must(e.c.SendText(ctx, "alice", "OK", wecom.DuplicateCheck(11*time.Minute)))
	must(e.c.SendText(ctx, "alice", "OK")) // no check: always delivered
	must(e.c.SendText(ctx, "alice", "OK"))
	e.clock.Advance(9 * time.Minute)
	must(e.c.SendText(ctx, "alice", "OK", dc)) // dropped: 9 min after
	e.clock.Advance(time.Minute)
	must(e.c.SendText(ctx, "alice", "OK", dc)) // 10 min after: a new message
	if got := e.srv.Delivered("alice", "OK"); got != 5 {
		t.Fatalf("alice received OK %d times, want 5", got)
	}
	if got := e.srv.Delivered("bob", "OK"); got != 1 {
		t.Fatalf("bob received OK %d times, want 1", got)
	}
	if d := e.srv.Dropped(); len(d) != 2 || d[0].ToUser != "alice" || d[0].Content != "OK" {
		t.Fatalf("dropped = %+v", d)
	}
	// Media are checked too.
	e.srv.PutMedia("M1", wecomtest.Media{Kind: "image", Data: []byte("12345")})
	must(e.c.SendMedia(ctx, "alice", wecom.MediaImage, "M1", dc))
	must(e.c.SendMedia(ctx, "alice", wecom.MediaImage, "M1", dc))
	if n := e.srv.Deliveries()[wecomtest.Delivery{ToUser: "alice", MsgType: "image", Content: "M1"}]; n != 1 {
		t.Fatalf("image delivered %d times, want 1", n)
	}
}

// The case the check exists for: the message reached WeCom but its answer
// was lost, and the client's retry (same JSON) is dropped instead of
// delivered twice. Without the check the user sees it twice.
func TestLostAnswerRetriedOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.srv.LoseAnswerNext(1)
	if err := e.c.SendText(ctx, "alice", "checked", wecom.DuplicateCheck(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.Delivered("alice", "checked"); got != 1 {
		t.Fatalf("delivered %d times with the check, want 1", got)
	}
	e.srv.LoseAnswerNext(1)
	if err := e.c.SendText(ctx, "alice", "unchecked"); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.Delivered("alice", "unchecked"); got != 2 {
		t.Fatalf("delivered %d times without the check; the fake should show the duplicate", got)
	}
}

// Credentials named in an API error's errmsg do not survive into the error.
func TestAPIErrorRedactsCredentials(t *testing.T) {
	e := newEnv(t)
	e.srv.FailNextWith(wecomtest.EndpointSend, 40058, "invalid parameter: access_token=abcdef0123456789 corpsecret="+secret+", hint: [x]", 1)
	err := e.c.SendText(context.Background(), "alice", "hi")
	var api *wecom.APIError
	if !errors.As(err, &api) || api.Code != 40058 {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "abcdef0123456789") || !strings.Contains(err.Error(), "hint: [x]") {
		t.Fatalf("err = %v", err)
	}
}

func TestRedactCredentials(t *testing.T) {
	cases := map[string]string{
		"Post \"https://h/cgi-bin/message/send?access_token=TOK123&x=1\": EOF": "Post \"https://h/cgi-bin/message/send?access_token=***&x=1\": EOF",
		"gettoken?corpid=ww1&corpsecret=SEC-RET":                               "gettoken?corpid=ww1&corpsecret=***",
		`{"access_token": "TOK123", "expires_in": 7200}`:                       `{"access_token": "***", "expires_in": 7200}`,
		"ACCESS_TOKEN=abc;":               "ACCESS_TOKEN=***;",
		"invalid access_token, hint: [1]": "invalid access_token, hint: [1]",
		"nothing here":                    "nothing here",
	}
	for in, want := range cases {
		if got := wecom.RedactCredentials(in); got != want {
			t.Errorf("RedactCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}

// RedactCredentials never panics, and a token value given as a parameter
// never survives it.
func FuzzRedactCredentials(f *testing.F) {
	f.Add("Post \"https://h/cgi-bin/message/send?access_token=TOK&x=1\": EOF", "TOKENVALUE")
	f.Add(`{"corpsecret": "s"}`, "S3CRET")
	f.Fuzz(func(t *testing.T, text, value string) {
		wecom.RedactCredentials(text)
		if len(value) < 8 || strings.ContainsAny(value, " \t\r\n\f&\"',;)]}=:") || strings.Contains(text, value) {
			return
		}
		for _, form := range []string{"access_token=", "corpsecret=", `"access_token": "`} {
			got := wecom.RedactCredentials(text + " " + form + value)
			if strings.Contains(got, value) {
				t.Fatalf("%q survives in %q", value, got)
			}
		}
	})
}
