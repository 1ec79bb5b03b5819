package conversation

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"agent/pkg/agent"
	"agent/pkg/backlog"
	"agent/pkg/llm"
	"agent/pkg/runner"
	"agent/pkg/session"
	"agent/pkg/store/storetest"
)

// A turn the model service could not answer is held: the user is told
// once, later messages of the conversation wait behind it silently,
// /status counts them, /new drops them; a voice (Fast) turn is not held;
// other failures are answered as before. Replay resumes the held turn in
// the session its message is stored in.
func TestHeldTurns(t *testing.T) {
	st := storetest.Open(t)
	var down atomic.Bool
	down.Store(true)
	var resumed atomic.Int64
	turner := scriptedTurner{func(in agent.Input, _ func(agent.Event)) (agent.Output, error) {
		if in.Text == "bad" {
			return agent.Output{}, &llm.APIError{Err: llm.ErrBadRequest}
		}
		if down.Load() {
			return agent.Output{Session: 7}, &llm.APIError{Err: llm.ErrUnavailable, Message: "connection refused"}
		}
		resumed.Store(in.Resume)
		return agent.Output{Text: "answer to " + in.Text}, nil
	}}
	r := runner.New(runner.Config{MaxConcurrent: 2, QueueLen: 8}, nil)
	defer r.Close(context.Background())
	bl := backlog.New(backlog.Config{DB: st.DB()})
	s := New(Deps{Runner: r, Agent: turner, Sessions: session.New(st.DB(), nil), Model: "m", Backlog: bl})
	if got := say(t, s, "first"); len(got) != 1 || got[0] != HeldText {
		t.Fatalf("first held turn: %q", got)
	}
	if got := say(t, s, "second"); len(got) != 0 {
		t.Fatalf("second held turn: %q (told once)", got)
	}
	if got := say(t, s, "/status"); !strings.Contains(got[0], "Waiting for the model service: 2 message(s)") {
		t.Fatalf("/status: %q", got)
	}
	if got := say(t, s, "bad"); len(got) != 0 {
		t.Fatalf("a message behind held ones is held whatever it is: %q", got)
	}
	if got := say(t, s, "/new"); !strings.Contains(got[0], "3 message(s) waiting for the model service were dropped") {
		t.Fatalf("/new: %q", got)
	}
	if got := say(t, s, "bad"); len(got) != 1 || !strings.Contains(got[0], "refused this request") {
		t.Fatalf("a bad request is answered, not held: %q", got)
	}
	var fast []string
	done, _ := s.Handle(context.Background(), Inbound{Channel: "voice", Sender: "dev1", Fast: true, Text: "lights on"}, func(_ context.Context, r string) error {
		fast = append(fast, r)
		return nil
	})
	<-done
	if len(fast) != 1 || fast[0] == HeldText {
		t.Fatalf("voice turn during an outage: %q (not held: a late spoken answer is useless)", fast)
	}
	if got := say(t, s, "third"); len(got) != 1 || got[0] != HeldText {
		t.Fatalf("a new outage is told again: %q", got)
	}
	down.Store(false)
	ht := backlog.Turn{Key: "p2p:admin:alice", Session: 7, Message: backlog.Message{Channel: "admin", Sender: "alice", Text: "third"}}
	replies, out, err := s.Replay(context.Background(), ht)
	if err != nil || out != backlog.Answered || len(replies) != 1 || replies[0] != "answer to third" || resumed.Load() != 7 {
		t.Fatalf("replay: %q %v %v (resume %d)", replies, out, err, resumed.Load())
	}
	down.Store(true)
	if _, out, _ := s.Replay(context.Background(), ht); out != backlog.StillDown {
		t.Fatalf("replay while down: %v", out)
	}
}

// /verbose would post each member's tool steps (arguments, results) to a
// group: it is for direct chats only.
func TestVerboseOnlyInDirectChats(t *testing.T) {
	s := newService(t, func(in agent.Input, _ func(agent.Event)) (agent.Output, error) {
		return agent.Output{Text: "ok"}, nil
	}, 8)
	var got []string
	done, err := s.Handle(context.Background(), Inbound{Channel: "wecom", ChatType: Group, ChatID: "c1", Sender: "lisi", Text: "/verbose on"},
		func(_ context.Context, r string) error { got = append(got, r); return nil })
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if len(got) != 1 || !strings.Contains(got[0], "direct chats only") {
		t.Fatalf("/verbose in a group: %q", got)
	}
}
