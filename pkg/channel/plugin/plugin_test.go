package plugin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"agent/pkg/channel/mailbox"
	"agent/pkg/pairing"
)

// The round trip: hello, a message, its ack once stored, the turn, the
// reply as a send to the chat the message came from (a direct chat whose
// id is not the sender's too) answering that message, sent, the outbox
// row done.
func TestMessageAckTurnSendSent(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	p, done := h.start(ctx)

	p.message(t, Message{ID: "m1", Chat: "dm-42", Sender: "alice", Display: "Alice", Text: "hello there"})
	if ack := p.expect(t, TypeAck); str(ack, "id") != "m1" {
		t.Fatalf("ack %v", ack)
	}
	send := p.expect(t, TypeSend)
	if str(send, "chat") != "dm-42" || str(send, "text") != "echo: hello there" || str(send, "reply_to") != "m1" || str(send, "id") == "" {
		t.Fatalf("send %v", send)
	}
	p.write(t, map[string]string{"type": TypeSent, "id": str(send, "id")})
	eventually(t, "the send is recorded sent", func() bool {
		rows := h.outbox()
		return len(rows) == 1 && rows[0].State == mailbox.OutSent
	})
	r := h.requests()
	if len(r) != 1 || r[0].Sender != "alice" || r[0].Chat != "dm-42" || r[0].Group || r[0].Text != "hello there" || !strings.HasPrefix(r[0].MsgID, "inbox:") {
		t.Fatalf("turns %+v", r)
	}
	if h.inboxStates()[mailbox.InDone] != 1 {
		t.Fatalf("inbox %v", h.inboxStates())
	}
	cancel()
	if err := ended(t, done); err != nil {
		t.Fatalf("Run after ctx end: %v", err)
	}
	specs := h.st.specs
	if len(specs) != 1 || specs[0].Env[0] != "PATH=/usr/bin:/bin" || len(specs[0].Env) != 1 || !strings.HasSuffix(specs[0].Dir, "/channels/chat") {
		t.Fatalf("spec %+v", specs)
	}
}

// A repeated message id is acked again and not processed twice, also
// after a plugin restart.
func TestRepeatedMessageAckedNotProcessedTwice(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	p.message(t, Message{ID: "m1", Sender: "alice", Text: "once"})
	p.expect(t, TypeAck)
	send := p.expect(t, TypeSend)
	if str(send, "chat") != "alice" { // no chat id: the sender is the chat
		t.Fatalf("send %v", send)
	}
	p.write(t, map[string]string{"type": TypeSent, "id": str(send, "id")})
	p.message(t, Message{ID: "m1", Sender: "alice", Text: "once"})
	p.expect(t, TypeAck)
	p.exit(errors.New("exit status 1"))
	if err := ended(t, done); err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Fatalf("Run: %v", err)
	}
	p, done = h.start(ctx)
	p.message(t, Message{ID: "m1", Sender: "alice", Text: "once"})
	p.expect(t, TypeAck)
	p.message(t, Message{ID: "m2", Sender: "alice", Text: "twice?"})
	p.expect(t, TypeAck)
	send = p.expect(t, TypeSend)
	if str(send, "text") != "echo: twice?" {
		t.Fatalf("send %v", send)
	}
	if n := len(h.requests()); n != 2 {
		t.Fatalf("%d turns, want 2", n)
	}
	cancel()
	ended(t, done)
}

// In a group only a message that mentions the assistant makes a turn; the
// reply goes to the group's chat, a thread keeps its thread; a message
// with an invalid sender or no text is acked and ignored.
func TestGroupMentionsThreadsAndInvalidMessages(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	p.message(t, Message{ID: "g1", Chat: "room", Sender: "bob", Text: "chatter", Group: true})
	p.expect(t, TypeAck)
	p.message(t, Message{ID: "bad", Chat: "room", Sender: "has space", Text: "hi", Group: true, Mentioned: true})
	p.expect(t, TypeAck)
	p.message(t, Message{ID: "nochat", Sender: "bob", Text: "hi", Group: true, Mentioned: true})
	p.expect(t, TypeAck)
	p.message(t, Message{ID: "empty", Sender: "bob", Text: "  "})
	p.expect(t, TypeAck)
	p.message(t, Message{ID: "g2", Chat: "room", Sender: "bob", Text: "@bot status?", Group: true, Mentioned: true, Thread: "t7"})
	p.expect(t, TypeAck)
	send := p.expect(t, TypeSend)
	if str(send, "chat") != "room" || str(send, "reply_to") != "g2" {
		t.Fatalf("send %v", send)
	}
	r := h.requests()
	if len(r) != 1 || !r[0].Group || r[0].Chat != "room" || r[0].Thread != "t7" || r[0].Sender != "bob" {
		t.Fatalf("turns %+v", r)
	}
	if st := h.inboxStates(); st[mailbox.InIgnored] != 4 {
		t.Fatalf("inbox %v", st)
	}
	cancel()
	ended(t, done)
}

