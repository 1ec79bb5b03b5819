package fleetlink

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/channel"
	"agent/pkg/config"
	"agent/pkg/fleet"
	"agent/pkg/health"
	"agent/pkg/metrics"
	"agent/pkg/store/storetest"
)

// convs is the pipeline's side of a move, as a test sets it.
type convs struct {
	busy bool
	held []string
	Conversations
}

func (c convs) Busy(context.Context, string, string) (bool, error) { return c.busy, nil }
func (c convs) Held(_ context.Context, ch string) ([]string, error) {
	if ch != "wecom" {
		return nil, errors.New("asked for " + ch)
	}
	return c.held, nil
}

// drainer is a channel with something of conv waiting, or not.
type drainer struct {
	waiting map[string]bool
	err     error
	asked   *[]string
}

func (d drainer) Drained(_ context.Context, conv string) (bool, error) {
	*d.asked = append(*d.asked, conv)
	return !d.waiting[conv], d.err
}

// A conversation is drained when every channel answering for the fleet's
// channel says so and the pipeline holds no turn or job run of it.
func TestDrainedAsksEveryChannelAndThePipeline(t *testing.T) {
	ctx := context.Background()
	var asked []string
	app := drainer{waiting: map[string]bool{"alice": true}, asked: &asked}
	bot := drainer{waiting: map[string]bool{"group:chat7": true}, asked: &asked}
	var named []string
	link := Link{Channel: "wecom", Conversations: convs{}, Drainers: func(ch string) []channel.Drainer {
		named = append(named, ch)
		return []channel.Drainer{app, bot}
	}}
	l := local{link.Conversations, link}
	for conv, want := range map[string]bool{"alice": false, "group:chat7": false, "bob": true} {
		if got, err := l.Drained(ctx, "wecom", conv); err != nil || got != want {
			t.Errorf("Drained(%s) = %v, %v; want %v", conv, got, err, want)
		}
	}
	if !slices.Equal(slices.Compact(named), []string{"wecom"}) {
		t.Errorf("drainers asked for %q", named)
	}
	if got, _ := (local{convs{busy: true}, link}).Drained(ctx, "wecom", "bob"); got {
		t.Error("drained while the pipeline is busy with the conversation")
	}
	boom := errors.New("database is locked")
	link.Drainers = func(string) []channel.Drainer { return []channel.Drainer{drainer{err: boom, asked: &asked}} }
	if got, err := (local{convs{}, link}).Drained(ctx, "wecom", "bob"); got || !errors.Is(err, boom) {
		t.Errorf("Drained with a failing channel = %v, %v", got, err)
	}
	link.Drainers = nil // no channel answers for it: the pipeline decides
	if got, err := (local{convs{}, link}).Drained(ctx, "wecom", "bob"); !got || err != nil {
		t.Errorf("Drained with no channels = %v, %v", got, err)
	}
}

// The conversations a move holds are the fleet channel's.
func TestHeldNamesTheFleetChannel(t *testing.T) {
	l := local{convs{held: []string{"alice", "group:chat7"}}, Link{Channel: "wecom"}}
	got, err := l.Held(context.Background())
	want := []fleet.Conversation{{Channel: "wecom", Conv: "alice"}, {Channel: "wecom", Conv: "group:chat7"}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Held = %v, %v; want %v", got, err, want)
	}
}

// The heartbeat counts every channel's waiting messages.
func TestBeatCountsWaitingMessages(t *testing.T) {
	db := storetest.DB(t)
	for i, ch := range []string{"wecom", "wecom_bot", "voice"} {
		if _, err := db.Exec(`INSERT INTO inbox(channel, dedup_key, sender, chat_id, msg_type, content, raw, received_at, state) VALUES (?, ?, 'u', '', 'text', 'x', '', 0, ?)`,
			ch, "k", i%2); err != nil {
			t.Fatal(err)
		}
	}
	b := local{convs{}, Link{Health: health.New(time.Second, nil), DB: db}}.Beat(context.Background())
	if b.QueueDepth != 2 || !b.Healthy || b.RSSBytes <= 0 {
		t.Errorf("beat = %+v; want queue depth 2, healthy, a resident size", b)
	}
}

// On a single box agentctl fleet says so; in a fleet it names a user with
// or without the channel's prefix, and refuses none.
func TestAdminOnASingleBoxAndUserNames(t *testing.T) {
	ctx := context.Background()
	var l Link
	if _, err := l.FleetStatus(ctx); !errors.Is(err, errNoFleet) {
		t.Errorf("FleetStatus = %v", err)
	}
	if _, err := l.FleetHome(ctx, admin.FleetRequest{User: "bob", Box: "b"}); !errors.Is(err, errNoFleet) {
		t.Errorf("FleetHome = %v", err)
	}
	if _, err := l.FleetMove(ctx, admin.FleetRequest{User: "bob", Box: "b"}); !errors.Is(err, errNoFleet) {
		t.Errorf("FleetMove = %v", err)
	}
	if stop := l.Run(ctx); stop == nil {
		t.Error("Run on a single box returned no stop")
	} else {
		stop()
	}
	l.Channel = "wecom"
	for in, want := range map[string]string{"bob": "bob", " wecom:bob ": "bob", "group:chat7": "group:chat7", "wecom:group:chat7": "group:chat7"} {
		if got, err := l.user(in); err != nil || got != want {
			t.Errorf("user(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "wecom:"} {
		if _, err := l.user(in); err == nil || err.Error() != "a user is required (the WeCom user id, or group:CHATID)" {
			t.Errorf("user(%q): %v", in, err)
		}
	}
}

// A box in a fleet whose host names no fleet channel does not join it,
// and health says why; a single box registers nothing.
func TestConnectWithoutAChannelFailsTheCheck(t *testing.T) {
	chk := health.New(time.Second, nil)
	reg := metrics.NewRegistry()
	if f := Connect(Config{Fleet: config.Fleet{}, Health: chk, Metrics: reg}); f != nil {
		t.Fatal("a single box joined a fleet")
	}
	if rep := chk.Run(context.Background()); len(rep.Checks) != 0 {
		t.Fatalf("a single box registered %+v", rep.Checks)
	}
	if f := Connect(Config{Fleet: config.Fleet{Enabled: true, NATSURL: "nats://127.0.0.1:1", Box: "a"}, Health: chk, Metrics: reg}); f != nil {
		t.Fatal("joined a fleet without a channel")
	}
	rep := chk.Run(context.Background())
	if len(rep.Checks) != 1 || rep.Checks[0].Name != "fleet" || rep.Checks[0].Detail != errNoChannel.Error() {
		t.Fatalf("checks = %+v", rep.Checks)
	}
}
