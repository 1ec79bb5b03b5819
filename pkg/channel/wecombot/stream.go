package wecombot

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"agent/pkg/clip"
	"agent/pkg/turn"
)

// maxStreamBytes bounds what one stream shows; a longer reply goes out by
// push whole (WeCom's own bound on a stream's content is not documented
// where we could read it: 20 KB stays under the message sizes it does
// document).
const maxStreamBytes = 20 << 10

// Texts of the stream.
const (
	thinkingText  = "…"
	continuedNote = "\n\n(continued in the next message)"
)

// stream shows one reply while it is written: a first frame at once, then
// the text so far at most every `every`, and finish before `limit`.
type stream struct {
	b            *Bot
	msg          stored // the message answered (its req_id, connection, ingress)
	id           string
	every, limit time.Duration

	mu      sync.Mutex
	model   string   // the model's text as it streams
	steps   []string // status lines of the turn's tools, newest last
	reply   string   // the turn's replies so far
	shown   string   // what the last frame carried
	opened  time.Time
	broken  bool // a frame failed: the reply goes by push
	expired bool // the limit came first: finished with a note
	done    chan struct{}
	stopped chan struct{}
	kick    chan struct{} // the first text arrived: show it now
}

func newStream(b *Bot, msg stored, id string, every, limit time.Duration) *stream {
	return &stream{b: b, msg: msg, id: id, every: every, limit: limit, done: make(chan struct{}), stopped: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// add is conversation.Inbound.Stream: a fragment of the model's text.
func (s *stream) add(fragment string) {
	s.mu.Lock()
	first := s.model == "" && fragment != ""
	s.model += fragment
	s.mu.Unlock()
	if first {
		select { // the first words go out at once, the rest every `every`
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// maxSteps is how many status lines a stream shows.
const maxSteps = 3

// progress is conversation.Inbound.Progress: a tool started or ended. The
// stream shows the last few as status lines above the text; the finished
// reply drops them.
func (s *stream) progress(p turn.Progress) {
	line := "⏳ " + p.Tool + "…"
	switch {
	case p.Done && p.Failed:
		line = "✗ " + p.Tool + " failed"
	case p.Done:
		line = fmt.Sprintf("✓ %s (%s)", p.Tool, p.Took.Round(100*time.Millisecond))
	}
	s.mu.Lock()
	first := len(s.steps) == 0
	running := -1 // the tool's line while it runs (calls of a step run together)
	if p.Done {
		for i := len(s.steps) - 1; i >= 0; i-- {
			if s.steps[i] == "⏳ "+p.Tool+"…" {
				running = i
				break
			}
		}
	}
	if running >= 0 {
		s.steps[running] = line
	} else {
		s.steps = append(s.steps, line)
	}
	if len(s.steps) > maxSteps {
		s.steps = append(s.steps[:0], s.steps[len(s.steps)-maxSteps:]...)
	}
	s.mu.Unlock()
	if first {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// setReply records the turn's replies so far (they replace the model's
// streamed text: a reply is the finished text).
func (s *stream) setReply(text string) {
	s.mu.Lock()
	s.reply = text
	s.mu.Unlock()
}

func (s *stream) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.reply
	if t != "" {
		return clip.Bytes(t, maxStreamBytes)
	}
	t = s.model
	if t == "" {
		t = thinkingText
	}
	if len(s.steps) > 0 {
		t = strings.Join(s.steps, "\n") + "\n\n" + t
	}
	return clip.Bytes(t, maxStreamBytes)
}

func (s *stream) frame(ctx context.Context, text string, finish bool) bool {
	err := s.b.respond(ctx, s.msg, s.id, text, finish)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if !s.broken {
			s.b.logger.Warn("wecom_bot: reply stream broken; the answer goes by push", "err", err)
		}
		s.broken = true
		return false
	}
	s.shown = text
	return true
}

// start sends the first frame and keeps the stream current until finish.
func (s *stream) start(ctx context.Context) {
	go func() {
		defer close(s.stopped)
		s.mu.Lock()
		s.opened = s.b.clock.Now()
		s.mu.Unlock()
		if !s.frame(ctx, thinkingText, false) {
			return
		}
		for {
			t := s.b.clock.NewTimer(s.every)
			select {
			case <-s.done:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-s.kick:
				t.Stop()
			case <-t.C():
			}
			text := s.current()
			s.mu.Lock()
			elapsed, shown := s.b.clock.Now().Sub(s.opened), s.shown
			s.mu.Unlock()
			if elapsed >= s.limit {
				// WeCom closes a stream 6 minutes after its first frame:
				// finish it now; the whole answer follows by push.
				s.frame(ctx, clip.Bytes(text, maxStreamBytes-len(continuedNote))+continuedNote, true)
				s.mu.Lock()
				s.expired = true
				s.mu.Unlock()
				return
			}
			if text != shown && !s.frame(ctx, text, false) {
				return
			}
		}
	}()
}

// finish ends the stream with the whole reply and returns what must go by
// push instead ("" when the stream carried it).
func (s *stream) finish(ctx context.Context, full string) string {
	close(s.done)
	<-s.stopped
	rest, end := s.last(ctx, full)
	s.mu.Lock()
	opened := s.opened
	s.mu.Unlock()
	if h := s.b.streams[end]; h != nil && !opened.IsZero() {
		h(s.b.clock.Now().Sub(opened).Seconds())
	}
	return rest
}

// last sends the final frame and says how the stream ended.
func (s *stream) last(ctx context.Context, full string) (rest, end string) {
	s.mu.Lock()
	broken, expired := s.broken, s.expired
	s.mu.Unlock()
	switch {
	case broken:
		return full, endBroken
	case expired:
		return full, endLimit
	case full == "":
		if !s.frame(ctx, "(no answer)", true) {
			return "", endBroken
		}
		return "", endFinished
	case len(full) > maxStreamBytes:
		if s.frame(ctx, clip.Bytes(full, maxStreamBytes-len(continuedNote))+continuedNote, true) {
			return full, endLimit
		}
		return full, endBroken
	}
	if !s.frame(ctx, full, true) {
		return full, endBroken
	}
	return "", endFinished
}

// abandon stops the stream without finishing it (the daemon is stopping:
// the message is answered after the restart, by push).
func (s *stream) abandon() {
	close(s.done)
	<-s.stopped
}