// Malformed JSON, a line that is no object, a known field of the wrong
// type and a line over 1 MiB reset the connection (Run returns why, the
// daemon goes on); a restarted plugin is served again.
func TestGarbageResetsTheConnection(t *testing.T) {
	cases := []struct {
		name, line, want string
	}{
		{"malformed JSON", `{"type":"message","id":`, "not an agent.channel.v1 line"},
		{"not an object", `hello daemon`, "not an agent.channel.v1 line"},
		{"no type", `{"id":"x"}`, `no "type"`},
		{"wrong field type", `{"type":"message","id":"m","sender":"a","text":"x","group":"yes"}`, "not an agent.channel.v1 line"},
		{"two values", `{"type":"sent","id":"x"} {"type":"sent"}`, "more than one JSON value"},
		{"over 1 MiB", `{"type":"message","id":"m","sender":"a","text":"` + strings.Repeat("x", MaxLine) + `"}`, "longer than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p, done := h.start(ctx)
			go p.tryWrite(c.line) // a 1 MiB line fills the pipe: the daemon stops reading it
			err := ended(t, done)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v, want %q", err, c.want)
			}
			p, done = h.start(ctx)
			p.message(t, Message{ID: "m1", Sender: "alice", Text: "still there?"})
			p.expect(t, TypeAck)
			p.expect(t, TypeSend)
			cancel()
			ended(t, done)
		})
	}
}

