package wecombot

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/channel/gate"
	"agent/pkg/channel/mailbox"
	"agent/pkg/clock"
	"agent/pkg/conversation"
	"agent/pkg/fleet"
	"agent/pkg/fleet/natstest"
	"agent/pkg/pairing"
	"agent/pkg/store/storetest"
	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
)

// answerConv is a Conversation that answers every turn at once.
type answerConv struct{ turns int }

func (c *answerConv) Handle(ctx context.Context, in conversation.Inbound, reply conversation.Reply) (<-chan struct{}, error) {
	c.turns++
	_ = reply(ctx, "answer to "+in.Text)
	done := make(chan struct{})
	close(done)
	return done, nil
}

// storeBot is a Bot with a store, an inbox, an outbox and a processor (no
// connection, no fleet: the test sets them), every sender admitted.
func storeBot(t *testing.T) (*Bot, *processor, *answerConv) {
	t.Helper()
	st := storetest.Open(t)
	b := &Bot{logger: slog.New(slog.DiscardHandler), clock: clock.Real()}
	b.host.DB = st.DB()
	b.host.Gate = gate.Gate{Pairings: pairing.New(st.DB(), time.Now),
		Policy: func() pairing.Policy { return pairing.Policy{Mode: pairing.Open} }}
	b.inbox = mailbox.NewInbox(st.DB(), Name, nil)
	b.outbox = mailbox.NewOutbox(st.DB(), mailbox.OutboxConfig{Channel: Name, Send: func(context.Context, mailbox.Message) error { return nil }})
	b.media = newFetcher(filepath.Join(t.TempDir(), "spool"), "ws://127.0.0.1:1", nil, nil, b.logger)
	conv := &answerConv{}
	p := &processor{b: b, conv: conversation.Turns(conv, nil, nil), policy: b.host.Gate, every: 400 * time.Millisecond, limit: streamLimit(Options{}), wakeCh: make(chan struct{}, 1)}
	b.proc = p
	return b, p, conv
}

// runTurn runs the pending rows as one turn, turning a panic into an error
// (in the daemon the turn runs in its own goroutine, where a panic kills
// the process).
func runTurn(p *processor) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the turn panicked: %v", v)
		}
	}()
	rows, err := p.b.inbox.Pending(context.Background())
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return fmt.Errorf("no pending row")
	}
	return p.turn(context.Background(), rows)
}

// A box that ran the AI Bot alone is joined to a fleet as a
// box that is not the ingress (its bot is now built in relay mode, client
// nil). A bot message left pending by the restart ("stays pending,
// answered after the restart") has a row of the single-box format (no
// "ingress"): processor.streamable takes the local branch and calls
// p.b.client.Status() on the nil client. The turn goroutine has no
// recover: the daemon panics, and again on every start while the row is
// pending.
func TestRelayBoxPanicsOnPreFleetRow(t *testing.T) {
	b, p, _ := storeBot(t)
	f, err := fleet.New(fleet.Config{URL: "nats://127.0.0.1:1", Box: "b"}) // not the ingress
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b.fleet = f                                                       // client nil: relay mode, as Build makes it on a non-ingress box
	raw, _ := json.Marshal(stored{ReqID: "r1", MsgID: "m1", Conn: 0}) // a row stored before the fleet
	if _, err := b.inbox.Put(context.Background(), mailbox.Received{DedupKey: "m1", Sender: "bob", Kind: "text", Content: "hello", Raw: string(raw)}); err != nil {
		t.Fatal(err)
	}
	if err := runTurn(p); err != nil {
		t.Fatalf("a pending single-box row on a relay box: %v", err)
	}
}

// The other way: a box whose bot rows came from the fleet
// (their "ingress" is set) runs without its fleet link — fleet.enabled
// turned off, or fleet.New failed at start (startFleet only logs it and
// the daemon runs on with h.Fleet nil), while the bot, enabled on the
// ingress, keeps its connection. processor.streamable reads
// p.b.fleet.Box() on a nil *fleet.Fleet (and respond would call
// b.fleet.Call): a nil-pointer panic in the turn goroutine, on every start.
func TestFleetRowWithoutFleetPanics(t *testing.T) {
	b, p, _ := storeBot(t)
	b.client = aibot.New(aibot.Config{URL: "ws://127.0.0.1:1", BotID: "x", Secret: "y"}) // a single box now: a client, no fleet
	raw, _ := json.Marshal(stored{ReqID: "r1", MsgID: "m1", Ingress: "a", Conn: 1, At: time.Now().UTC()})
	if _, err := b.inbox.Put(context.Background(), mailbox.Received{DedupKey: "m1", Sender: "bob", Kind: "text", Content: "hello", Raw: string(raw)}); err != nil {
		t.Fatal(err)
	}
	if err := runTurn(p); err != nil {
		t.Fatalf("a pending fleet row on a box without its fleet link: %v", err)
	}
}

