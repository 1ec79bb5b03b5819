package backlog

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/llm"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
)

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	return storetest.OpenAt(t, path)
}

// rig runs a Backlog whose model is down until up is closed.
type rig struct {
	mu        sync.Mutex
	ran       []string // texts run, in order (failed tries too)
	delivered []string
	up        chan struct{}
	answered  chan struct{}
}

func (r *rig) run(_ context.Context, t Turn) ([]string, Outcome, error) {
	r.mu.Lock()
	r.ran = append(r.ran, t.Message.Text)
	r.mu.Unlock()
	select {
	case <-r.up:
		if t.Message.Text == "poison" {
			return []string{"Something went wrong"}, Answered, errors.New("a bad request")
		}
		return []string{"answer to " + t.Message.Text}, Answered, nil
	default:
		return nil, StillDown, errors.New("connection refused")
	}
}

func (r *rig) deliver(_ context.Context, t Turn, replies []string) error {
	r.mu.Lock()
	r.delivered = append(r.delivered, t.Key+": "+replies[0])
	r.mu.Unlock()
	r.answered <- struct{}{}
	return nil
}

func (r *rig) backlog(st *store.Store) *Backlog {
	return New(Config{DB: st.DB(), Run: r.run, Deliver: r.deliver, MinPause: time.Millisecond, MaxPause: 5 * time.Millisecond})
}

// Held turns survive a restart and are answered once, oldest first, when
// the model is back; the user is told once per conversation; /new
// (Cancel) drops a conversation's; a turn failing for another reason is
// answered with its error and not retried.
func TestHeldTurnsAnsweredInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), store.FileName)
	ctx := context.Background()
	st := openStore(t, path)
	r := &rig{up: make(chan struct{}), answered: make(chan struct{}, 16)}
	b := r.backlog(st)
	hold := func(key, text string, wantFirst bool) {
		t.Helper()
		first, _, err := b.Hold(ctx, key, Message{Channel: "wecom", Sender: "x", Text: text}, 0)
		if err != nil || first != wantFirst {
			t.Fatalf("Hold(%s, %s) = %v, %v; want first=%v", key, text, first, err, wantFirst)
		}
	}
	hold("p2p:wecom:alice", "a1", true)
	hold("p2p:wecom:alice", "a2", false)
	hold("p2p:wecom:bob", "b1", true)
	hold("p2p:wecom:carol", "c1", true)
	hold("p2p:wecom:alice", "poison", false)
	if n, _ := b.Cancel(ctx, "p2p:wecom:carol"); n != 1 {
		t.Fatalf("cancelled %d", n)
	}
	if s, err := b.Stats(ctx); err != nil || s.Held != 4 || s.Conversations != 2 || s.Oldest.IsZero() {
		t.Fatalf("stats %+v, %v", s, err)
	}
	// Down: tries fail, nothing is delivered; then a restart.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); b.Run(runCtx) }()
	for {
		r.mu.Lock()
		n := len(r.ran)
		r.mu.Unlock()
		if n >= 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	<-done
	st.Close()

	st = openStore(t, path)
	r.mu.Lock()
	r.ran = nil
	r.mu.Unlock()
	b = r.backlog(st)
	if n, _ := b.Waiting(ctx, "p2p:wecom:alice"); n != 3 {
		t.Fatalf("%d of alice's turns held after the restart, want 3", n)
	}
	runCtx, stop = context.WithCancel(ctx)
	defer stop()
	go b.Run(runCtx)
	close(r.up)
	for range 4 {
		select {
		case <-r.answered:
		case <-time.After(10 * time.Second):
			t.Fatalf("delivered %v", r.delivered)
		}
	}
	r.mu.Lock()
	got := r.delivered
	r.mu.Unlock()
	// In order per conversation (conversations take turns).
	byKey := map[string][]string{}
	for _, g := range got {
		k, v, _ := strings.Cut(g, ": ")
		byKey[k] = append(byKey[k], v)
	}
	if a, b := strings.Join(byKey["p2p:wecom:alice"], "|"), strings.Join(byKey["p2p:wecom:bob"], "|"); len(got) != 4 ||
		a != "answer to a1|answer to a2|Something went wrong" || b != "answer to b1" {
		t.Fatalf("delivered %q", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for { // delivered, then marked answered
		s, _ := b.Stats(ctx)
		if s.Held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d still held", s.Held)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-r.answered:
		t.Fatalf("delivered more than once: %q", r.delivered)
	case <-time.After(50 * time.Millisecond):
	}
	if first, _, _ := b.Hold(ctx, "p2p:wecom:alice", Message{Text: "again"}, 0); !first {
		t.Fatal("a new outage after the backlog emptied is not told again")
	}
}

// A stored row that is not a message is dropped, not retried forever;
// an oversized text is refused at Hold.
func TestBadHeldRows(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), store.FileName))
	ctx := context.Background()
	r := &rig{up: make(chan struct{}), answered: make(chan struct{}, 4)}
	close(r.up)
	b := r.backlog(st)
	if _, _, err := b.Hold(ctx, "k", Message{Text: string(make([]byte, MaxText+1))}, 0); err == nil {
		t.Fatal("oversized message held")
	}
	if _, err := st.DB().Exec(`INSERT INTO held_turns(key, message, held_at) VALUES ('k', 'not json', 0)`); err != nil {
		t.Fatal(err)
	}
	b.Hold(ctx, "k", Message{Text: "fine"}, 0)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go b.Run(runCtx)
	select {
	case <-r.answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the good turn behind a bad row was not answered")
	}
	var state int
	st.DB().QueryRow(`SELECT state FROM held_turns WHERE message = 'not json'`).Scan(&state)
	if state != stateDropped {
		t.Fatalf("bad row state %d", state)
	}
}