// A line of an unknown type and an answer for a send the daemon does not
// know are ignored (logged); blank lines too; the connection goes on.
func TestUnknownTypesAndUnknownAnswersIgnored(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	p.write(t, `{"type":"typing","chat":"dm"}`)
	p.write(t, ``)
	p.write(t, `{"type":"sent","id":"no-such-send"}`)
	p.write(t, `{"type":"error","id":"nor-this","error":"x"}`)
	p.write(t, `{"type":"message","id":"m1","sender":"alice","text":"hi","future_field":[1,2]}`)
	p.expect(t, TypeAck)
	p.expect(t, TypeSend)
	logs := h.logs.String()
	for _, want := range []string{"line of an unknown type ignored", "answer for an unknown send ignored"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	cancel()
	if err := ended(t, done); err != nil {
		t.Fatal(err)
	}
}

// A send the plugin answers with error stays in the outbox and is sent
// again, with the same id, after the retry pause.
func TestFailedSendRetriedWithSameID(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	p.message(t, Message{ID: "m1", Sender: "alice", Text: "hi"})
	p.expect(t, TypeAck)
	first := p.expect(t, TypeSend)
	p.write(t, map[string]string{"type": TypeError, "id": str(first, "id"), "error": "platform said 502"})
	eventually(t, "the failure is recorded", func() bool {
		rows := h.outbox()
		return len(rows) == 1 && rows[0].Attempts == 1 && rows[0].State == mailbox.OutPending
	})
	lines := make(chan map[string]any, 1)
	go func() { lines <- p.next(t) }()
	again := advanceUntil(t, h.clk, 500*time.Millisecond, lines)
	if again["type"] != TypeSend || str(again, "id") != str(first, "id") || str(again, "text") != str(first, "text") {
		t.Fatalf("retry %v, first %v", again, first)
	}
	p.write(t, map[string]string{"type": TypeSent, "id": str(again, "id")})
	eventually(t, "sent", func() bool { return h.outbox()[0].State == mailbox.OutSent })
	cancel()
	ended(t, done)
}

// A plugin that takes a send and never answers is reset after 30 s; the
// send is sent again, with the same id, to the restarted plugin.
func TestUnansweredSendRetriedAcrossRestart(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	p.message(t, Message{ID: "m1", Sender: "alice", Text: "hi"})
	p.expect(t, TypeAck)
	first := p.expect(t, TypeSend)
	h.awaiting(t, 1)
	err := advanceUntil(t, h.clk, 10*time.Second, done)
	if err == nil || !strings.Contains(err.Error(), "unanswered") {
		t.Fatalf("Run: %v", err)
	}
	p, done = h.start(ctx)
	lines := make(chan map[string]any, 1)
	go func() { lines <- p.next(t) }()
	again := advanceUntil(t, h.clk, 500*time.Millisecond, lines)
	if again["type"] != TypeSend || str(again, "id") != str(first, "id") {
		t.Fatalf("after the restart %v, first %v", again, first)
	}
	p.write(t, map[string]string{"type": TypeSent, "id": str(again, "id")})
	eventually(t, "sent", func() bool { return h.outbox()[0].State == mailbox.OutSent })
	cancel()
	ended(t, done)
}

// A plugin that dies with a send in flight: the send is unanswered, not a
// failed attempt, and goes to the restarted plugin at once with the same
// id.
func TestPluginDyingMidSend(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	p.message(t, Message{ID: "m1", Chat: "dm-1", Sender: "alice", Text: "hi"})
	p.expect(t, TypeAck)
	first := p.expect(t, TypeSend)
	p.exit(errors.New("exit status 2"))
	if err := ended(t, done); err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("Run: %v", err)
	}
	if rows := h.outbox(); len(rows) != 1 || rows[0].State != mailbox.OutPending || rows[0].Attempts != 0 {
		t.Fatalf("outbox %+v", rows)
	}
	p, done = h.start(ctx)
	again := p.expect(t, TypeSend)
	if str(again, "id") != str(first, "id") || str(again, "chat") != "dm-1" {
		t.Fatalf("after the restart %v, first %v", again, first)
	}
	p.write(t, map[string]string{"type": TypeSent, "id": str(again, "id")})
	eventually(t, "sent", func() bool { return h.outbox()[0].State == mailbox.OutSent })
	cancel()
	ended(t, done)
}

// A plugin that never reads its stdin: the hello waits (an unbuffered
// pipe) and after 30 s the connection is reset; nothing blocks the
// daemon.
func TestPluginThatNeverReadsItsHello(t *testing.T) {
	h := newHarness(t, nil)
	h.st.unbuffered = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := h.run(ctx)
	h.st.next(t)
	err := advanceUntil(t, h.clk, 10*time.Second, done)
	if err == nil || !strings.Contains(err.Error(), "does not read its stdin") {
		t.Fatalf("Run: %v", err)
	}
}

// A plugin that reads but never writes a line: a send the assistant makes
// unprompted (the message tool) is unanswered after 30 s, the connection
// reset; the send waits in the outbox for the next run.
func TestPluginThatNeverWrites(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	must(t, h.ch.Send(ctx, "chat:room-9", "the build is green"))
	send := p.expect(t, TypeSend)
	if str(send, "chat") != "room-9" || str(send, "reply_to") != "" {
		t.Fatalf("send %v", send)
	}
	h.awaiting(t, 1)
	err := advanceUntil(t, h.clk, 10*time.Second, done)
	if err == nil || !strings.Contains(err.Error(), "unanswered") {
		t.Fatalf("Run: %v", err)
	}
	if rows := h.outbox(); len(rows) != 1 || rows[0].State != mailbox.OutPending || rows[0].Attempts != 0 {
		t.Fatalf("outbox %+v", rows)
	}
}

// A send the plugin dies on every time is given up after maxUnanswered
// runs (failed, logged): the chat's later messages go out.
func TestSendKillingThePluginGivenUp(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	must(t, h.ch.Send(ctx, "dm-1", "poison"))
	must(t, h.ch.Send(ctx, "dm-1", "after it"))
	for range maxUnanswered {
		p, done := h.start(ctx)
		if s := p.expect(t, TypeSend); str(s, "text") != "poison" {
			t.Fatalf("send %v", s)
		}
		p.exit(errors.New("signal: segmentation fault"))
		ended(t, done)
	}
	p, done := h.start(ctx)
	if s := p.expect(t, TypeSend); str(s, "text") != "after it" {
		t.Fatalf("send %v", s)
	}
	if rows := h.outbox(); rows[0].State != mailbox.OutFailed {
		t.Fatalf("outbox %+v", rows)
	}
	cancel()
	ended(t, done)
}

