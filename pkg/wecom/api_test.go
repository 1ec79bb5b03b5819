package wecom_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

const (
	corpID  = "wwcorp0001"
	secret  = "s3cr3t-DO-NOT-LOG"
	agentID = 1000002
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sleeper records retry delays without sleeping.
type sleeper struct {
	mu sync.Mutex
	ds []time.Duration
}

func (s *sleeper) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ds = append(s.ds, d)
	return ctx.Err()
}

func (s *sleeper) Delays() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.ds...)
}

type env struct {
	srv   *wecomtest.Server
	c     *wecom.Client
	clock *clock
	sleep *sleeper
	logs  *bytes.Buffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := wecomtest.NewServer(corpID, secret, agentID)
	t.Cleanup(srv.Close)
	e := &env{srv: srv, clock: &clock{t: time.Unix(1_700_000_000, 0)}, sleep: &sleeper{}, logs: &bytes.Buffer{}}
	e.c = srv.NewClient()
	e.c.Now = e.clock.Now
	e.c.Sleep = e.sleep.Sleep
	e.c.Logger = slog.New(slog.NewTextHandler(&lockedWriter{w: e.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return e
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// checkNoSecrets fails when the secret or an access token shows up in s.
func checkNoSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, bad := range []string{secret, "access_token=", "corpsecret="} {
		if strings.Contains(s, bad) {
			t.Fatalf("%s leaks %q: %s", what, bad, s)
		}
	}
}

func TestSendTextAndTokenCache(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, s := range []string{"one", "two <b>&", "三"} {
		if err := e.c.SendText(ctx, "alice", s); err != nil {
			t.Fatalf("SendText(%q): %v", s, err)
		}
	}
	msgs := e.srv.Messages()
	if len(msgs) != 3 || msgs[0].Content != "one" || msgs[1].Content != "two <b>&" || msgs[2].Content != "三" {
		t.Fatalf("messages = %+v", msgs)
	}
	if m := msgs[0]; m.ToUser != "alice" || m.MsgType != "text" || m.AgentID != agentID {
		t.Fatalf("message = %+v", m)
	}
	if n := e.srv.TokenRequests(); n != 1 {
		t.Fatalf("token requests = %d, want 1 (cached)", n)
	}
	checkNoSecrets(t, "logs", e.logs.String())
}

func TestTokenRefreshedBeforeExpiry(t *testing.T) {
	tests := []struct {
		name      string
		expiresIn int
		keep      time.Duration // still cached after this long
		refresh   time.Duration // refreshed after this long
	}{
		{"default lifetime, 5 min margin", 7200, 6899 * time.Second, 6900 * time.Second},
		{"short lifetime, tenth margin", 60, 53 * time.Second, 54 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.srv.SetExpiresIn(tt.expiresIn)
			ctx := context.Background()
			send := func() {
				t.Helper()
				if err := e.c.SendText(ctx, "alice", "hi"); err != nil {
					t.Fatalf("SendText: %v", err)
				}
			}
			send()
			e.clock.Advance(tt.keep)
			send()
			if n := e.srv.TokenRequests(); n != 1 {
				t.Fatalf("after %s: token requests = %d, want 1", tt.keep, n)
			}
			e.clock.Advance(tt.refresh - tt.keep)
			send()
			if n := e.srv.TokenRequests(); n != 2 {
				t.Fatalf("after %s: token requests = %d, want 2", tt.refresh, n)
			}
		})
	}
}

func TestExpiredTokenRetriedOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.c.SendText(ctx, "alice", "a"); err != nil {
		t.Fatal(err)
	}
	e.srv.ExpireTokens() // server-side: the cached token now answers 42001
	if err := e.c.SendText(ctx, "alice", "b"); err != nil {
		t.Fatalf("SendText after expiry: %v", err)
	}
	if n := e.srv.TokenRequests(); n != 2 {
		t.Fatalf("token requests = %d, want 2", n)
	}
	if n := len(e.srv.Messages()); n != 2 {
		t.Fatalf("messages = %d, want 2", n)
	}
	if d := e.sleep.Delays(); len(d) != 0 {
		t.Fatalf("token refresh slept %v", d)
	}
}

func TestTokenInvalidTwiceGivesUp(t *testing.T) {
	for _, code := range []int{40014, 42001, 40001} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			e := newEnv(t)
			e.srv.FailNext(wecomtest.EndpointSend, code, 5)
			err := e.c.SendText(context.Background(), "alice", "hi")
			if !errors.Is(err, wecom.ErrTokenInvalid) {
				t.Fatalf("err = %v, want ErrTokenInvalid", err)
			}
			if n := e.srv.TokenRequests(); n != 2 {
				t.Fatalf("token requests = %d, want 2 (one refresh)", n)
			}
		})
	}
}

