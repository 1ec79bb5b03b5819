package plugin

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"agent/pkg/channel/gate"
	"agent/pkg/channel/mailbox"
	"agent/pkg/clock"
	"agent/pkg/pairing"
	"agent/pkg/store/storetest"
)

// waitLimit bounds every wait of these tests for something another
// goroutine or process does: a guard against a hang, never a timing.
const waitLimit = 20 * time.Second

// fakeProc is a plugin process played by the test: the daemon's ends of
// its pipes, and the plugin's ends the test reads and writes.
type fakeProc struct {
	stdinR  io.ReadCloser  // the plugin reads what the daemon wrote
	stdinW  io.WriteCloser // the daemon's end
	stdoutR *os.File       // the daemon's end
	stdoutW *os.File       // the plugin writes lines here

	exited chan struct{}
	once   sync.Once
	err    error

	// ignoreEOF: the plugin goes on when its stdin closes (else it
	// exits, as a well-behaved one does).
	ignoreEOF bool

	mu    sync.Mutex
	lines chan map[string]any // decoded, once reading started
	raw   *bufio.Reader
}

// newFakeProc makes the pipes: stdin through the kernel (buffered, as a
// real plugin's) or, unbuffered, through io.Pipe (every write waits for
// the plugin to read it).
func newFakeProc(tb testing.TB, unbufferedStdin bool) *fakeProc {
	p := &fakeProc{exited: make(chan struct{})}
	if unbufferedStdin {
		p.stdinR, p.stdinW = io.Pipe()
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			tb.Fatal(err)
		}
		p.stdinR, p.stdinW = r, w
	}
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	p.stdoutR, p.stdoutW = r, w
	p.raw = bufio.NewReaderSize(p.stdinR, 2<<20)
	return p
}

func (p *fakeProc) Stdin() io.Writer  { return p.stdinW }
func (p *fakeProc) Stdout() io.Reader { return p.stdoutR }
func (p *fakeProc) Stderr() io.Reader { return nil }
func (p *fakeProc) CloseStdin() error {
	err := p.stdinW.Close()
	if !p.ignoreEOF {
		p.exit(nil)
	}
	return err
}
func (p *fakeProc) Wait() error {
	<-p.exited
	return p.err
}

func (p *fakeProc) Kill() {
	p.exit(errors.New("signal: killed"))
	p.stdinR.Close()
}

func (p *fakeProc) Close() {
	p.stdinW.Close()
	p.stdoutR.Close()
}

// exit ends the "process": its stdout closes, Wait returns err.
func (p *fakeProc) exit(err error) {
	p.once.Do(func() {
		p.err = err
		p.stdoutW.Close()
		close(p.exited)
	})
}

// write writes one line as the plugin.
func (p *fakeProc) write(tb testing.TB, v any) {
	tb.Helper()
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v + "\n")
	default:
		b = encode(v)
	}
	if _, err := p.stdoutW.Write(b); err != nil {
		tb.Fatalf("plugin write: %v", err)
	}
}

// tryWrite writes a line as the plugin, from any goroutine (an error,
// the pipe closed, is the test's outcome to check elsewhere).
func (p *fakeProc) tryWrite(line string) { _, _ = p.stdoutW.Write([]byte(line + "\n")) }

// messageLine is m as a message line.
func messageLine(m Message) string {
	b, _ := json.Marshal(m)
	return `{"type":"message",` + string(b[1:])
}

// message writes a message line.
func (p *fakeProc) message(tb testing.TB, m Message) {
	tb.Helper()
	b, _ := json.Marshal(m)
	p.write(tb, `{"type":"message",`+string(b[1:]))
}

// startReading reads what the daemon writes, in the background.
func (p *fakeProc) startReading() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lines != nil {
		return
	}
	p.lines = make(chan map[string]any, 1024)
	go func() {
		defer close(p.lines)
		for {
			line, err := p.raw.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(line, &m) != nil {
				m = map[string]any{"type": "<bad>", "line": string(line)}
			}
			p.lines <- m
		}
	}()
}

// next is the daemon's next line (reading starts if it had not).
func (p *fakeProc) next(tb testing.TB) map[string]any {
	tb.Helper()
	p.startReading()
	select {
	case m, ok := <-p.lines:
		if !ok {
			tb.Fatal("the daemon closed the plugin's stdin")
		}
		return m
	case <-time.After(waitLimit):
		tb.Fatal("no line from the daemon")
	}
	return nil
}

// expect is the next line, which must be of type typ.
func (p *fakeProc) expect(tb testing.TB, typ string) map[string]any {
	tb.Helper()
	m := p.next(tb)
	if m["type"] != typ {
		tb.Fatalf("got %v, want a %s line", m, typ)
	}
	return m
}

// starter hands the test every process the channel starts.
type starter struct {
	procs      chan *fakeProc
	unbuffered bool
	ignoreEOF  bool
	tb         testing.TB
	mu         sync.Mutex
	specs      []Spec
}

func newStarter(tb testing.TB) *starter {
	return &starter{procs: make(chan *fakeProc, 16), tb: tb}
}

func (s *starter) start(_ context.Context, spec Spec) (Process, error) {
	s.mu.Lock()
	s.specs = append(s.specs, spec)
	unbuffered, ignoreEOF := s.unbuffered, s.ignoreEOF
	s.mu.Unlock()
	p := newFakeProc(s.tb, unbuffered)
	p.ignoreEOF = ignoreEOF
	s.procs <- p
	return p, nil
}