// A flood: with MaxPending messages waiting for their turns the daemon
// stops reading (acks come later, the plugin's writes block); a send in
// flight meanwhile is not timed out, its answer being among the unread
// lines. Once turns finish every message is acked and answered: nothing
// is lost.
func TestFloodBackPressure(t *testing.T) {
	const max, n = 3, 12
	h := newHarness(t, func(_ *Deps, o *Options) { o.MaxPending = max })
	h.hold = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	senders := []string{"a", "b", "c", "d"}
	go func() {
		for i := range n {
			p.tryWrite(messageLine(Message{ID: "f" + string(rune('a'+i)), Sender: senders[i%len(senders)], Text: "flood " + string(rune('a'+i))}))
		}
	}()
	for range max {
		p.expect(t, TypeAck)
	}
	eventually(t, "reading waits", func() bool {
		cn := h.ch.current()
		cn.mu.Lock()
		defer cn.mu.Unlock()
		return !cn.pausedSince.IsZero()
	})
	// An unprompted send now: the plugin answers at once, but its answer
	// queues behind the unread messages.
	must(t, h.ch.Send(ctx, "ops", "notice"))
	send := p.expect(t, TypeSend)
	h.awaiting(t, 1)
	p.write(t, map[string]string{"type": TypeSent, "id": str(send, "id")})
	for range 6 {
		h.clk.Advance(30 * time.Second)
	}
	select {
	case err := <-done:
		t.Fatalf("the connection was reset while the daemon did not read: %v", err)
	default:
	}
	if cn := h.ch.current(); cn == nil || cn.err() != nil {
		t.Fatal("connection ended")
	}
	close(h.hold) // every turn may finish
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(h.logs.String())
		}
	})
	acks := max
	for acks < n {
		m := p.next(t)
		switch m["type"] {
		case TypeAck:
			acks++
		case TypeSend:
			p.write(t, map[string]string{"type": TypeSent, "id": str(m, "id")})
		}
	}
	eventually(t, "every message answered", h.allDone(n))
	var all string
	for _, r := range h.requests() {
		all += r.Text + "\n"
	}
	for i := range n {
		if !strings.Contains(all, "flood "+string(rune('a'+i))) {
			t.Errorf("message %d never reached a turn:\n%s", i, all)
		}
	}
	eventually(t, "the notice is recorded sent", func() bool {
		for _, r := range h.outbox() {
			if r.Item.Text == "notice" {
				return r.State == mailbox.OutSent
			}
		}
		return false
	})
	cancel()
	ended(t, done)
}

