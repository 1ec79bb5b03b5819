package backlog

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/llm"
	"agent/pkg/store"
)

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path, nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
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
		first, err := b.Hold(ctx, key, Message{Channel: "wecom", Sender: "x", Text: text}, 0)
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
	want := []string{"p2p:wecom:alice: answer to a1", "p2p:wecom:alice: answer to a2", "p2p:wecom:bob: answer to b1", "p2p:wecom:alice: Something went wrong"}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("delivered %q, want %q", got, want)
		}
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
	if first, _ := b.Hold(ctx, "p2p:wecom:alice", Message{Text: "again"}, 0); !first {
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
	if _, err := b.Hold(ctx, "k", Message{Text: string(make([]byte, MaxText+1))}, 0); err == nil {
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