// next is the next process started.
func (s *starter) next(tb testing.TB) *fakeProc {
	tb.Helper()
	select {
	case p := <-s.procs:
		tb.Cleanup(func() { p.exit(errors.New("test over")) })
		return p
	case <-time.After(waitLimit):
		tb.Fatal("no plugin started")
	}
	return nil
}

// harness is a channel on a real database with a fake clock, fake
// processes and a fake pipeline that answers "echo: TEXT" (or what
// answer returns).
type harness struct {
	t      *testing.T
	db     *sql.DB
	clk    *clock.Fake
	st     *starter
	ch     *Channel
	logs   *syncBuffer
	policy pairing.Policy

	mu     sync.Mutex
	asked  []Request
	answer func(Request) []string // nil: echo
	hold   chan struct{}          // non-nil: each turn waits for a receive
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newHarness(t *testing.T, tune func(*Deps, *Options)) *harness {
	t.Helper()
	h := &harness{t: t, db: storetest.DB(t), clk: clock.NewFake(time.Time{}), st: newStarter(t), logs: &syncBuffer{},
		policy: pairing.Policy{Mode: pairing.Open}}
	d := Deps{
		Name:    "chat",
		Command: "/nonexistent/plugin",
		Dir:     filepath.Join(t.TempDir(), "channels", "chat"),
		DB:      h.db,
		Logger:  slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Clock:   h.clk,
		Gate: gate.Gate{Pairings: pairing.New(h.db, h.clk.Now), Policy: func() pairing.Policy {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.policy
		}},
		Ask:       h.ask,
		LookupEnv: func(string) (string, bool) { return "/usr/bin:/bin", true },
	}
	o := Options{Start: h.st.start}
	if tune != nil {
		tune(&d, &o)
	}
	c, err := New(d, o)
	if err != nil {
		t.Fatal(err)
	}
	h.ch = c
	return h
}

func (h *harness) ask(ctx context.Context, r Request, reply func(context.Context, string) error) (<-chan struct{}, error) {
	h.mu.Lock()
	h.asked = append(h.asked, r)
	answer, hold := h.answer, h.hold
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return
			}
		}
		replies := []string{"echo: " + r.Text}
		if answer != nil {
			replies = answer(r)
		}
		for _, text := range replies {
			_ = reply(ctx, text)
		}
	}()
	return done, nil
}

func (h *harness) requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.asked...)
}

// run runs the channel until the test ends; the channel of errors gets
// what each Run returned (one run: the test starts another).
func (h *harness) run(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- h.ch.Run(ctx) }()
	return done
}

// start runs the channel and returns its process after the hello.
func (h *harness) start(ctx context.Context) (*fakeProc, <-chan error) {
	h.t.Helper()
	done := h.run(ctx)
	p := h.st.next(h.t)
	hello := p.expect(h.t, TypeHello)
	if hello["protocol"] != Protocol || hello["channel"] != "chat" {
		h.t.Fatalf("hello: %v", hello)
	}
	return p, done
}

// ended is Run's error, once it returns.
func ended(tb testing.TB, done <-chan error) error {
	tb.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitLimit):
		tb.Fatal("Run did not return")
	}
	return nil
}

// advanceUntil moves the fake clock by step until done has a value (which
// it returns).
func advanceUntil[T any](tb testing.TB, clk *clock.Fake, step time.Duration, done <-chan T) T {
	tb.Helper()
	limit := time.After(waitLimit)
	for {
		select {
		case v := <-done:
			return v
		case <-limit:
			tb.Fatal("nothing happened while the clock moved")
		case <-time.After(time.Millisecond):
			clk.Advance(step)
		}
	}
}

// awaiting waits until n sends wait for their answer (their line
// written: the fake clock may move without ending the write).
func (h *harness) awaiting(tb testing.TB, n int) {
	tb.Helper()
	eventually(tb, fmt.Sprintf("%d sends wait for an answer", n), func() bool {
		cn := h.ch.current()
		if cn == nil {
			return false
		}
		cn.mu.Lock()
		defer cn.mu.Unlock()
		return cn.awaiting == n
	})
}

// eventually waits until cond holds.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	limit := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(limit) {
			tb.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// outboxRows are the channel's outbox rows: state and attempts by id.
type outRow struct {
	ID       int64
	To       string
	State    int
	Attempts int
	Item     outItem
}

func (h *harness) outbox() []outRow {
	h.t.Helper()
	rows, err := h.db.Query(`SELECT id, to_user, state, attempts, content FROM outbox WHERE channel = ? ORDER BY id`, MailboxPrefix+"chat")
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	var out []outRow
	for rows.Next() {
		var r outRow
		var content string
		if err := rows.Scan(&r.ID, &r.To, &r.State, &r.Attempts, &content); err != nil {
			h.t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(content), &r.Item)
		out = append(out, r)
	}
	return out
}

// inboxStates counts the channel's inbox rows by state.
func (h *harness) inboxStates() map[int]int {
	h.t.Helper()
	rows, err := h.db.Query(`SELECT state, count(*) FROM inbox WHERE channel = ? GROUP BY state`, MailboxPrefix+"chat")
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var s, n int
		if err := rows.Scan(&s, &n); err != nil {
			h.t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

func (h *harness) allDone(n int) func() bool {
	return func() bool { return h.inboxStates()[mailbox.InDone] == n }
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
