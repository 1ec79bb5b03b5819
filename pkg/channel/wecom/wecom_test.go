package wecom

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"agent/pkg/conversation"
	"agent/pkg/pairing"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

// The official sample's GET vector answers its bare plaintext; a wrong
// signature is 403 and nothing is stored.
func TestVerifyURL(t *testing.T) {
	r := newRig(t, "")
	r.clock.Advance(time.Unix(1409659589, 0).Sub(r.clock.Now())) // the sample's time
	const echostr = "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ=="
	for _, raw := range []string{echostr, url.QueryEscape(echostr)} {
		req := httptestRequest(t, "GET", "/wecom/callback?msg_signature=5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3&timestamp=1409659589&nonce=263014780&echostr="+raw, nil)
		if code, body := r.serve(req); code != 200 || body != "1616140317555161061" {
			t.Fatalf("verify = %d %q", code, body)
		}
	}
	req, err := wecomtest.VerifyRequest(r.crypto, "http://agent/wecom/callback", "hello", "1409659589", "1", true)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := r.serve(req); code != 200 || body != "hello" {
		t.Fatalf("verify with raw '+' = %d %q", code, body)
	}
	req = httptestRequest(t, "GET", "/wecom/callback?msg_signature=0000ff5e21c57e6ad56bac8758b79b1d9ac89fd3&timestamp=1409659589&nonce=263014780&echostr="+url.QueryEscape(echostr), nil)
	if code, _ := r.serve(req); code != http.StatusForbidden {
		t.Fatalf("bad signature: %d, want 403", code)
	}
	if n := r.count(`SELECT count(*) FROM inbox`); n != 0 {
		t.Fatalf("%d rows stored", n)
	}
}

// URL verification enforces the same timestamp window as a POST: a
// correctly signed verification recorded earlier (or stamped in the
// future) is refused 403 and its echostr is not revealed; inside the window
// it is answered, at both edges.
func TestVerifyURLTimestampWindow(t *testing.T) {
	r := newRig(t, "")
	now := r.clock.Now().Unix()
	skew := int64(DefaultMaxSkew / time.Second)
	cases := []struct {
		name string
		ts   string
		want int
	}{
		{"now", strconv.FormatInt(now, 10), http.StatusOK},
		{"oldest allowed", strconv.FormatInt(now-skew, 10), http.StatusOK},
		{"newest allowed", strconv.FormatInt(now+skew, 10), http.StatusOK},
		{"replayed an hour later", strconv.FormatInt(now-3600, 10), http.StatusForbidden},
		{"just too old", strconv.FormatInt(now-skew-1, 10), http.StatusForbidden},
		{"from the future", strconv.FormatInt(now+skew+1, 10), http.StatusForbidden},
		{"the 2014 sample", "1409659589", http.StatusForbidden},
		{"not a number", "yesterday", http.StatusForbidden},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := wecomtest.VerifyRequest(r.crypto, "http://agent/wecom/callback", "secret-echo", c.ts, strconv.Itoa(i), true)
			if err != nil {
				t.Fatal(err)
			}
			code, body := r.serve(req)
			if code != c.want {
				t.Fatalf("timestamp %s: %d %q, want %d", c.ts, code, body, c.want)
			}
			if leaked := strings.Contains(body, "secret-echo"); leaked != (c.want == http.StatusOK) {
				t.Fatalf("timestamp %s: body %q", c.ts, body)
			}
		})
	}
	// A custom MaxSkew applies to verification too.
	r.handler.MaxSkew = 30 * time.Second
	req, _ := wecomtest.VerifyRequest(r.crypto, "http://agent/wecom/callback", "e", strconv.FormatInt(now-31, 10), "x", false)
	if code, _ := r.serve(req); code != http.StatusForbidden {
		t.Fatalf("31 s old with a 30 s window: %d, want 403", code)
	}
}