func TestWrongSecret(t *testing.T) {
	e := newEnv(t)
	e.c.CorpSecret = "wrong-" + secret
	err := e.c.SendText(context.Background(), "alice", "hi")
	var api *wecom.APIError
	if !errors.As(err, &api) || api.Code != 40001 {
		t.Fatalf("err = %v, want APIError 40001", err)
	}
	if n := e.srv.TokenRequests(); n != 1 {
		t.Fatalf("token requests = %d, want 1 (no retry)", n)
	}
	checkNoSecrets(t, "error", err.Error())
	checkNoSecrets(t, "logs", e.logs.String())
}

func TestConcurrentSendsShareOneToken(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() { errs <- e.c.SendText(context.Background(), "alice", fmt.Sprint("m", i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := e.srv.TokenRequests(); n != 1 {
		t.Fatalf("token requests = %d, want 1", n)
	}
	if n := len(e.srv.Messages()); n != 16 {
		t.Fatalf("messages = %d, want 16", n)
	}
}

// gatedTransport holds gettoken requests until released, so concurrent
// callers really overlap on the token fetch.
type gatedTransport struct {
	base    http.RoundTripper
	arrived chan struct{}
	release chan struct{}
}

func (g *gatedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/gettoken") {
		g.arrived <- struct{}{}
		<-g.release
	}
	return g.base.RoundTrip(r)
}

func TestSingleFlightTokenFetch(t *testing.T) {
	e := newEnv(t)
	gt := &gatedTransport{base: e.srv.HTTPClient().Transport, arrived: make(chan struct{}, 16), release: make(chan struct{})}
	e.c.HTTP = &http.Client{Transport: gt}
	const n = 8
	errs := make(chan error, n)
	var wg sync.WaitGroup
	wg.Go(func() { errs <- e.c.SendText(context.Background(), "alice", "first") })
	<-gt.arrived // the first caller is fetching; the rest must wait for it
	for range n - 1 {
		wg.Go(func() { errs <- e.c.SendText(context.Background(), "alice", "more") })
	}
	close(gt.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := e.srv.TokenRequests(); got != 1 {
		t.Fatalf("token requests = %d, want 1", got)
	}
}

func TestRetryableErrors(t *testing.T) {
	tests := []struct {
		name     string
		fail     func(s *wecomtest.Server)
		sleeps   int
		wantErr  error // nil = success
		wantSent int
	}{
		{"45009 twice", func(s *wecomtest.Server) { s.FailNext(wecomtest.EndpointSend, 45009, 2) }, 2, nil, 1},
		{"45033 once", func(s *wecomtest.Server) { s.FailNext(wecomtest.EndpointSend, 45033, 1) }, 1, nil, 1},
		{"system busy", func(s *wecomtest.Server) { s.FailNext(wecomtest.EndpointSend, -1, 1) }, 1, nil, 1},
		{"502", func(s *wecomtest.Server) { s.FailStatusNext(wecomtest.EndpointSend, 502, 1) }, 1, nil, 1},
		{"gettoken busy", func(s *wecomtest.Server) { s.FailNext(wecomtest.EndpointToken, -1, 1) }, 1, nil, 1},
		{"45009 forever", func(s *wecomtest.Server) { s.FailNext(wecomtest.EndpointSend, 45009, 100) }, 3, wecom.ErrRateLimited, 0},
		{"45002 not retried", func(s *wecomtest.Server) { s.FailNext(wecomtest.EndpointSend, 45002, 1) }, 0, wecom.ErrContentTooLong, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			tt.fail(e.srv)
			err := e.c.SendText(context.Background(), "alice", "hi")
			if tt.wantErr == nil && err != nil || !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if d := e.sleep.Delays(); len(d) != tt.sleeps {
				t.Fatalf("slept %v, want %d sleeps", d, tt.sleeps)
			}
			if n := len(e.srv.Messages()); n != tt.wantSent {
				t.Fatalf("sent %d, want %d", n, tt.wantSent)
			}
		})
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	e := newEnv(t)
	e.c.MaxAttempts = 6
	e.srv.FailNext(wecomtest.EndpointSend, 45009, 100)
	_ = e.c.SendText(context.Background(), "alice", "hi")
	d := e.sleep.Delays()
	if len(d) != 5 {
		t.Fatalf("slept %d times, want 5", len(d))
	}
	base := 500 * time.Millisecond
	for i, got := range d {
		full := min(base<<i, 10*time.Second)
		if got < full/2 || got > full {
			t.Errorf("delay %d = %s, want in [%s, %s]", i, got, full/2, full)
		}
	}
}

func TestNonRetryableStatus(t *testing.T) {
	e := newEnv(t)
	e.srv.FailStatusNext(wecomtest.EndpointSend, 404, 1)
	if err := e.c.SendText(context.Background(), "alice", "hi"); err == nil {
		t.Fatal("want error")
	}
	if d := e.sleep.Delays(); len(d) != 0 {
		t.Fatalf("404 retried: %v", d)
	}
}

func TestContextCancelStopsRetry(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	e.c.Sleep = func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }
	e.srv.FailNext(wecomtest.EndpointSend, 45009, 100)
	err := e.c.SendText(ctx, "alice", "hi")
	if !errors.Is(err, wecom.ErrRateLimited) || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("err = %v", err)
	}
}

// failTransport fails message/send at the transport level.
type failTransport struct{ base http.RoundTripper }

func (f failTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/message/send") {
		return nil, errors.New("connection reset")
	}
	return f.base.RoundTrip(r)
}

