package backlog

import (
	"context"
	"sync"
	"testing"
	"time"

	"agent/pkg/llm"
	"agent/pkg/store/storetest"
)

// A held turn whose replay keeps failing with an outage-class error while
// the service answers everyone else (one user's pasted document exceeds the
// per-minute token limit: 429 on every try; a gateway 504s one long turn)
// is retried forever at the head of the global queue: no other
// conversation's held turn is ever run. There is no cap on tries or age.
func TestOneStuckTurnBlocksEveryConversation(t *testing.T) {
	st := storetest.Open(t)
	var mu sync.Mutex
	tries := map[string]int{}
	answered := make(chan string, 4)
	run := func(_ context.Context, tr Turn) ([]string, Outcome, error) {
		mu.Lock()
		tries[tr.Key]++
		mu.Unlock()
		if tr.Key == "p2p:wecom:mallory" { // always "request too large" (429)
			return nil, StillDown, &llm.APIError{Err: llm.ErrRateLimited, Message: "Request too large for model on tokens per min"}
		}
		return []string{"answer to " + tr.Message.Text}, Answered, nil
	}
	b := New(Config{DB: st.DB(), Run: run, MinPause: time.Millisecond, MaxPause: 2 * time.Millisecond,
		Deliver: func(_ context.Context, tr Turn, _ []string) error { answered <- tr.Key; return nil }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := b.Hold(ctx, "p2p:wecom:mallory", Message{Channel: "wecom", Sender: "mallory", Text: "huge document ..."}, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Hold(ctx, "p2p:wecom:alice", Message{Channel: "wecom", Sender: "alice", Text: "what time is the meeting?"}, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case k := <-answered:
		if k != "p2p:wecom:alice" {
			t.Fatalf("answered %s", k)
		}
	case <-time.After(2 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("alice's held turn was never run while mallory's was tried %d times (alice: %d): one stuck turn blocks every conversation's backlog forever", tries["p2p:wecom:mallory"], tries["p2p:wecom:alice"])
	}
}
