package daemon

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/fleet/natstest"
	"agent/pkg/llm/llmtest"
	"agent/pkg/pairing"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
	"agent/pkg/wecom/wecomtest"
	"agent/pkg/workspace"
)

// agentctl fleet home rehomes a user without moving anything: their data
// stays on the old box ("a conversation whose data may stay where it
// is"). A later agentctl fleet move back to that box that fails on the
// import (here: b's quota is smaller than the user's folder on a) is
// "undone" — and the undo sends a purge to b, which deletes the user's
// folder, jobs, approval and memory there: data that was on b before the
// move began, and its only copy (a never had it). An undone move should
// leave both boxes as they were.
func TestUndoneMoveDeletesTheTargetsOwnCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("two daemons and a NATS server")
	}
	nats := natstest.Start(t)
	api := wecomtest.NewServer("wxcorp", "secret", 1000002)
	t.Cleanup(api.Close)
	llm := fleetLLM(t)
	a := startFleetBox(t, "a", nats.URL(), true, api, llm.BaseURL())
	b := startFleetBoxWith(t, "b", nats.URL(), false, api, llm.BaseURL(), "", nil,
		func(c *config.Config) { c.Agent.WorkspaceQuotaMB = 1 })
	ctx := context.Background()
	ca, cb := admin.NewClient(a.sock), admin.NewClient(b.sock)
	waitFleetBoxes(t, ca, 2)

	// Bob lived on b: a file and a reminder there.
	if _, err := ca.FleetHome(ctx, admin.FleetRequest{User: "bob", Box: "b"}); err != nil {
		t.Fatal(err)
	}
	bobOn := func(box *fleetBox) string {
		return filepath.Join(box.ws, workspace.FilesDir, workspace.ScopeDir("wecom:bob"))
	}
	os.MkdirAll(bobOn(b), 0o700)
	if err := os.WriteFile(filepath.Join(bobOn(b), "only-on-b.txt"), []byte("written while bob lived on b"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.AddJob(ctx, admin.JobSpec{Owner: "wecom:bob", Channel: "wecom", To: "bob", Cron: "0 9 * * 1", Text: "weekly report"}); err != nil {
		t.Fatal(err)
	}
	// Rehomed to a without his data; on a he gathers a folder bigger
	// than b's quota.
	if _, err := ca.FleetHome(ctx, admin.FleetRequest{User: "bob", Box: "a"}); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(bobOn(a), 0o700)
	if err := os.WriteFile(filepath.Join(bobOn(a), "big.bin"), bytes.Repeat([]byte("x"), 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}

	// The move back to b fails on b's quota and is undone.
	if _, err := ca.FleetMove(ctx, admin.FleetRequest{User: "bob", Box: "b"}); err == nil {
		t.Fatal("the move over b's quota succeeded")
	} else {
		t.Logf("move: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(bobOn(b), "only-on-b.txt")); err != nil {
		t.Errorf("the undone move deleted bob's file on b, which was there before the move: %v", err)
	} else if string(got) != "written while bob lived on b" {
		t.Errorf("b's file changed: %q", got)
	}
	js, err := cb.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, j := range js {
		if j.Owner == "wecom:bob" {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("the undone move left bob %d jobs on b, which held 1 before it", kept)
	}
}

// A message the old box held during a model outage ("I have kept your
// message and will answer it here as soon as the service is back") is a
// row of held_turns: Drained does not count it, the snapshot does not
// carry it, the purge does not touch it. The move now also purges the
// user's approval on the old box, so when the service is back the old
// box's backlog finds the user "no longer admitted by the DM policy"
// (dm_policy = "pairing") and drops the message, saying nothing: the
// promised answer never comes.
func TestHeldMessageDroppedByTheMove(t *testing.T) {
	if testing.Short() {
		t.Skip("two daemons and a NATS server")
	}
	nats := natstest.Start(t)
	api := wecomtest.NewServer("wxcorp", "secret", 1000002)
	t.Cleanup(api.Close)
	llm := fleetLLM(t)
	var down atomic.Bool
	llmB := llmtest.New(t)
	llmB.Func(func(r *llmtest.Request) llmtest.Reply {
		if down.Load() {
			return llmtest.ServerError(http.StatusServiceUnavailable)
		}
		last := ""
		for _, m := range r.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		if r.Stream {
			return llmtest.Stream("[" + r.Model + "] " + last)
		}
		return llmtest.Text("[" + r.Model + "] " + last)
	})
	pairingPolicy := func(c *config.Config) { c.Security.DMPolicy = "pairing" }
	a := startFleetBoxWith(t, "a", nats.URL(), true, api, llm.BaseURL(), "", nil, pairingPolicy)
	b := startFleetBoxWith(t, "b", nats.URL(), false, api, llmB.BaseURL(), "", nil, pairingPolicy)
	ctx := context.Background()
	ca := admin.NewClient(a.sock)
	waitFleetBoxes(t, ca, 2)
	if _, err := ca.FleetHome(ctx, admin.FleetRequest{User: "bob", Box: "b"}); err != nil {
		t.Fatal(err)
	}
	st := storetest.OpenAt(t, filepath.Join(b.state, store.FileName))
	if err := pairing.New(st.DB(), nil).Import(ctx, "wecom:bob", &pairing.Portable{ApprovedAt: time.Now(), ApprovedBy: "boss"}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	down.Store(true)
	if code := postCallback(t, a, "bob", "question during the outage"); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	waitDelivered(t, api, "bob", conversation.HeldText)
	// Since the fix: the move is refused at once while a message of bob
	// waits for the model service on b (b answers it when the service is
	// back); the user stays on b with their approval.
	if _, err := ca.FleetMove(ctx, admin.FleetRequest{User: "bob", Box: "a"}); err == nil || !strings.Contains(err.Error(), "wait for the model service") {
		t.Fatalf("a move with a held message: %v", err)
	}
	down.Store(false)
	// Wait until b's backlog has dealt with the held turn (answered or
	// dropped: the row goes either way), then look for the answer.
	st = storetest.OpenAt(t, filepath.Join(b.state, store.FileName))
	deadline := time.Now().Add(90 * time.Second)
	for {
		var n int
		if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM held_turns WHERE state = 0`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b's backlog never took the held turn")
		}
		time.Sleep(200 * time.Millisecond)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		answered := false
		for _, m := range api.Messages() {
			answered = answered || (m.ToUser == "bob" && strings.Contains(m.Content, "question during the outage"))
		}
		if answered {
			// Answered: now bob moves.
			if _, err := ca.FleetMove(ctx, admin.FleetRequest{User: "bob", Box: "a"}); err != nil {
				t.Fatalf("the move once the held message was answered: %v", err)
			}
			return
		}
		if time.Now().After(deadline) {
			var got []string
			for _, m := range api.Messages() {
				got = append(got, m.ToUser+": "+m.Content)
			}
			var state int
			st.DB().QueryRowContext(ctx, `SELECT state FROM held_turns ORDER BY id DESC LIMIT 1`).Scan(&state)
			t.Fatalf("b's backlog let go of the message held before the move (held_turns.state %d; 3 is dropped), and it was never answered; sent: %q", state, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