func TestNetworkErrorRetriedAndRedacted(t *testing.T) {
	e := newEnv(t)
	e.c.HTTP = &http.Client{Transport: failTransport{base: e.srv.HTTPClient().Transport}}
	err := e.c.SendText(context.Background(), "alice", "hi")
	if err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("err = %v", err)
	}
	if d := e.sleep.Delays(); len(d) != 3 {
		t.Fatalf("slept %d times, want 3", len(d))
	}
	checkNoSecrets(t, "error", err.Error())
	checkNoSecrets(t, "logs", e.logs.String())

	// gettoken failing at the transport: its URL holds the secret.
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	c := &wecom.Client{BaseURL: srv.URL, CorpID: corpID, CorpSecret: secret,
		Sleep: func(ctx context.Context, _ time.Duration) error { return nil }}
	err = c.SendText(context.Background(), "alice", "hi")
	if err == nil {
		t.Fatal("want error")
	}
	checkNoSecrets(t, "error", err.Error())
}

func TestSendLocalChecks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"text too long", func() error { return e.c.SendText(ctx, "alice", strings.Repeat("字", 683)) }, wecom.ErrContentTooLong},
		{"markdown too long", func() error { return e.c.SendMarkdown(ctx, "alice", strings.Repeat("x", 2049)) }, wecom.ErrContentTooLong},
		{"empty text", func() error { return e.c.SendText(ctx, "alice", " \n") }, nil},
		{"no recipient", func() error { return e.c.SendText(ctx, "", "hi") }, nil},
		{"unknown media kind", func() error { return e.c.SendMedia(ctx, "alice", "gif", "m") }, nil},
		{"empty media id", func() error { return e.c.SendMedia(ctx, "alice", wecom.MediaImage, "") }, nil},
		{"no articles", func() error { return e.c.SendNews(ctx, "alice") }, nil},
		{"nine articles", func() error {
			return e.c.SendNews(ctx, "alice", make([]wecom.Article, 9)...)
		}, nil},
		{"article without url", func() error { return e.c.SendLink(ctx, "alice", "t", "d", "", "") }, nil},
		{"long title", func() error { return e.c.SendLink(ctx, "alice", strings.Repeat("t", 129), "", "http://x", "") }, wecom.ErrContentTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if n := e.srv.TokenRequests(); n != 0 {
		t.Fatalf("local checks made %d token requests", n)
	}
	// Exactly at the limit is fine.
	if err := e.c.SendText(ctx, "alice", strings.Repeat("x", wecom.MaxTextBytes)); err != nil {
		t.Fatalf("SendText(2048 bytes): %v", err)
	}
}

