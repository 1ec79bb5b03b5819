package conversation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/agent"
	"agent/pkg/clock"
	"agent/pkg/llm"
	"agent/pkg/memory"
	"agent/pkg/runner"
	"agent/pkg/session"
	"agent/pkg/store/storetest"
)

// scriptedTurner answers every turn with fn.
type scriptedTurner struct {
	fn func(in agent.Input, emit func(agent.Event)) (agent.Output, error)
}

func (s scriptedTurner) Turn(_ context.Context, in agent.Input, emit func(agent.Event)) (agent.Output, error) {
	return s.fn(in, emit)
}

func newService(t *testing.T, turn func(agent.Input, func(agent.Event)) (agent.Output, error), queue int) *Service {
	t.Helper()
	st := storetest.Open(t)
	r := runner.New(runner.Config{MaxConcurrent: 2, QueueLen: queue}, nil)
	t.Cleanup(func() { r.Close(context.Background()) })
	return New(Deps{Runner: r, Agent: scriptedTurner{turn}, Sessions: session.New(st.DB(), nil), Model: "m"})
}

// say sends text as alice on the admin channel and returns the replies.
func say(t *testing.T, s *Service, text string) []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	done, err := s.Handle(context.Background(), Inbound{Channel: "admin", Sender: "alice", Text: text}, func(_ context.Context, r string) error {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-done
	return got
}

func TestSlashCommands(t *testing.T) {
	turns := 0
	s := newService(t, func(in agent.Input, emit func(agent.Event)) (agent.Output, error) {
		turns++
		if in.Verbose && emit != nil {
			emit(agent.Event{Kind: agent.EventToolCall, Step: 1, Tool: "read_file", Args: `{"path":"a"}`})
		}
		return agent.Output{Text: "answer to " + in.Text, Usage: llm.Usage{TotalTokens: 10}}, nil
	}, 8)
	if got := say(t, s, "hello"); len(got) != 1 || got[0] != "answer to hello" {
		t.Fatalf("plain turn: %q", got)
	}
	if got := say(t, s, "/help"); !strings.Contains(got[0], "/verbose on|off") {
		t.Fatalf("/help: %q", got)
	}
	if got := say(t, s, "/verbose on"); got[0] != "Verbose on." {
		t.Fatalf("/verbose: %q", got)
	}
	if got := say(t, s, "hi"); len(got) != 2 || !strings.Contains(got[0], "calling read_file") {
		t.Fatalf("verbose turn: %q", got)
	}
	if got := say(t, s, "/verbose maybe"); got[0] != "Usage: /verbose on|off" {
		t.Fatalf("bad /verbose: %q", got)
	}
	if got := say(t, s, "/status"); !strings.Contains(got[0], "Model: m") || !strings.Contains(got[0], "Verbose: on") || !strings.Contains(got[0], "20 tokens in 2 turns") {
		t.Fatalf("/status: %q", got)
	}
	if got := say(t, s, "/new"); !strings.Contains(got[0], "New conversation started") {
		t.Fatalf("/new: %q", got)
	}
	if got := say(t, s, "/frobnicate"); !strings.Contains(got[0], "Unknown command /frobnicate") {
		t.Fatalf("unknown: %q", got)
	}
	if turns != 2 {
		t.Fatalf("agent ran %d turns; commands must not reach it", turns)
	}
}

func TestFailuresGetAReply(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("agent: %w", llm.ErrUnavailable), "cannot reach the model"},
		{fmt.Errorf("agent: %w", llm.ErrRateLimited), "overloaded"},
		{fmt.Errorf("agent: %w", llm.ErrAuth), "llm.api_key"},
		{fmt.Errorf("agent: %w", context.DeadlineExceeded), "took too long"},
		{errors.New("disk on fire"), "Something went wrong"},
	}
	for _, c := range cases {
		s := newService(t, func(agent.Input, func(agent.Event)) (agent.Output, error) { return agent.Output{}, c.err }, 8)
		if got := say(t, s, "hi"); len(got) != 1 || !strings.Contains(got[0], c.want) {
			t.Errorf("%v: replies %q; want %q", c.err, got, c.want)
		}
	}
}

func TestFloodingUserIsToldNotDropped(t *testing.T) {
	release := make(chan struct{})
	s := newService(t, func(in agent.Input, _ func(agent.Event)) (agent.Output, error) {
		<-release
		return agent.Output{Text: "ok"}, nil
	}, 2)
	var mu sync.Mutex
	var told []string
	reply := func(_ context.Context, r string) error { mu.Lock(); told = append(told, r); mu.Unlock(); return nil }
	var full error
	for i := 0; i < 5 && full == nil; i++ {
		_, full = s.Handle(context.Background(), Inbound{Channel: "admin", Sender: "flood", Text: "x"}, reply)
	}
	if !errors.Is(full, runner.ErrQueueFull) {
		t.Fatalf("err = %v; want ErrQueueFull", full)
	}
	close(release)
	mu.Lock()
	defer mu.Unlock()
	if len(told) == 0 || told[0] != QueueFullText {
		t.Fatalf("flooding user was not told: %q", told)
	}
}

