package aibot_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
)

type got struct {
	mu     sync.Mutex
	frames []aibot.Frame
	ch     chan aibot.Frame
}

func start(t *testing.T, srv *aibottest.Server, mod func(*aibot.Config)) (*aibot.Client, *got) {
	t.Helper()
	g := &got{ch: make(chan aibot.Frame, 64)}
	cfg := aibot.Config{URL: srv.URL(), BotID: aibottest.BotID, Secret: aibottest.Secret,
		Heartbeat: time.Hour, AckTimeout: 2 * time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Handle: func(_ context.Context, f aibot.Frame) {
			g.mu.Lock()
			g.frames = append(g.frames, f)
			g.mu.Unlock()
			g.ch <- f
		}}
	if mod != nil {
		mod(&cfg)
	}
	c := aibot.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if s := c.Status(); s.State != aibot.StateStopped {
			t.Errorf("state after stop: %s", s.State)
		}
	})
	return c, g
}

func waitState(t *testing.T, c *aibot.Client, state string) aibot.Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := c.Status()
		if s.State == state {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %s, want %s (last error %q)", s.State, state, s.LastError)
		}
		time.Sleep(5 * time.Millisecond) // polling the client's state
	}
}

func TestSubscribeCallbacksRepliesAndPush(t *testing.T) {
	srv := aibottest.New(t)
	c, g := start(t, srv, nil)
	waitState(t, c, aibot.StateReady)
	sub := srv.Frames(aibot.CmdSubscribe)
	if len(sub) != 1 || !strings.Contains(string(sub[0].Body), `"bot_id":"bot-test-1"`) || !strings.HasPrefix(sub[0].Headers.ReqID, "aibot_subscribe_") {
		t.Fatalf("subscribe frames: %+v", sub)
	}
	reqID := srv.Text("m1", "zhangsan", "single", "", "hello")
	f := <-g.ch
	m, err := aibot.ParseMessage(f.Body)
	if err != nil || f.Headers.ReqID != reqID || m.MsgID != "m1" || m.From.UserID != "zhangsan" || m.Text == nil || m.Text.Content != "hello" {
		t.Fatalf("callback: %+v %+v %v", f, m, err)
	}
	ctx := context.Background()
	if err := c.Reply(ctx, reqID, aibot.CmdRespond, aibot.StreamBody("s1", "Hel", false)); err != nil {
		t.Fatal(err)
	}
	if err := c.Reply(ctx, reqID, aibot.CmdRespond, aibot.StreamBody("s1", "Hello!", true)); err != nil {
		t.Fatal(err)
	}
	rs := srv.Frames(aibot.CmdRespond)
	if len(rs) != 2 || rs[1].Headers.ReqID != reqID || !strings.Contains(string(rs[1].Body), `"finish":true`) || !strings.Contains(string(rs[1].Body), `"content":"Hello!"`) {
		t.Fatalf("replies: %+v", rs)
	}
	if err := c.Push(ctx, aibot.MarkdownPush("zhangsan", 1, "later")); err != nil {
		t.Fatal(err)
	}
	srv.FailNext(aibot.CmdSend, 846608, "chat not found")
	var werr *aibot.Error
	if err := c.Push(ctx, aibot.MarkdownPush("nobody", 1, "x")); !errors.As(err, &werr) || werr.Code != 846608 {
		t.Fatalf("push answered with an error: %v", err)
	}
	if s := c.Status(); s.FramesIn < 4 || s.FramesOut < 5 {
		t.Fatalf("counters: %+v", s)
	}
}

func TestRefusedSubscriptionIsReportedNotHammered(t *testing.T) {
	srv := aibottest.New(t)
	srv.Reject(40058, "invalid secret")
	c, _ := start(t, srv, func(cfg *aibot.Config) { cfg.RejectedBackoff = time.Hour })
	s := waitState(t, c, aibot.StateRejected)
	if !strings.Contains(s.LastError, "errcode 40058") || !strings.Contains(s.LastError, "invalid secret") {
		t.Fatalf("last error %q", s.LastError)
	}
	time.Sleep(200 * time.Millisecond) // long enough for a hammering client to redial many times
	if n := srv.Dials(); n != 1 {
		t.Fatalf("%d dials after a refused subscription, want 1", n)
	}
	if err := c.Push(context.Background(), aibot.MarkdownPush("u", 1, "x")); !errors.Is(err, aibot.ErrNotConnected) {
		t.Fatalf("push while refused: %v", err)
	}
}