func TestSendKinds(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.srv.PutMedia("IMG", wecomtest.Media{Kind: "image", Filename: "a.png", Data: []byte("12345")})
	e.srv.PutMedia("VID", wecomtest.Media{Kind: "video", Filename: "a.mp4", Data: []byte("12345")})
	steps := []func() error{
		func() error { return e.c.SendMarkdown(ctx, "alice", "**bold**") },
		func() error { return e.c.SendMedia(ctx, "alice", wecom.MediaImage, "IMG") },
		func() error { return e.c.SendVideo(ctx, "alice", "VID", "Title", "Desc") },
		func() error {
			return e.c.SendLink(ctx, "alice", "News", "about", "http://example.invalid/a", "http://p")
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	m := e.srv.Messages()
	if len(m) != 4 {
		t.Fatalf("messages = %+v", m)
	}
	if m[0].MsgType != "markdown" || m[0].Content != "**bold**" {
		t.Errorf("markdown = %+v", m[0])
	}
	if m[1].MsgType != "image" || m[1].MediaID != "IMG" {
		t.Errorf("image = %+v", m[1])
	}
	if m[2].MsgType != "video" || m[2].MediaID != "VID" || m[2].Title != "Title" || m[2].Description != "Desc" {
		t.Errorf("video = %+v", m[2])
	}
	want := wecom.Article{Title: "News", Description: "about", URL: "http://example.invalid/a", PicURL: "http://p"}
	if m[3].MsgType != "news" || len(m[3].Articles) != 1 || m[3].Articles[0] != want {
		t.Errorf("news = %+v", m[3])
	}
	// Unknown media id: the server's 40007 comes back as an APIError.
	err := e.c.SendMedia(ctx, "alice", wecom.MediaFile, "NOPE")
	var api *wecom.APIError
	if !errors.As(err, &api) || api.Code != wecom.CodeInvalidMediaID {
		t.Fatalf("err = %v, want 40007", err)
	}
}

func TestInvalidUser(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/gettoken") {
			io.WriteString(w, `{"errcode":0,"errmsg":"ok","access_token":"T","expires_in":7200}`)
			return
		}
		io.WriteString(w, `{"errcode":0,"errmsg":"ok","invaliduser":"ghost","msgid":"1"}`)
	}))
	defer srv.Close()
	c := &wecom.Client{BaseURL: srv.URL, CorpID: corpID, CorpSecret: secret}
	if err := c.SendText(context.Background(), "ghost", "hi"); !errors.Is(err, wecom.ErrInvalidUser) {
		t.Fatalf("err = %v, want ErrInvalidUser", err)
	}
}

// noRead fails the test if the upload reads it.
type noRead struct{ t *testing.T }

func (n noRead) Read([]byte) (int, error) {
	n.t.Error("reader was read before limits were checked")
	return 0, io.EOF
}

func TestUploadLimitsCheckedFirst(t *testing.T) {
	const mb = 1 << 20
	tests := []struct {
		kind, name string
		size       int64
		ok         bool
	}{
		{"image", "a.jpg", 10 * mb, true},
		{"image", "a.JPEG", 5, true},
		{"image", "a.png", 10*mb + 1, false},
		{"image", "a.gif", 100, false},
		{"image", "a.jpg", 4, false},
		{"voice", "a.amr", 2 * mb, true},
		{"voice", "a.amr", 2*mb + 1, false},
		{"voice", "a.mp3", 100, false},
		{"video", "a.mp4", 10 * mb, true},
		{"video", "a.mp4", 10*mb + 1, false},
		{"video", "a.mov", 100, false},
		{"file", "a.anything", 20 * mb, true},
		{"file", "noext", 20*mb + 1, false},
		{"file", "", 100, false},
		{"sticker", "a.png", 100, false},
		{"file", "a.txt", -1, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.kind, "/", tt.name, "/", tt.size), func(t *testing.T) {
			err := wecom.CheckMedia(tt.kind, tt.name, tt.size)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckMedia = %v, want ok=%v", err, tt.ok)
			}
			if tt.ok {
				return
			}
			e := newEnv(t)
			_, err = e.c.UploadMedia(context.Background(), tt.kind, tt.name, noRead{t}, tt.size)
			if err == nil {
				t.Fatal("UploadMedia = nil error")
			}
			if n := e.srv.TokenRequests(); n != 0 {
				t.Fatalf("rejected upload made %d token requests", n)
			}
		})
	}
}