// relayFleet is an ingress "a" (bot connected to srv, its forward queue,
// serving the reply calls) and a relay home "b", both on one NATS server,
// on one fake clock.
func relayFleet(t *testing.T) (ingress, home *Bot, srv *aibottest.Server, clk *clock.Fake) {
	t.Helper()
	nats := natstest.Start(t)
	srv = aibottest.New(t)
	clk = clock.NewFake(time.Unix(1_800_000_000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	newF := func(box string, ingress bool) *fleet.Fleet {
		f, err := fleet.New(fleet.Config{URL: nats.URL(), Box: box, Ingress: ingress})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		return f
	}
	ingress, _, _ = storeBot(t)
	ingress.clock = clk
	ingress.fleet = newF("a", true)
	ingress.fwd = mailbox.NewInbox(ingress.host.DB, forwardChannel, clk)
	ingress.fwdWake = make(chan struct{}, 1)
	ingress.live.ttl = liveTTL(Options{})
	ingress.client = aibot.New(aibot.Config{URL: srv.URL(), BotID: aibottest.BotID, Secret: aibottest.Secret, Clock: clk,
		Heartbeat: time.Hour, AckTimeout: time.Hour, Handle: ingress.handle})
	done := make(chan struct{})
	go func() { defer close(done); _ = ingress.client.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := ingress.serve(ctx); err != nil {
		t.Fatal(err)
	}
	if !srv.WaitReady(10 * time.Second) {
		t.Fatal("not subscribed")
	}
	for ingress.client.Status().State != aibot.StateReady {
		time.Sleep(time.Millisecond)
	}
	home, _, _ = storeBot(t)
	home.clock = clk
	home.fleet = newF("b", false)
	return ingress, home, srv, clk
}

// received waits for the ingress to queue msgID and returns the row the
// home box stores for it (what fromFleet makes of the published payload).
func received(t *testing.T, ingress, home *Bot, msgID string) stored {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := ingress.fwd.Pending(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			var m fleetMsg
			if json.Unmarshal([]byte(r.Raw), &m) == nil && m.MsgID == msgID {
				if err := home.fromFleet(context.Background(), m.conversation(), []byte(r.Raw)); err != nil {
					t.Fatal(err)
				}
				hr, _ := home.inbox.Pending(context.Background())
				var sr stored
				_ = json.Unmarshal([]byte(hr[len(hr)-1].Raw), &sr)
				return sr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not queued on the ingress", msgID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The ingress keeps a req_id "live" for streamLimit after it
// received the message (liveReqs.ttl = streamLimit), but the home box's
// stream may stay open streamLimit after its *first frame*, which comes
// later (and streamable admits a turn starting up to limit/2 after the
// message). So the frame that closes a long stream at the limit ("…
// (continued in the next message)", finish) always comes after the ttl
// and is refused as stale: the stream is never finished on WeCom (it
// shows the partial text until WeCom's own cut), where a single box
// finishes it (TestStreamLimit).
func TestRemoteStreamNeverFinishedAtLimit(t *testing.T) {
	ingress, home, srv, clk := relayFleet(t)
	srv.Text("m-long", "bob", "single", "", "long job")
	sr := received(t, ingress, home, "m-long")
	if sr.Ingress != "a" || sr.Conn == 0 {
		t.Fatalf("home row %+v", sr)
	}
	s := newStream(home, sr, "s_m-long", 400*time.Millisecond, streamLimit(Options{}))
	ctx := context.Background()
	clk.Advance(time.Second) // the stream opens a moment after the ingress received the message
	s.start(ctx)
	settle(t, srv, clk, 0, 1)
	s.add("Working through the files")
	deadline := time.Now().Add(15 * time.Second)
	for {
		cs := contents(srv)
		if len(cs) > 0 && strings.HasSuffix(cs[len(cs)-1], "[finish]") {
			break
		}
		s.mu.Lock()
		stopped := s.broken || s.expired
		s.mu.Unlock()
		if stopped || time.Now().After(deadline) {
			t.Fatalf("the home box's stream was not finished at the limit (broken %v): frames %q", s.broken, cs)
		}
		clk.Advance(10 * time.Second)
		time.Sleep(5 * time.Millisecond)
	}
}

// Same bound, earlier: a turn that starts 2½ minutes after
// the message (behind the user's previous turn; streamable admits it up to
// limit/2) and takes 4 minutes is well inside its stream's 5½ minutes,
// and a single box finishes it in the stream. Through the ingress its
// final frame comes 6½ min after the message, past the ttl: refused, the
// stream is left unfinished (WeCom shows the partial text) and the whole
// answer goes by push.
func TestRemoteStreamCutBeforeItsLimit(t *testing.T) {
	ingress, home, srv, clk := relayFleet(t)
	srv.Text("m-late", "bob", "single", "", "second question")
	sr := received(t, ingress, home, "m-late")
	clk.Advance(150 * time.Second) // waited behind bob's previous turn
	p := home.proc
	if !p.streamable(mailbox.Row{Received: clk.Now()}, sr) {
		t.Fatal("not streamable: the test's premise is wrong")
	}
	s := newStream(home, sr, "s_m-late", 400*time.Millisecond, streamLimit(Options{}))
	ctx := context.Background()
	s.start(ctx)
	settle(t, srv, clk, 0, 1)
	s.add("Thinking")
	settle(t, srv, clk, 0, 2)
	for range 24 { // four minutes of work
		clk.Advance(10 * time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	if rest := s.finish(ctx, "Done."); rest != "" {
		cs := contents(srv)
		t.Fatalf("a 4-minute turn opened %v after its message was not finished in its stream (4 min < the stream's %v): pushed %q, frames %q",
			150*time.Second, streamLimit(Options{}), rest, cs)
	}
}