func httptestRequest(t *testing.T, method, target string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, "http://agent"+target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// A message is persisted before the acknowledgement; WeCom's retry of the
// same MsgId is acknowledged and not processed again.
func TestPersistAckAndDedup(t *testing.T) {
	r := newRig(t, "")
	r.policy.Store(&pairing.Policy{Mode: pairing.Open})
	r.ok(text("alice", "1001", "hello"))
	if n := r.count(`SELECT count(*) FROM inbox WHERE dedup_key = 'msg:1001' AND state = 0 AND content = 'hello'`); n != 1 {
		t.Fatalf("stored rows: %d", n)
	}
	r.ok(text("alice", "1001", "hello")) // WeCom's retry
	if n := r.count(`SELECT count(*) FROM inbox`); n != 1 {
		t.Fatalf("duplicate stored: %d rows", n)
	}
	r.start()
	eventually(t, r.clock, time.Second, "the reply", func() bool { return len(r.sentTo("alice")) == 1 })
	r.ok(text("alice", "1001", "hello")) // a late retry after processing
	r.proc.Wake()
	r.ok(text("alice", "1002", "second"))
	eventually(t, r.clock, time.Second, "the second reply", func() bool { return len(r.sentTo("alice")) == 2 })
	if got := r.sentTo("alice"); got[0] != "echo: hello" || got[1] != "echo: second" {
		t.Fatalf("replies %q", got)
	}
	if turns := r.conv.Turns(); len(turns) != 2 || turns[0].Channel != "wecom" || turns[0].ChatType != conversation.P2P || turns[0].Sender != "alice" {
		t.Fatalf("turns %+v", turns)
	}
	if n := r.count(`SELECT count(*) FROM inbox WHERE state = 1`); n != 2 {
		t.Fatalf("done rows: %d", n)
	}
}

// Bad input is refused with a 4xx (or ignored with a log) and never stored.
func TestBadInput(t *testing.T) {
	r := newRig(t, "")
	ts := strconv.FormatInt(r.clock.Now().Unix(), 10)
	good := text("alice", "1", "hi")
	q, body, err := wecomtest.CallbackBody(r.crypto, good, ts, "n")
	if err != nil {
		t.Fatal(err)
	}
	signed := func(encrypt string) (url.Values, []byte) {
		sig := r.crypto.Signature(ts, "n", encrypt)
		env, _ := wx.EnvelopeXML(testCorpID, encrypt, testAgent)
		return url.Values{"msg_signature": {sig}, "timestamp": {ts}, "nonce": {"n"}}, env
	}
	inner := func(plain string) (url.Values, []byte) {
		enc, _, err := r.crypto.Encrypt([]byte(plain), ts, "n")
		if err != nil {
			t.Fatal(err)
		}
		return signed(enc)
	}
	other, _ := wx.NewCrypto(testToken, "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "otherCorp")
	otherEnc, _, _ := other.Encrypt([]byte("<xml/>"), ts, "n")
	foreignID, _ := wx.NewCrypto(testToken, testAESKey, "otherCorp")
	foreignEnc, _, _ := foreignID.Encrypt([]byte(`<xml><FromUserName>a</FromUserName><MsgType>text</MsgType><MsgId>9</MsgId></xml>`), ts, "n")
	stale := url.Values{}
	for k, v := range q {
		stale[k] = v
	}
	oldTS := strconv.FormatInt(r.clock.Now().Add(-time.Hour).Unix(), 10)
	qOld, bodyOld, _ := wecomtest.CallbackBody(r.crypto, good, oldTS, "n")
	type tc struct {
		name string
		q    url.Values
		body []byte
		want int
	}
	wrongSig := url.Values{"msg_signature": {strings.Repeat("0", 40)}, "timestamp": q["timestamp"], "nonce": q["nonce"]}
	qb64, bb64 := signed("!!!not base64!!!")
	qpad, bpad := signed(otherEnc)
	qrid, brid := signed(foreignEnc)
	qdtd, bdtd := inner(`<!DOCTYPE x [<!ENTITY a "aaaa">]><xml><FromUserName>&a;</FromUserName><MsgType>text</MsgType></xml>`)
	qtrunc, btrunc := inner(`<xml><FromUserName>a</FromUserName><MsgType>te`)
	qunk, bunk := inner(`<xml><FromUserName>a</FromUserName><MsgType>hologram</MsgType><MsgId>77</MsgId></xml>`)
	cases := []tc{
		{"wrong signature", wrongSig, body, 403},
		{"stale timestamp", qOld, bodyOld, 403},
		{"bad base64", qb64, bb64, 400},
		{"bad padding or key", qpad, bpad, 400},
		{"wrong receiveid", qrid, brid, 400},
		{"entity expansion", qdtd, bdtd, 400},
		{"truncated inner xml", qtrunc, btrunc, 400},
		{"truncated envelope", q, body[:len(body)/2], 400},
		{"huge body", q, bytes.Repeat([]byte("x"), wx.MaxBodyBytes+10), 413},
		{"no query", url.Values{}, body, 400},
		{"unknown MsgType", qunk, bunk, 200},
	}
	for _, c := range cases {
		req := httptestRequest(t, "POST", "/wecom/callback?"+c.q.Encode(), c.body)
		if code, _ := r.serve(req); code != c.want {
			t.Errorf("%s: status %d, want %d", c.name, code, c.want)
		}
	}
	if n := r.count(`SELECT count(*) FROM inbox`); n != 0 {
		t.Fatalf("bad input stored %d rows", n)
	}
	req := httptestRequest(t, "PUT", "/wecom/callback", nil)
	if code, _ := r.serve(req); code != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %d", code)
	}
}

// Texts of one sender within the debounce window make one turn, in order.
func TestDebounceJoins(t *testing.T) {
	r := newRig(t, "")
	r.start()
	r.ok(text("bob", "1", "first"))
	r.clock.Advance(time.Second)
	r.ok(text("bob", "2", "second"))
	r.clock.Advance(time.Second)
	r.ok(text("carol", "3", "other user"))
	eventually(t, r.clock, 500*time.Millisecond, "both turns", func() bool { return len(r.conv.Turns()) == 2 })
	eventually(t, r.clock, 500*time.Millisecond, "both replies", func() bool { return len(r.api.Messages()) == 2 })
	turns := r.conv.Turns()
	byUser := map[string]string{}
	for _, tu := range turns {
		byUser[tu.Sender] = tu.Text
	}
	if byUser["bob"] != "first\nsecond" || byUser["carol"] != "other user" {
		t.Fatalf("turns %+v", turns)
	}
}

// Under the pairing policy a stranger gets a code once; once approved they
// are answered.
func TestPairingFlow(t *testing.T) {
	r := newRig(t, "")
	r.policy.Store(&pairing.Policy{Mode: pairing.Pairing})
	r.start()
	r.ok(text("stranger", "1", "hi"))
	eventually(t, r.clock, time.Second, "the code", func() bool { return len(r.sentTo("stranger")) == 1 })
	msg := r.sentTo("stranger")[0]
	list, err := pairing.New(r.db, nil).List(context.Background())
	if err != nil || len(list) != 1 || list[0].Approved || !strings.Contains(msg, list[0].Code) {
		t.Fatalf("pending %+v %v; message %q", list, err, msg)
	}
	r.ok(text("stranger", "2", "hello?"))
	eventually(t, r.clock, time.Second, "the second message handled", func() bool {
		return r.count(`SELECT count(*) FROM inbox WHERE state = 0`) == 0
	})
	if got := r.sentTo("stranger"); len(got) != 1 || len(r.conv.Turns()) != 0 {
		t.Fatalf("after a second message: sent %q, turns %d", got, len(r.conv.Turns()))
	}
	if _, err := pairing.New(r.db, nil).Approve(context.Background(), strings.ToLower(list[0].Code), "test"); err != nil {
		t.Fatal(err)
	}
	r.ok(text("stranger", "3", "now?"))
	eventually(t, r.clock, time.Second, "an answer", func() bool { return len(r.sentTo("stranger")) == 2 })
	if got := r.sentTo("stranger")[1]; got != "echo: now?" {
		t.Fatalf("answer %q", got)
	}
	// allowlist: only allow_from; closed: nobody.
	r.policy.Store(&pairing.Policy{Mode: pairing.Allowlist, AllowFrom: []string{"wecom:dave"}})
	r.ok(text("erin", "4", "hi"))
	r.ok(text("dave", "5", "hi"))
	eventually(t, r.clock, time.Second, "dave answered", func() bool { return len(r.sentTo("dave")) == 1 })
	eventually(t, r.clock, time.Second, "erin handled", func() bool { return r.count(`SELECT count(*) FROM inbox WHERE state = 0`) == 0 })
	if len(r.sentTo("erin")) != 0 {
		t.Fatal("allowlist answered a stranger")
	}
	r.policy.Store(&pairing.Policy{Mode: pairing.Closed, AllowFrom: []string{"*"}})
	r.ok(text("dave", "6", "hi"))
	eventually(t, r.clock, time.Second, "dave handled", func() bool { return r.count(`SELECT count(*) FROM inbox WHERE state = 0`) == 0 })
	if len(r.sentTo("dave")) != 1 {
		t.Fatal("closed answered")
	}
}

// Group chats need an allow_from entry; their turns are group turns.
func TestGroupNeedsAllowlist(t *testing.T) {
	r := newRig(t, "")
	r.policy.Store(&pairing.Policy{Mode: pairing.Pairing, AllowFrom: []string{"wecom:alice"}})
	r.start()
	m := text("alice", "1", "in the group")
	m.ChatID = "chat42"
	r.ok(m)
	eventually(t, r.clock, time.Second, "handled", func() bool { return r.count(`SELECT count(*) FROM inbox WHERE state = 0`) == 0 })
	if len(r.conv.Turns()) != 0 || len(r.api.Messages()) != 0 {
		t.Fatal("a group without an allowlist entry was answered")
	}
	r.policy.Store(&pairing.Policy{Mode: pairing.Pairing, AllowFrom: []string{"group:wecom:chat42"}})
	m.MsgID, m.Content = "2", "again"
	r.ok(m)
	eventually(t, r.clock, time.Second, "group turn", func() bool { return len(r.api.Messages()) == 1 })
	if tu := r.conv.Turns()[0]; tu.ChatType != conversation.Group || tu.ChatID != "chat42" || tu.Sender != "alice" {
		t.Fatalf("turn %+v", tu)
	}
}

// A long reply arrives split at <= 2048 bytes, in order.
func TestLongReplySplitInOrder(t *testing.T) {
	r := newRig(t, "")
	var long strings.Builder
	for i := range 300 {
		long.WriteString("Sentence number " + strconv.Itoa(i) + " of a long answer. ")
	}
	r.conv.answer = func(string) []string { return []string{long.String(), "and a short one"} }
	r.start()
	r.ok(text("alice", "1", "tell me everything"))
	want := append(wx.Split(long.String(), 2048), "and a short one")
	eventually(t, r.clock, time.Second, "all pieces", func() bool { return len(r.sentTo("alice")) == len(want) })
	got := r.sentTo("alice")
	if len(want) < 4 || !slices.Equal(got, want) {
		t.Fatalf("got %d pieces, want %d in order", len(got), len(want))
	}
	for _, p := range got {
		if len(p) > 2048 {
			t.Fatalf("piece of %d bytes", len(p))
		}
	}
}

// Rate limits (45009) are retried with backoff until delivered; order is
// kept; an expired token (42001) is refreshed.
func TestRetryAndTokenExpiry(t *testing.T) {
	r := newRig(t, "")
	r.start()
	ctx := context.Background()
	r.api.FailNext(wecomtest.EndpointSend, wecomtest.CodeFreqLimit, 5) // more than the client's own 2 attempts
	if err := r.outbox.Enqueue(ctx, "alice", "one"); err != nil {
		t.Fatal(err)
	}
	if err := r.outbox.Enqueue(ctx, "alice", "two"); err != nil {
		t.Fatal(err)
	}
	eventually(t, r.clock, time.Second, "delivery after backoff", func() bool { return len(r.sentTo("alice")) == 2 })
	if got := r.sentTo("alice"); got[0] != "one" || got[1] != "two" {
		t.Fatalf("order %q", got)
	}
	if n := r.count(`SELECT attempts FROM outbox WHERE content = 'one'`); n < 3 {
		t.Fatalf("attempts of the rate-limited row: %d", n)
	}
	tokens := r.api.TokenRequests()
	r.api.ExpireTokens()
	if err := r.outbox.Enqueue(ctx, "alice", "three"); err != nil {
		t.Fatal(err)
	}
	eventually(t, r.clock, time.Second, "delivery after token expiry", func() bool { return len(r.sentTo("alice")) == 3 })
	if got := r.api.TokenRequests(); got != tokens+1 {
		t.Fatalf("token requests %d, want %d", got, tokens+1)
	}
	// A permanent error fails the row at once and the queue moves on.
	r.api.FailNext(wecomtest.EndpointSend, wecomtest.CodeInvalidParameter, 1)
	r.outbox.Enqueue(ctx, "bob", "bad")
	r.outbox.Enqueue(ctx, "bob", "good")
	eventually(t, r.clock, time.Second, "the next message", func() bool { return len(r.sentTo("bob")) == 1 })
	if n := r.count(`SELECT count(*) FROM outbox WHERE content = 'bad' AND state = 2 AND attempts = 1`); n != 1 {
		t.Fatal("permanent failure not recorded as failed after one attempt")
	}
}

// Queued replies and unprocessed messages survive a restart (close and
// reopen the same database file).
func TestSurvivesRestart(t *testing.T) {
	r := newRig(t, "")
	ctx := context.Background()
	for _, s := range []string{"a", "b", "c"} {
		if err := r.outbox.Enqueue(ctx, "alice", s); err != nil {
			t.Fatal(err)
		}
	}
	r.ok(text("bob", "1", "acknowledged before the crash"))
	r.close()
	r.open()
	r.start()
	eventually(t, r.clock, time.Second, "outbox and inbox drained", func() bool {
		return len(r.sentTo("alice")) == 3 && len(r.sentTo("bob")) == 1
	})
	if got := r.sentTo("alice"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("order %q", got)
	}
	if got := r.sentTo("bob"); got[0] != "echo: acknowledged before the crash" {
		t.Fatalf("bob %q", got)
	}
	eventually(t, nil, 0, "every row marked sent", func() bool {
		pending, sent, failed, err := r.outbox.Stats(ctx)
		return err == nil && pending == 0 && sent == 4 && failed == 0
	})
}

// A turn in flight when the processor stops is not committed; it runs again
// after the restart, and its reply goes out once.
func TestStopMidTurnReprocesses(t *testing.T) {
	r := newRig(t, "")
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	r.conv.answer = func(text string) []string {
		started <- struct{}{}
		<-release
		return []string{"late: " + text}
	}
	r.start()
	r.ok(text("alice", "1", "slow"))
	eventually(t, r.clock, time.Second, "the turn to start", func() bool { return len(r.conv.Turns()) == 1 })
	<-started
	r.stop()
	close(release)
	if n := r.count(`SELECT count(*) FROM inbox WHERE state = 0`); n != 1 {
		t.Fatalf("pending rows after stop: %d", n)
	}
	r.conv.answer = nil
	r.start()
	eventually(t, r.clock, time.Second, "the reply", func() bool { return len(r.sentTo("alice")) == 1 })
	if got := r.sentTo("alice"); got[0] != "echo: slow" {
		t.Fatalf("got %q", got)
	}
}

// A turn that runs past wecom.progress_after sends its user one short
// note at once, ahead of the answer; a quick turn sends none.
func TestProgressNoteOnLongTurn(t *testing.T) {
	release := make(chan struct{})
	r := newRig(t, "", func(pc *ProcessorConfig) { pc.ProgressAfter = func() time.Duration { return 8 * time.Second } })
	r.conv.handle = func(ctx context.Context, in conversation.Inbound, reply conversation.Reply) {
		if in.Text == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
		}
		reply(ctx, "answer to "+in.Text)
	}
	r.start()
	r.ok(text("bob", "1", "quick"))
	eventually(t, r.clock, 500*time.Millisecond, "the quick answer", func() bool { return len(r.sentTo("bob")) == 1 })
	r.clock.Advance(30 * time.Second)
	r.ok(text("bob", "2", "slow"))
	eventually(t, r.clock, 500*time.Millisecond, "the progress note", func() bool { return len(r.sentTo("bob")) == 2 })
	r.clock.Advance(time.Minute) // at most once per turn
	close(release)
	eventually(t, r.clock, 500*time.Millisecond, "the slow answer", func() bool { return len(r.sentTo("bob")) == 3 })
	got := r.sentTo("bob")
	if got[0] != "answer to quick" || got[1] != ProgressText || got[2] != "answer to slow" {
		t.Fatalf("sent %q", got)
	}
}