func TestUploadAndGetMedia(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	data := []byte("\x89PNG fake image bytes")
	id, err := e.c.UploadMedia(ctx, wecom.MediaImage, `my "pic".png`, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("UploadMedia: %v", err)
	}
	stored, ok := e.srv.Media(id)
	if !ok || !bytes.Equal(stored.Data, data) || stored.Filename != `my "pic".png` || stored.Kind != "image" {
		t.Fatalf("stored = %+v, %v", stored, ok)
	}
	got, ct, name, err := e.c.GetMedia(ctx, id, 1<<20)
	if err != nil {
		t.Fatalf("GetMedia: %v", err)
	}
	if !bytes.Equal(got, data) || ct != "image/png" || name != `my "pic".png` {
		t.Fatalf("GetMedia = %q, %q, %q", got, ct, name)
	}
	if err := e.c.SendMedia(ctx, "alice", wecom.MediaImage, id); err != nil {
		t.Fatalf("SendMedia(uploaded): %v", err)
	}
	// Declared size disagreeing with the reader.
	if _, err := e.c.UploadMedia(ctx, wecom.MediaFile, "a.txt", strings.NewReader("123456"), 5); err == nil {
		t.Fatal("UploadMedia(longer than declared) = nil error")
	}
	if _, err := e.c.UploadMedia(ctx, wecom.MediaFile, "a.txt", strings.NewReader("12345"), 6); err == nil {
		t.Fatal("UploadMedia(shorter than declared) = nil error")
	}
	// A rate-limited upload is resent whole.
	e.srv.FailNext(wecomtest.EndpointUpload, 45009, 1)
	id2, err := e.c.UploadMedia(ctx, wecom.MediaFile, "a.txt", strings.NewReader("hello world"), 11)
	if err != nil {
		t.Fatalf("UploadMedia after 45009: %v", err)
	}
	if m, _ := e.srv.Media(id2); string(m.Data) != "hello world" {
		t.Fatalf("resent upload stored %q", m.Data)
	}
}

func TestGetMediaErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.srv.PutMedia("BIG", wecomtest.Media{Filename: "big.bin", Data: make([]byte, 1000)})
	e.srv.PutMedia("EVIL", wecomtest.Media{Filename: "../../etc/passwd", ContentType: "text/plain", Data: []byte("x")})
	e.srv.PutMedia("CJK", wecomtest.Media{Filename: "报告.pdf", ContentType: "application/pdf", Data: []byte("%PDF")})
	e.srv.PutMedia("JSONFILE", wecomtest.Media{Filename: "data.json", ContentType: "application/json", Data: []byte(`{"errcode":1}`)})

	_, _, _, err := e.c.GetMedia(ctx, "NOPE", 100)
	var api *wecom.APIError
	if !errors.As(err, &api) || api.Code != 40007 {
		t.Fatalf("unknown id: err = %v, want 40007", err)
	}
	if _, _, _, err := e.c.GetMedia(ctx, "BIG", 999); !errors.Is(err, wecom.ErrMediaSize) {
		t.Fatalf("too big: err = %v", err)
	}
	if _, _, name, err := e.c.GetMedia(ctx, "EVIL", 100); err != nil || name != "passwd" {
		t.Fatalf("path in filename: %q, %v", name, err)
	}
	if _, _, name, err := e.c.GetMedia(ctx, "CJK", 100); err != nil || name != "报告.pdf" {
		t.Fatalf("CJK filename: %q, %v", name, err)
	}
	// A real JSON file (with Content-Disposition) is data, not an error.
	if data, _, _, err := e.c.GetMedia(ctx, "JSONFILE", 100); err != nil || string(data) != `{"errcode":1}` {
		t.Fatalf("json file: %q, %v", data, err)
	}
	// An expired token on media/get is refreshed.
	e.srv.ExpireTokens()
	if _, _, _, err := e.c.GetMedia(ctx, "CJK", 100); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if _, _, _, err := e.c.GetMedia(ctx, "", 100); err == nil {
		t.Fatal("empty id: nil error")
	}
	if _, _, _, err := e.c.GetMedia(ctx, "CJK", 0); err == nil {
		t.Fatal("maxBytes 0: nil error")
	}
}