// While the model client's breaker is open it says when its probe goes
// out (llm.APIError.RetryAfter): the backlog tries again right then, not
// after its own (here one-minute) pause.
func TestRetryAtTheBreakersProbe(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), store.FileName))
	ctx := context.Background()
	var tries atomic.Int32
	answered := make(chan struct{}, 1)
	b := New(Config{DB: st.DB(), MinPause: time.Minute, MaxPause: time.Minute,
		Run: func(context.Context, Turn) ([]string, Outcome, error) {
			if tries.Add(1) == 1 {
				return nil, StillDown, &llm.APIError{Err: llm.ErrUnavailable, Message: "circuit breaker open", RetryAfter: 20 * time.Millisecond}
			}
			return []string{"ok"}, Answered, nil
		},
		Deliver: func(context.Context, Turn, []string) error { answered <- struct{}{}; return nil }})
	b.Hold(ctx, "k", Message{Text: "q"}, 0)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go b.Run(runCtx)
	select {
	case <-answered:
	case <-time.After(20 * time.Second):
		t.Fatalf("not retried at the probe (%d tries)", tries.Load())
	}
}

// A message processed again after a crash (the same MsgID) is held once;
// a job due again while its earlier run is held is held once too, but
// held again after that run was answered; a scheduled task never takes
// the one notice of its owner's conversation; a turn held past MaxAge is
// given up with a word to its user.
func TestHoldOnceAndGiveUp(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), store.FileName))
	ctx := context.Background()
	r := &rig{up: make(chan struct{}), answered: make(chan struct{}, 8)}
	b := r.backlog(st)
	hold := func(m Message) (bool, bool) {
		t.Helper()
		first, dup, err := b.Hold(ctx, "k", m, 0)
		if err != nil {
			t.Fatal(err)
		}
		return first, dup
	}
	if first, _ := hold(Message{Text: "task", MsgID: "job:7", Due: time.Now()}); first {
		t.Fatal("a scheduled task took the owner's notice")
	}
	if _, dup := hold(Message{Text: "task", MsgID: "job:7", Due: time.Now()}); !dup {
		t.Fatal("a job due again was held twice")
	}
	if first, dup := hold(Message{Text: "mine", MsgID: "inbox:5"}); !first || dup {
		t.Fatalf("the owner's own first message: first=%v dup=%v", first, dup)
	}
	if _, dup := hold(Message{Text: "mine", MsgID: "inbox:5"}); !dup {
		t.Fatal("a message processed again was held twice")
	}
	st.DB().Exec(`UPDATE held_turns SET state = 1 WHERE msg_id = 'job:7'`)
	if _, dup := hold(Message{Text: "task", MsgID: "job:7", Due: time.Now()}); dup {
		t.Fatal("the job's next outage was not held")
	}
	st.DB().Exec(`UPDATE held_turns SET state = 1 WHERE msg_id = 'inbox:5'`)
	if _, dup := hold(Message{Text: "mine", MsgID: "inbox:5"}); !dup {
		t.Fatal("an answered message processed again was held again")
	}
	// Given up after MaxAge: the user hears so, nothing is run.
	clk := clock.NewFake(time.Now().Add(48 * time.Hour))
	var mu sync.Mutex
	var got []string
	b2 := New(Config{DB: st.DB(), Clock: clk, MinPause: time.Millisecond, MaxPause: time.Millisecond,
		Run: func(context.Context, Turn) ([]string, Outcome, error) {
			t.Error("ran a turn past its age")
			return nil, StillDown, nil
		},
		Deliver: func(_ context.Context, _ Turn, replies []string) error {
			mu.Lock()
			got = append(got, replies...)
			mu.Unlock()
			return nil
		}})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go b2.Run(runCtx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s, _ := b2.Stats(ctx); s.Held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("old held turns not given up")
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || got[0] != GaveUpText {
		t.Fatalf("told %q", got)
	}
}
