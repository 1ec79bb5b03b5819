package wecombot

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/conversation"
	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
)

// streamRig is a Bot with only its client, on the fake endpoint, and a
// clock the test moves.
func streamRig(t *testing.T) (*Bot, *aibottest.Server, *clock.Fake) {
	t.Helper()
	srv := aibottest.New(t)
	clk := clock.NewFake(time.Unix(1_800_000_000, 0))
	b := &Bot{logger: slog.New(slog.DiscardHandler), clock: clk}
	b.client = aibot.New(aibot.Config{URL: srv.URL(), BotID: aibottest.BotID, Secret: aibottest.Secret, Clock: clk, Heartbeat: time.Hour,
		AckTimeout: time.Hour}) // the test moves the clock by seconds while an answer is on its way
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.client.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !srv.WaitReady(10 * time.Second) {
		t.Fatal("not subscribed")
	}
	for b.client.Status().State != aibot.StateReady {
		time.Sleep(time.Millisecond) // the client's reader marks it ready
	}
	return b, srv, clk
}

func contents(srv *aibottest.Server) []string {
	var out []string
	for _, f := range srv.Frames(aibot.CmdRespond) {
		var sf struct {
			Stream struct {
				Finish  bool
				Content string
			}
		}
		_ = json.Unmarshal(f.Body, &sf)
		c := sf.Stream.Content
		if sf.Stream.Finish {
			c += " [finish]"
		}
		out = append(out, c)
	}
	return out
}

// settle advances the fake clock a step at a time until n frames were
// sent (the stream's goroutine takes each timer as it comes).
func settle(t *testing.T, srv *aibottest.Server, clk *clock.Fake, step time.Duration, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Frames(aibot.CmdRespond)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d frames, want %d: %q", len(srv.Frames(aibot.CmdRespond)), n, contents(srv))
		}
		clk.Advance(step)
		time.Sleep(2 * time.Millisecond)
	}
}

// A stream shows the model's text as it comes (at most every 400 ms: a
// new frame only when the text changed) and finishes with the reply.
func TestStreamFramesAndFinish(t *testing.T) {
	b, srv, clk := streamRig(t)
	req := srv.Text("m1", "u", "single", "", "hi")
	s := newStream(b, stored{ReqID: req}, "s1", 400*time.Millisecond, 330*time.Second)
	ctx := context.Background()
	s.start(ctx)
	settle(t, srv, clk, 0, 1)
	s.add("Hel")
	settle(t, srv, clk, 0, 2)           // the first words at once, without waiting for the clock
	clk.Advance(400 * time.Millisecond) // nothing new: no frame
	time.Sleep(20 * time.Millisecond)
	s.add("lo")
	settle(t, srv, clk, 400*time.Millisecond, 3)
	if rest := s.finish(ctx, "Hello!"); rest != "" {
		t.Fatalf("finish left %q for a push", rest)
	}
	got := strings.Join(contents(srv), "|")
	if got != "…|Hel|Hello|Hello! [finish]" {
		t.Fatalf("frames %q", got)
	}
}

// A turn that outlasts WeCom's 6-minute stream limit: the stream is
// finished before it with a note, and the whole answer goes by push.
func TestStreamLimit(t *testing.T) {
	b, srv, clk := streamRig(t)
	req := srv.Text("m2", "u", "single", "", "long job")
	s := newStream(b, stored{ReqID: req}, "s2", 400*time.Millisecond, 330*time.Second)
	ctx := context.Background()
	s.start(ctx)
	settle(t, srv, clk, 0, 1)
	s.add("Working through the files")
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs := contents(srv)
		if len(cs) > 0 && strings.HasSuffix(cs[len(cs)-1], "[finish]") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream was not finished at the limit: %q", cs)
		}
		clk.Advance(10 * time.Second)
		time.Sleep(2 * time.Millisecond)
	}
	if elapsed := clk.Now().Sub(time.Unix(1_800_000_000, 0)); elapsed > 6*time.Minute {
		t.Fatalf("finished after %v, past WeCom's 6 minutes", elapsed)
	}
	cs := contents(srv)
	if last := cs[len(cs)-1]; last != "Working through the files"+continuedNote+" [finish]" {
		t.Fatalf("last frame %q", last)
	}
	if rest := s.finish(ctx, "All 40 files done."); rest != "All 40 files done." {
		t.Fatalf("the answer after the limit goes by push, got %q", rest)
	}
}

// Tool steps show as status lines above the text while the turn runs
// (names only, never arguments), at most maxSteps of them; the finished
// reply drops them.
func TestStreamToolStatusLines(t *testing.T) {
	b, srv, clk := streamRig(t)
	req := srv.Text("m3", "u", "single", "", "find it")
	s := newStream(b, stored{ReqID: req}, "s3", 400*time.Millisecond, 330*time.Second)
	ctx := context.Background()
	s.start(ctx)
	settle(t, srv, clk, 0, 1)
	s.progress(conversation.ToolProgress{Tool: "web_search"})
	settle(t, srv, clk, 0, 2) // the first status at once
	s.progress(conversation.ToolProgress{Tool: "web_search", Done: true, Took: 1234 * time.Millisecond})
	s.progress(conversation.ToolProgress{Tool: "web_fetch"})
	s.progress(conversation.ToolProgress{Tool: "web_fetch", Done: true, Failed: true})
	s.progress(conversation.ToolProgress{Tool: "read_file"})
	s.progress(conversation.ToolProgress{Tool: "exec"})
	s.add("Found")
	settle(t, srv, clk, 400*time.Millisecond, 3)
	if rest := s.finish(ctx, "Found it."); rest != "" {
		t.Fatalf("finish left %q", rest)
	}
	cs := contents(srv)
	if cs[1] != "⏳ web_search…\n\n…" {
		t.Fatalf("first status frame %q", cs[1])
	}
	if want := "✗ web_fetch failed\n⏳ read_file…\n⏳ exec…\n\nFound"; cs[2] != want {
		t.Fatalf("status frame %q, want %q", cs[2], want)
	}
	if cs[len(cs)-1] != "Found it. [finish]" {
		t.Fatalf("final frame %q", cs[len(cs)-1])
	}
}