func TestReconnectsAfterDropAndMissedPings(t *testing.T) {
	srv := aibottest.New(t)
	c, g := start(t, srv, func(cfg *aibot.Config) { cfg.Heartbeat = 30 * time.Millisecond })
	waitState(t, c, aibot.StateReady)
	srv.Drop()
	if !srv.WaitReady(10*time.Second) || srv.Dials() < 2 {
		t.Fatalf("no reconnect after a drop: %d dials", srv.Dials())
	}
	waitState(t, c, aibot.StateReady)
	// Callbacks flow on the new connection.
	srv.Text("m2", "lisi", "single", "", "again")
	if f := <-g.ch; !strings.Contains(string(f.Body), "again") {
		t.Fatalf("callback after reconnect: %s", f.Body)
	}
	// Pings unanswered: the connection is given up and made again.
	before := srv.Dials()
	srv.Silence(aibot.CmdPing, true)
	deadline := time.Now().Add(10 * time.Second)
	for srv.Dials() == before {
		if time.Now().After(deadline) {
			t.Fatal("unanswered pings did not end the connection")
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.Silence(aibot.CmdPing, false)
	waitState(t, c, aibot.StateReady)
	if s := c.Status(); s.Reconnects < 2 || !strings.Contains(s.LastError, "pings") {
		t.Fatalf("status: %+v", s)
	}
}

func TestReplacedConnectionWaits(t *testing.T) {
	srv := aibottest.New(t)
	c, g := start(t, srv, func(cfg *aibot.Config) { cfg.ReplacedBackoff = time.Hour })
	waitState(t, c, aibot.StateReady)
	srv.Replace()
	s := waitState(t, c, aibot.StateReplaced)
	if !strings.Contains(s.LastError, "replaced") {
		t.Fatalf("last error %q", s.LastError)
	}
	time.Sleep(200 * time.Millisecond)
	if n := srv.Dials(); n != 1 {
		t.Fatalf("%d dials after being replaced; the two connections would take turns", n)
	}
	select {
	case f := <-g.ch:
		t.Fatalf("disconnected_event handed on as a callback: %s", f.Body)
	default:
	}
}

func TestRepliesToOneReqIDGoOneAtATime(t *testing.T) {
	srv := aibottest.New(t)
	c, g := start(t, srv, func(cfg *aibot.Config) { cfg.AckTimeout = 5 * time.Second })
	waitState(t, c, aibot.StateReady)
	reqID := srv.Text("m3", "u", "single", "", "x")
	<-g.ch
	srv.Delay(300 * time.Millisecond) // every answer comes late
	errs := make(chan error, 2)
	go func() {
		errs <- c.Reply(context.Background(), reqID, aibot.CmdRespond, aibot.StreamBody("s", "a", false))
	}()
	srv.WaitFrames(context.Background(), aibot.CmdRespond, 1)
	go func() {
		errs <- c.Reply(context.Background(), reqID, aibot.CmdRespond, aibot.StreamBody("s", "ab", true))
	}()
	time.Sleep(100 * time.Millisecond) // the second must wait for the first's answer
	if n := len(srv.Frames(aibot.CmdRespond)); n != 1 {
		t.Fatalf("%d reply frames before the first was answered, want 1", n)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("reply: %v", err)
		}
	}
	if rs := srv.Frames(aibot.CmdRespond); len(rs) != 2 || !strings.Contains(string(rs[1].Body), `"content":"ab"`) {
		t.Fatalf("order: %+v", rs)
	}
}

// An answer that never comes is a timeout, not a hang.
func TestUnansweredPushTimesOut(t *testing.T) {
	srv := aibottest.New(t)
	c, _ := start(t, srv, func(cfg *aibot.Config) { cfg.AckTimeout = 200 * time.Millisecond })
	waitState(t, c, aibot.StateReady)
	srv.Silence(aibot.CmdSend, true)
	if err := c.Push(context.Background(), aibot.MarkdownPush("u", 1, "lost")); !errors.Is(err, aibot.ErrAckTimeout) {
		t.Fatalf("unanswered push: %v", err)
	}
}

func TestDecryptMedia(t *testing.T) {
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	for _, n := range []int{0, 1, 31, 32, 33, 5000} {
		plain := []byte(strings.Repeat("x", n))
		enc, err := aibot.EncryptMedia(plain, key)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := aibot.DecryptMedia(enc, strings.TrimRight(key, "="))
		if err != nil || string(dec) != string(plain) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	enc, _ := aibot.EncryptMedia([]byte("secret picture"), key)
	other := base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	for name, tc := range map[string]struct {
		data []byte
		key  string
	}{
		"wrong key":  {enc, other},
		"short key":  {enc, base64.StdEncoding.EncodeToString([]byte("short"))},
		"not base64": {enc, "%%%"},
		"cut data":   {enc[:len(enc)-3], key},
		"empty":      {nil, key},
	} {
		if _, err := aibot.DecryptMedia(tc.data, tc.key); !errors.Is(err, aibot.ErrDecrypt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDecode(t *testing.T) {
	f, err := aibot.Decode([]byte(`{"headers":{"req_id":"aibot_send_msg_1_ab"},"errcode":0,"errmsg":"ok"}`))
	if err != nil || !f.IsAnswer() || f.Err() != nil {
		t.Fatalf("answer: %+v %v", f, err)
	}
	f, _ = aibot.Decode([]byte(`{"headers":{"req_id":"x"},"errcode":40058,"errmsg":"bad"}`))
	var werr *aibot.Error
	if !errors.As(f.Err(), &werr) || werr.Code != 40058 {
		t.Fatalf("error answer: %v", f.Err())
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"cmd":"aibot_msg_callback"}`, `{"cmd":"a\u0000b","headers":{"req_id":"1"}}`,
		`{"headers":{"req_id":"` + strings.Repeat("x", 300) + `"}}`, "{\"cmd\":\"\xff\"}", `{"cmd":1}`} {
		if _, err := aibot.Decode([]byte(bad)); !errors.Is(err, aibot.ErrBadFrame) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	m, err := aibot.ParseMessage([]byte(`{"msgid":"v","msgtype":"voice","voice":{"content":"你好"}}`))
	if err != nil || m.VoiceText() != "你好" {
		t.Fatalf("voice (SDK's content): %+v %v", m, err)
	}
	m, _ = aibot.ParseMessage([]byte(`{"msgid":"v","msgtype":"voice","voice":{"text":"hi"}}`))
	if m.VoiceText() != "hi" {
		t.Fatalf("voice (text): %+v", m)
	}
}
