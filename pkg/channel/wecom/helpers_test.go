package wecom

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/conversation"
	"agent/pkg/pairing"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
)

// The official sample's application (wecom-vectors.md).
const (
	testToken  = "QDG6eK"
	testAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	testCorpID = "wx5823bf96d3bd56c7"
	testAgent  = 1000002
)

func mustCrypto(tb testing.TB) *wx.Crypto {
	tb.Helper()
	c, err := wx.NewCrypto(testToken, testAESKey, testCorpID)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// newFakeClock is a clock the test moves by hand (timers fire on Advance).
func newFakeClock() *clock.Fake { return clock.NewFake(time.Unix(1_700_000_000, 0)) }

// eventually polls cond, advancing the fake clock by step each time, until
// it holds or a real-time deadline passes (a hung test, not a timing
// assertion).
func eventually(t *testing.T, clk *clock.Fake, step time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		if clk != nil && step > 0 {
			clk.Advance(step)
		}
		time.Sleep(2 * time.Millisecond) // poll interval
	}
}

// fakeConv answers each turn with answer(text) and records the inbound
// messages.
type fakeConv struct {
	mu     sync.Mutex
	turns  []conversation.Inbound
	answer func(text string) []string
	// handle, when set, runs the turn instead of answer (tools, ordering).
	handle func(ctx context.Context, in conversation.Inbound, reply conversation.Reply)
}

func (f *fakeConv) Handle(ctx context.Context, in conversation.Inbound, reply conversation.Reply) (<-chan struct{}, error) {
	f.mu.Lock()
	f.turns = append(f.turns, in)
	answer, handle := f.answer, f.handle
	f.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if handle != nil {
			handle(ctx, in, reply)
			return
		}
		out := []string{"echo: " + in.Text}
		if answer != nil {
			out = answer(in.Text)
		}
		for _, r := range out {
			reply(ctx, r)
		}
	}()
	return done, nil
}

func (f *fakeConv) Turns() []conversation.Inbound {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]conversation.Inbound(nil), f.turns...)
}

// rig is a channel on a temporary database with a fake API and a fake
// conversation.
type rig struct {
	t       *testing.T
	path    string
	st      *store.Store
	db      *sql.DB
	clock   *clock.Fake
	api     *wecomtest.Server
	client  *wx.Client
	crypto  *wx.Crypto
	conv    *fakeConv
	inbox   *Inbox
	outbox  *Outbox
	proc    *Processor
	handler *Handler
	policy  atomic.Pointer[pairing.Policy]
	cancel  context.CancelFunc
	done    chan struct{}
	nonce   int
	// configure, when set, adjusts the processor's configuration (media).
	configure func(*ProcessorConfig)
}

func newRig(t *testing.T, path string, configure ...func(*ProcessorConfig)) *rig {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), store.FileName)
	}
	r := &rig{t: t, path: path, clock: newFakeClock(), conv: &fakeConv{}}
	if len(configure) > 0 {
		r.configure = configure[0]
	}
	r.api = wecomtest.NewServer(testCorpID, "secret", testAgent)
	t.Cleanup(r.api.Close)
	r.client = r.api.NewClient()
	r.client.MaxAttempts = 2
	var err error
	r.crypto, err = wx.NewCrypto(testToken, testAESKey, testCorpID)
	if err != nil {
		t.Fatal(err)
	}
	r.policy.Store(&pairing.Policy{Mode: pairing.Open})
	r.open()
	return r
}

// open (re)opens the database and builds the channel on it.
func (r *rig) open() {
	r.t.Helper()
	st := storetest.OpenAt(r.t, r.path)
	r.st, r.db = st, st.DB()
	r.inbox = NewInbox(r.db, r.clock)
	r.outbox = NewOutbox(r.db, OutboxConfig{API: r.client, Clock: r.clock})
	pc := ProcessorConfig{
		Inbox: r.inbox, Outbox: r.outbox, Conversation: conversation.Turns(r.conv, nil, nil), Pairing: pairing.New(r.db, r.clock.Now),
		Policy: func() pairing.Policy { return *r.policy.Load() }, Debounce: 3 * time.Second, Clock: r.clock,
	}
	if r.configure != nil {
		r.configure(&pc)
	}
	r.proc = NewProcessor(pc)
	r.handler = &Handler{Crypto: r.crypto, Inbox: r.inbox, Clock: r.clock, Stored: r.proc.Wake}
	r.t.Cleanup(r.close)
}

// start runs the processor and the outbox sender.
func (r *rig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.proc.Run(ctx) }()
	go func() { defer wg.Done(); r.outbox.Run(ctx) }()
	go func() { wg.Wait(); close(r.done) }()
}

func (r *rig) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
}

func (r *rig) close() {
	r.stop()
	if r.st != nil {
		r.st.Close()
		r.st = nil
	}
}

// post delivers msg as WeCom would and returns the status and body.
func (r *rig) post(msg *wx.Message) (int, string) {
	r.t.Helper()
	r.nonce++
	ts := strconv.FormatInt(r.clock.Now().Unix(), 10)
	req, err := wecomtest.CallbackRequest(r.crypto, "http://agent/wecom/callback", msg, ts, strconv.Itoa(r.nonce))
	if err != nil {
		r.t.Fatal(err)
	}
	return r.serve(req)
}

func (r *rig) serve(req *http.Request) (int, string) {
	rec := httptest.NewRecorder()
	r.handler.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func text(from, id, content string) *wx.Message {
	return &wx.Message{ToUserName: testCorpID, FromUserName: from, CreateTime: 1_700_000_000, MsgType: wx.MsgText,
		Content: content, MsgID: id, AgentID: testAgent}
}

func (r *rig) count(query string, args ...any) int {
	r.t.Helper()
	var n int
	if err := r.db.QueryRow(query, args...).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

func (r *rig) sentTo(user string) []string {
	var out []string
	for _, m := range r.api.Messages() {
		if m.ToUser == user {
			out = append(out, m.Content)
		}
	}
	return out
}

// ok posts msg and insists on the acknowledgement.
func (r *rig) ok(msg *wx.Message) {
	r.t.Helper()
	if code, body := r.post(msg); code != http.StatusOK || body != "success" {
		r.t.Fatalf("callback answered %d %q, want 200 success", code, body)
	}
}