// A stranger under the pairing policy gets their code in the chat they
// wrote in, and no turn; an allowlisted sender's turn runs.
func TestStrangerGetsPairingCode(t *testing.T) {
	h := newHarness(t, nil)
	h.policy = pairing.Policy{Mode: pairing.Pairing, AllowFrom: []string{"chat:alice"}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	p.message(t, Message{ID: "s1", Chat: "dm-mallory", Sender: "mallory", Text: "let me in"})
	p.expect(t, TypeAck)
	code := p.expect(t, TypeSend)
	if str(code, "chat") != "dm-mallory" || !strings.Contains(str(code, "text"), "pairing code") {
		t.Fatalf("code %v", code)
	}
	p.write(t, map[string]string{"type": TypeSent, "id": str(code, "id")})
	p.message(t, Message{ID: "a1", Sender: "alice", Text: "hi"})
	p.expect(t, TypeAck)
	if s := p.expect(t, TypeSend); str(s, "text") != "echo: hi" {
		t.Fatalf("send %v", s)
	}
	if r := h.requests(); len(r) != 1 || r[0].Sender != "alice" {
		t.Fatalf("turns %+v", r)
	}
	cancel()
	ended(t, done)
}

// Send finds the chat: a chat the plugin reported, else the direct chat a
// sender last wrote in, else the id as given; "chat:" and "group:chat:"
// prefixes are taken off.
func TestSendResolvesTheChat(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	p.message(t, Message{ID: "m1", Chat: "dm-7", Sender: "alice", Text: "hi"})
	p.expect(t, TypeAck)
	p.write(t, map[string]string{"type": TypeSent, "id": str(p.expect(t, TypeSend), "id")})
	p.message(t, Message{ID: "m2", Chat: "room", Sender: "bob", Text: "@bot hi", Group: true, Mentioned: true})
	p.expect(t, TypeAck)
	p.write(t, map[string]string{"type": TypeSent, "id": str(p.expect(t, TypeSend), "id")})
	for to, want := range map[string]string{"alice": "dm-7", "chat:alice": "dm-7", "room": "room", "group:chat:room": "room", "carol": "carol"} {
		must(t, h.ch.Send(ctx, to, "to "+to))
		s := p.expect(t, TypeSend)
		if str(s, "chat") != want || str(s, "text") != "to "+to {
			t.Errorf("Send(%q): %v, want chat %q", to, s, want)
		}
		p.write(t, map[string]string{"type": TypeSent, "id": str(s, "id")})
	}
	if err := h.ch.Send(ctx, "alice", "  "); err == nil {
		t.Error("an empty text was queued")
	}
	cancel()
	ended(t, done)
}

// A reply longer than one send carries goes out as several sends, in
// order, each under the line limit.
func TestLongReplySplit(t *testing.T) {
	h := newHarness(t, nil)
	long := strings.Repeat("word ", 60<<10) // 300 KiB
	h.answer = func(Request) []string { return []string{long} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	p.message(t, Message{ID: "m1", Sender: "alice", Text: "tell me everything"})
	p.expect(t, TypeAck)
	var got strings.Builder
	for got.Len() < len(strings.TrimSpace(long))-5 {
		s := p.expect(t, TypeSend)
		if len(str(s, "text")) > maxSendText {
			t.Fatalf("a send of %d bytes", len(str(s, "text")))
		}
		got.WriteString(str(s, "text") + " ")
		p.write(t, map[string]string{"type": TypeSent, "id": str(s, "id")})
	}
	if strings.Fields(got.String())[0] != "word" || len(strings.Fields(got.String())) != 60<<10 {
		t.Fatalf("reassembled %d words", len(strings.Fields(got.String())))
	}
	cancel()
	ended(t, done)
}

// Stopping: the plugin gets end-of-file on its stdin and StopGrace to
// exit; one that does not is killed. Run returns nil.
func TestStopKillsAPluginIgnoringEOF(t *testing.T) {
	h := newHarness(t, nil)
	h.st.ignoreEOF = true
	ctx, cancel := context.WithCancel(context.Background())
	_, done := h.start(ctx)
	cancel()
	if err := advanceUntil(t, h.clk, time.Second, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// In a group, one turn runs at a time, in order; messages of different
// senders never share a turn (a turn is its sender's: their rights),
// while one sender's queued messages do.
func TestGroupTurnsInOrderOneSenderEach(t *testing.T) {
	h := newHarness(t, nil)
	h.hold = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, done := h.start(ctx)
	msg := func(id, sender string) Message {
		return Message{ID: id, Chat: "room", Sender: sender, Text: id, Group: true, Mentioned: true}
	}
	p.message(t, msg("g1", "bob"))
	p.expect(t, TypeAck)
	eventually(t, "the first turn runs", func() bool { return len(h.requests()) == 1 })
	for _, m := range []Message{msg("g2", "carol"), msg("g3", "carol"), msg("g4", "bob")} {
		p.message(t, m)
		p.expect(t, TypeAck)
	}
	close(h.hold)
	for range 3 {
		p.write(t, map[string]string{"type": TypeSent, "id": str(p.expect(t, TypeSend), "id")})
	}
	eventually(t, "all answered", h.allDone(4))
	var got []string
	for _, r := range h.requests() {
		got = append(got, r.Sender+":"+strings.ReplaceAll(r.Text, "\n", "+"))
	}
	if strings.Join(got, " ") != "bob:g1 carol:g2+g3 bob:g4" {
		t.Fatalf("turns %q", got)
	}
	cancel()
	ended(t, done)
}