// A JSON error served as text/plain, octet-stream or without a type is
// still detected.
func TestGetMediaJSONErrorBodies(t *testing.T) {
	for _, ct := range []string{"text/plain", "application/octet-stream", ""} {
		t.Run(ct, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/gettoken") {
					io.WriteString(w, `{"errcode":0,"errmsg":"ok","access_token":"T","expires_in":7200}`)
					return
				}
				w.Header()["Content-Type"] = []string{ct}
				io.WriteString(w, `{"errcode":40007,"errmsg":"invalid media_id"}`)
			}))
			defer srv.Close()
			c := &wecom.Client{BaseURL: srv.URL, CorpID: corpID, CorpSecret: secret}
			_, _, _, err := c.GetMedia(context.Background(), "X", 10) // smaller than the JSON
			var api *wecom.APIError
			if !errors.As(err, &api) || api.Code != 40007 {
				t.Fatalf("err = %v, want 40007", err)
			}
		})
	}
}

func TestCallbackHelpers(t *testing.T) {
	c, err := wecom.NewCrypto("tok", "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C", corpID)
	if err != nil {
		t.Fatal(err)
	}
	in := &wecom.Message{ToUserName: corpID, FromUserName: "alice", CreateTime: 1_700_000_000,
		MsgType: wecom.MsgText, Content: "hi & <bye>", MsgID: "99", AgentID: agentID}
	req, err := wecomtest.CallbackRequest(c, "http://agent.invalid/wecom/callback", in, "1700000000", "n1")
	if err != nil {
		t.Fatal(err)
	}
	q, err := wecom.ParseQuery(req.URL.RawQuery)
	if err != nil {
		t.Fatal(err)
	}
	if err := wecom.CheckTimestamp(q.Timestamp, time.Unix(1_700_000_010, 0), time.Minute); err != nil {
		t.Fatal(err)
	}
	body, err := wecom.ReadBody(req.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.DecryptMessage(q.MsgSignature, q.Timestamp, q.Nonce, body)
	if err != nil {
		t.Fatalf("DecryptMessage: %v", err)
	}
	got.XMLName = in.XMLName
	if *got != *in {
		t.Fatalf("got %+v, want %+v", got, in)
	}

	for _, rawPlus := range []bool{false, true} {
		req, err := wecomtest.VerifyRequest(c, "http://agent.invalid/wecom/callback", "echo-123", "1700000000", "n2", rawPlus)
		if err != nil {
			t.Fatal(err)
		}
		// Both the lossy Query() and ParseQuery(RawQuery) work.
		uq := req.URL.Query()
		plain, err := c.VerifyURL(uq.Get("msg_signature"), uq.Get("timestamp"), uq.Get("nonce"), uq.Get("echostr"))
		if err != nil || string(plain) != "echo-123" {
			t.Fatalf("rawPlus=%v: VerifyURL(Query) = %q, %v", rawPlus, plain, err)
		}
		pq, _ := wecom.ParseQuery(req.URL.RawQuery)
		plain, err = c.VerifyURL(pq.MsgSignature, pq.Timestamp, pq.Nonce, pq.EchoStr)
		if err != nil || string(plain) != "echo-123" {
			t.Fatalf("rawPlus=%v: VerifyURL(ParseQuery) = %q, %v", rawPlus, plain, err)
		}
	}
}

func TestAPIErrorIs(t *testing.T) {
	tests := []struct {
		code      int
		sentinel  error
		retryable bool
	}{
		{45009, wecom.ErrRateLimited, true},
		{45033, wecom.ErrRateLimited, true},
		{-1, nil, true},
		{40014, wecom.ErrTokenInvalid, false},
		{42001, wecom.ErrTokenInvalid, false},
		{40001, wecom.ErrTokenInvalid, false},
		{45002, wecom.ErrContentTooLong, false},
		{40007, nil, false},
	}
	for _, tt := range tests {
		err := fmt.Errorf("wrapped: %w", &wecom.APIError{Code: tt.code, Msg: "m"})
		if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
			t.Errorf("%d is not %v", tt.code, tt.sentinel)
		}
		for _, other := range []error{wecom.ErrRateLimited, wecom.ErrTokenInvalid, wecom.ErrContentTooLong} {
			if other != tt.sentinel && errors.Is(err, other) {
				t.Errorf("%d wrongly is %v", tt.code, other)
			}
		}
		var api *wecom.APIError
		if errors.As(err, &api); api.Retryable() != tt.retryable {
			t.Errorf("%d Retryable = %v", tt.code, api.Retryable())
		}
	}
}
