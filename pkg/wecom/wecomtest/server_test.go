package wecomtest

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func call(t *testing.T, s *Server, method, path string, q url.Values, ct string, body []byte) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := s.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: decode: %v", method, path, err)
	}
	return out
}

func code(m map[string]any) int {
	f, _ := m["errcode"].(float64)
	return int(f)
}

func TestServerErrors(t *testing.T) {
	s := NewServer("corp", "secret", 7)
	defer s.Close()
	if got := code(call(t, s, "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"other"}, "corpsecret": {"secret"}}, "", nil)); got != CodeInvalidCorpID {
		t.Fatalf("wrong corpid: %d", got)
	}
	if got := code(call(t, s, "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"corp"}, "corpsecret": {"x"}}, "", nil)); got != CodeInvalidCredential {
		t.Fatalf("wrong secret: %d", got)
	}
	ok := call(t, s, "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"corp"}, "corpsecret": {"secret"}}, "", nil)
	tok, _ := ok["access_token"].(string)
	if code(ok) != 0 || tok == "" || ok["expires_in"].(float64) != 7200 {
		t.Fatalf("gettoken = %v", ok)
	}
	auth := url.Values{"access_token": {tok}}
	send := func(v any) int {
		b, _ := json.Marshal(v)
		return code(call(t, s, "POST", "/cgi-bin/message/send", auth, "application/json", b))
	}
	text := func(content string) map[string]any {
		return map[string]any{"touser": "u", "msgtype": "text", "agentid": 7, "text": map[string]string{"content": content}}
	}
	tests := []struct {
		name string
		body any
		want int
	}{
		{"ok", text("hi"), 0},
		{"too long", text(strings.Repeat("x", 2049)), CodeContentTooLong},
		{"empty", text(""), CodeEmptyContent},
		{"wrong agent", map[string]any{"touser": "u", "msgtype": "text", "agentid": 8, "text": map[string]string{"content": "x"}}, CodeInvalidAgentID},
		{"bad type", map[string]any{"touser": "u", "msgtype": "hologram", "agentid": 7}, CodeInvalidMsgType},
		{"unknown media", map[string]any{"touser": "u", "msgtype": "image", "agentid": 7, "image": map[string]string{"media_id": "x"}}, CodeInvalidMediaID},
	}
	for _, tt := range tests {
		if got := send(tt.body); got != tt.want {
			t.Errorf("%s: errcode %d, want %d", tt.name, got, tt.want)
		}
	}
	if n := len(s.Messages()); n != 1 {
		t.Fatalf("recorded %d messages, want 1", n)
	}
	if got := code(call(t, s, "POST", "/cgi-bin/message/send", url.Values{"access_token": {"bogus"}}, "", nil)); got != CodeInvalidToken {
		t.Fatalf("bogus token: %d", got)
	}
	s.ExpireTokens()
	if got := send(text("hi")); got != CodeTokenExpired {
		t.Fatalf("expired token: %d", got)
	}
}

func TestServerUpload(t *testing.T) {
	s := NewServer("corp", "secret", 0)
	defer s.Close()
	ok := call(t, s, "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"corp"}, "corpsecret": {"secret"}}, "", nil)
	tok := ok["access_token"].(string)
	upload := func(kind string, data []byte) map[string]any {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		w, _ := mw.CreateFormFile("media", "a.bin")
		w.Write(data)
		mw.Close()
		return call(t, s, "POST", "/cgi-bin/media/upload", url.Values{"access_token": {tok}, "type": {kind}}, mw.FormDataContentType(), buf.Bytes())
	}
	if got := code(upload("sticker", []byte("12345"))); got != CodeInvalidMediaType {
		t.Fatalf("bad type: %d", got)
	}
	if got := code(upload("file", []byte("1234"))); got != CodeInvalidFileSize {
		t.Fatalf("tiny: %d", got)
	}
	if got := code(upload("voice", make([]byte, 2<<20+1))); got != CodeInvalidVoiceSize {
		t.Fatalf("big voice: %d", got)
	}
	res := upload("file", []byte("hello"))
	id, _ := res["media_id"].(string)
	if m, found := s.Media(id); code(res) != 0 || !found || string(m.Data) != "hello" || m.Filename != "a.bin" {
		t.Fatalf("upload = %v, stored %+v", res, m)
	}
}

// The duplicate check compares the whole request JSON (not its spelling):
// reordered keys and spacing are the same request; the check fields are
// part of it. The default interval is 1800 s and a longer one than four
// hours is cut to four hours. A drop answers errcode 0 with the first
// delivery's msgid.
func TestServerDuplicateCheck(t *testing.T) {
	s := NewServer("corp", "secret", 7)
	defer s.Close()
	now := time.Unix(1_700_000_000, 0)
	s.SetClock(func() time.Time { return now })
	tok := call(t, s, "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"corp"}, "corpsecret": {"secret"}}, "", nil)["access_token"].(string)
	send := func(body string) map[string]any {
		return call(t, s, "POST", "/cgi-bin/message/send", url.Values{"access_token": {tok}}, "application/json", []byte(body))
	}
	first := send(`{"touser":"u","msgtype":"text","agentid":7,"text":{"content":"hi"},"enable_duplicate_check":1}`)
	again := send(`{ "agentid": 7, "enable_duplicate_check": 1, "text": {"content": "hi"}, "msgtype": "text", "touser": "u" }`)
	if code(first) != 0 || code(again) != 0 || again["msgid"] != first["msgid"] {
		t.Fatalf("first %v, again %v", first, again)
	}
	if n := s.Delivered("u", "hi"); n != 1 || len(s.Dropped()) != 1 {
		t.Fatalf("delivered %d, dropped %d", n, len(s.Dropped()))
	}
	// Without the check, the same message is delivered.
	send(`{"touser":"u","msgtype":"text","agentid":7,"text":{"content":"hi"}}`)
	if n := s.Delivered("u", "hi"); n != 2 {
		t.Fatalf("delivered %d, want 2", n)
	}
	now = now.Add(1799 * time.Second) // default interval: 1800 s
	send(`{"touser":"u","msgtype":"text","agentid":7,"text":{"content":"hi"},"enable_duplicate_check":1}`)
	if n := s.Delivered("u", "hi"); n != 2 {
		t.Fatalf("1799 s later: delivered %d, want 2", n)
	}
	now = now.Add(time.Second)
	send(`{"touser":"u","msgtype":"text","agentid":7,"text":{"content":"hi"},"enable_duplicate_check":1}`)
	if n := s.Delivered("u", "hi"); n != 3 {
		t.Fatalf("1800 s later: delivered %d, want 3", n)
	}
	long := `{"touser":"u","msgtype":"text","agentid":7,"text":{"content":"x"},"enable_duplicate_check":1,"duplicate_check_interval":86400}`
	send(long)
	now = now.Add(4*time.Hour - time.Second)
	send(long)
	now = now.Add(time.Second)
	send(long)
	if n := s.Delivered("u", "x"); n != 2 {
		t.Fatalf("interval capped at 4 h: delivered %d, want 2", n)
	}
	d := s.Deliveries()
	if d[Delivery{ToUser: "u", MsgType: "text", Content: "hi"}] != 3 || d[Delivery{ToUser: "u", MsgType: "text", Content: "x"}] != 2 {
		t.Fatalf("deliveries = %v", d)
	}
}

// A slow send has delivered before it answers; a caller that gives up
// still leaves the delivery behind.
func TestServerSendDelay(t *testing.T) {
	s := NewServer("corp", "secret", 0)
	defer s.Close()
	s.SetSendDelay(time.Hour)
	c := s.NewClient()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.SendText(ctx, "u", "slow") }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Delivered("u", "slow") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("never delivered")
		}
		time.Sleep(time.Millisecond) // poll
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled send reported success")
	}
}