func TestKeys(t *testing.T) {
	cases := []struct {
		in   Inbound
		want string
	}{
		{Inbound{Channel: "wecom", Sender: "zhangsan"}, "p2p:wecom:zhangsan"},
		{Inbound{Channel: "wecom", ChatType: Group, ChatID: "g1"}, "group:wecom:g1"},
		{Inbound{Channel: "wecom", ChatType: Thread, ChatID: "g1", ThreadID: "t9"}, "thread:wecom:g1:t9"},
	}
	for _, c := range cases {
		if k, err := Key(c.in); err != nil || string(k) != c.want {
			t.Errorf("Key(%+v) = %q, %v; want %q", c.in, k, err, c.want)
		}
	}
	if _, err := Key(Inbound{Channel: "wecom", ChatType: "broadcast", Sender: "x"}); err == nil {
		t.Error("unknown chat type accepted")
	}
	if _, err := Key(Inbound{Channel: "wecom"}); err == nil {
		t.Error("empty sender accepted")
	}
}

func TestQueuedAtShutdownIsTold(t *testing.T) {
	s := newService(t, func(agent.Input, func(agent.Event)) (agent.Output, error) {
		return agent.Output{Text: "never"}, nil
	}, 8)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var got []string
	s.turn(ctx, "p2p:admin:alice", Inbound{Channel: "admin", Sender: "alice", Text: "hi"}, func(_ context.Context, r string) error {
		got = append(got, r)
		return nil
	})
	if len(got) != 1 || got[0] != NotAnsweredText {
		t.Fatalf("replies %q; want %q", got, NotAnsweredText)
	}
}

// The last word of a cancelled turn gets lastWordTimeout to be delivered,
// then delivery gives up.
func TestLastWordIsBounded(t *testing.T) {
	s := newService(t, func(agent.Input, func(agent.Event)) (agent.Output, error) {
		return agent.Output{Text: "never"}, nil
	}, 8)
	clk := clock.NewFake(time.Time{})
	s.d.Clock = clk
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	delivery := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.turn(ctx, "p2p:admin:alice", Inbound{Channel: "admin", Sender: "alice", Text: "hi"}, func(ctx context.Context, r string) error {
			<-ctx.Done() // a channel that does not answer
			delivery <- ctx.Err()
			return ctx.Err()
		})
	}()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if !clk.WaitTimers(1, wait.Done()) {
		t.Fatal("delivery is not bounded")
	}
	clk.Advance(lastWordTimeout - time.Nanosecond)
	select {
	case err := <-delivery:
		t.Fatalf("delivery gave up early: %v", err)
	default:
	}
	clk.Advance(time.Nanosecond)
	if err := <-delivery; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delivery ended with %v", err)
	}
	<-done
}

// In a group the asker's own usage is shown, not the group key's.
func TestStatusUsageInGroup(t *testing.T) {
	s := newService(t, func(agent.Input, func(agent.Event)) (agent.Output, error) {
		return agent.Output{Text: "ok", Usage: llm.Usage{TotalTokens: 7}}, nil
	}, 8)
	ask := func(text string) string {
		var got []string
		done, err := s.Handle(context.Background(), Inbound{Channel: "wecom", ChatType: Group, ChatID: "g1", Sender: "bob", Text: text},
			func(_ context.Context, r string) error { got = append(got, r); return nil })
		if err != nil {
			t.Fatal(err)
		}
		<-done
		return strings.Join(got, "\n")
	}
	ask("hello")
	if got := ask("/status"); !strings.Contains(got, "7 tokens in 1 turns") {
		t.Fatalf("/status in a group: %q", got)
	}
}

func TestForgetAndMemoryStatus(t *testing.T) {
	st := storetest.Open(t)
	mem := memory.New(st.DB(), memory.Config{}, nil, nil)
	r := runner.New(runner.Config{MaxConcurrent: 2}, nil)
	t.Cleanup(func() { r.Close(context.Background()) })
	var closed []int64
	s := New(Deps{Runner: r, Agent: scriptedTurner{func(agent.Input, func(agent.Event)) (agent.Output, error) {
		return agent.Output{Text: "ok"}, nil
	}}, Sessions: session.New(st.DB(), nil), Memory: mem, Closed: func(id int64) { closed = append(closed, id) }, Model: "m"})
	ctx := context.Background()
	tea, _ := mem.Add(ctx, "admin:alice", memory.Input{Text: "Alice likes jasmine tea"})
	mem.Add(ctx, "admin:alice", memory.Input{Text: "Alice's car is blue"})
	bob, _ := mem.Add(ctx, "admin:bob", memory.Input{Text: "Bob likes jasmine tea"})
	if got := say(t, s, "/status"); !strings.Contains(got[0], "Memory: 2 facts (0 older versions), keyword search only") {
		t.Fatalf("/status: %q", got)
	}
	if got := say(t, s, "/forget jasmine"); got[0] != fmt.Sprintf("Forgotten (1):\n- #%d Alice likes jasmine tea", tea.ID) {
		t.Fatalf("/forget: %q", got)
	}
	if _, err := mem.Get(ctx, "admin:bob", bob.ID); err != nil {
		t.Fatalf("bob's fact went with alice's /forget: %v", err)
	}
	if got := say(t, s, "/forget jasmine"); !strings.Contains(got[0], "nothing matching") {
		t.Fatalf("second /forget: %q", got)
	}
	if got := say(t, s, fmt.Sprintf("/forget #%d", bob.ID)); !strings.Contains(got[0], "no fact #") {
		t.Fatalf("/forget of another user's id: %q", got)
	}
	if got := say(t, s, "/forget"); !strings.HasPrefix(got[0], "Usage: /forget") {
		t.Fatalf("bare /forget: %q", got)
	}
	say(t, s, "hello")
	if got := say(t, s, "/new"); len(closed) != 1 || !strings.Contains(got[0], "New conversation") {
		t.Fatalf("/new: %q, closed %v", got, closed)
	}
}
