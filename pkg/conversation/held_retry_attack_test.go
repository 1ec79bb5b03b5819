package conversation

import (
	"context"
	"sync"
	"testing"
	"time"

	"agent/pkg/agent"
	"agent/pkg/backlog"
	"agent/pkg/llm"
	"agent/pkg/runner"
	"agent/pkg/session"
	"agent/pkg/store/storetest"
)

// outageLLM answers unless fail says the request must fail (an outage).
type outageLLM struct {
	mu   sync.Mutex
	fail func(last string) bool
}

func (f *outageLLM) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	last := ""
	for _, m := range req.Messages {
		if m.Role == llm.RoleUser {
			last = m.Content
		}
	}
	f.mu.Lock()
	down := f.fail(last)
	f.mu.Unlock()
	if down {
		return llm.Response{}, &llm.APIError{Err: llm.ErrUnavailable, Message: "connection refused"}
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "answer to " + last}, FinishReason: llm.FinishStop}, nil
}

func (f *outageLLM) Stream(ctx context.Context, req llm.Request, _ func(llm.Delta) error) (llm.Response, error) {
	return f.Chat(ctx, req)
}

// A turn held behind another (session 0: its message not stored yet) whose
// replay fails again (the service flaps, or its breaker is still open) has
// its user message stored by the agent on every try, and the backlog never
// learns the session it went to: each retry stores the message once more.
// An outage of an hour at the 1-minute pause stores it ~60 times in the
// conversation (and sends all copies to the model afterwards).
func TestHeldBehindTurnStoredOnEveryRetry(t *testing.T) {
	st := storetest.Open(t)
	sessions := session.New(st.DB(), nil)
	down := true
	secondTries := 0
	fake := &outageLLM{}
	fake.fail = func(last string) bool {
		if down {
			return true
		}
		if last == "second" {
			secondTries++
			return secondTries <= 3 // the service flaps while the second is replayed
		}
		return false
	}
	ag := agent.New(agent.Config{}, agent.Deps{LLM: fake, Sessions: sessions})
	r := runner.New(runner.Config{MaxConcurrent: 2, QueueLen: 8}, nil)
	defer r.Close(context.Background())
	answered := make(chan string, 8)
	var s *Service
	bl := backlog.New(backlog.Config{DB: st.DB(), MinPause: time.Millisecond, MaxPause: 2 * time.Millisecond,
		Run: func(ctx context.Context, t backlog.Turn) ([]string, backlog.Outcome, error) { return s.Replay(ctx, t) },
		Deliver: func(_ context.Context, t backlog.Turn, replies []string) error {
			answered <- t.Message.Text
			return nil
		}})
	s = New(Deps{Runner: r, Agent: ag, Sessions: sessions, Model: "m", Backlog: bl})
	if got := say(t, s, "first"); len(got) != 1 || got[0] != HeldText {
		t.Fatalf("first: %q", got)
	}
	if got := say(t, s, "second"); len(got) != 0 {
		t.Fatalf("second: %q", got)
	}
	fake.mu.Lock()
	down = false
	fake.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { bl.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for range 2 {
		select {
		case <-answered:
		case <-time.After(5 * time.Second):
			t.Fatal("held turns not answered")
		}
	}
	key, _ := session.P2P("admin", "alice")
	cur, err := sessions.Current(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := sessions.Window(context.Background(), cur.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range msgs {
		if m.Role == llm.RoleUser && m.Content == "second" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the held message %q is stored %d times in the conversation (once per failed retry); want once", "second", n)
	}
}

// A scheduled task (run as its owner in the owner's own conversation) that
// is held takes the "told once" notice with it: the scheduler discards the
// task's replies, so HeldText never reaches the owner. The owner's own
// messages afterwards are held behind it silently: no answer, no notice,
// until the service is back (the wecom app channel has no "Kept" note).
func TestHeldTaskSilencesTheOwnersOwnMessages(t *testing.T) {
	st := storetest.Open(t)
	turner := scriptedTurner{func(in agent.Input, _ func(agent.Event)) (agent.Output, error) {
		return agent.Output{Session: 1}, &llm.APIError{Err: llm.ErrUnavailable, Message: "connection refused"}
	}}
	r := runner.New(runner.Config{MaxConcurrent: 2, QueueLen: 8}, nil)
	defer r.Close(context.Background())
	s := New(Deps{Runner: r, Agent: turner, Sessions: session.New(st.DB(), nil), Model: "m",
		Backlog: backlog.New(backlog.Config{DB: st.DB()})})
	// What schedulePrompt hands in (its replies are dropped once deferred).
	held := false
	done, err := s.Handle(context.Background(), Inbound{Channel: "admin", Sender: "alice", Text: "[scheduled task] daily summary",
		ReplyChannel: "admin", ReplyTo: "alice", Due: time.Now(), OnHeld: func() { held = true }},
		func(context.Context, string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if !held {
		t.Fatal("task not held")
	}
	if got := say(t, s, "is the printer fixed?"); len(got) == 0 {
		t.Fatal("alice's own message got no reply and no notice at all: the one HeldText went to the scheduled task and was discarded")
	}
}
