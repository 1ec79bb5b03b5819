package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/channel/builtin"
	wecomch "agent/pkg/channel/wecom"
	"agent/pkg/config"
	"agent/pkg/fleet/natstest"
	"agent/pkg/llm/llmtest"
	"agent/pkg/localmodels"
	"agent/pkg/memory"
	"agent/pkg/pairing"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
	wx "agent/pkg/wecom"
	"agent/pkg/wecom/wecomtest"
	"agent/pkg/workspace"
)

const (
	fleetToken  = "QDG6eK"
	fleetAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
)

// fleetBox is one daemon of a fleet test.
type fleetBox struct {
	name, addr, sock, state, ws string
	stop                        func()
}

// startFleetBox runs a daemon as box name of the fleet on nats, WeCom
// against api; its model answers "[model-NAME] <the user's text>", so a
// reply says which box wrote it.
func startFleetBox(t testing.TB, name, natsURL string, ingress bool, api *wecomtest.Server, llmURL string) *fleetBox {
	return startFleetBoxWith(t, name, natsURL, ingress, api, llmURL, "", nil, nil)
}

// startFleetBoxWith is startFleetBox with extra configuration, local
// models, and seed run on the configuration before the daemon starts.
func startFleetBoxWith(t testing.TB, name, natsURL string, ingress bool, api *wecomtest.Server, llmURL, extra string,
	models *localmodels.Set, seed func(*config.Config)) *fleetBox {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte(fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
[agent]
state_dir = "var"
workspace = "ws"
[llm]
provider = "custom"
model = "model-%s"
base_url = %q
[security]
dm_policy = "open"
[wecom]
enabled = true
corp_id = "wxcorp"
corp_secret = "secret"
agent_id = 1000002
token = %q
encoding_aes_key = %q
api_base = %q
debounce = "0s"
[fleet]
enabled = true
nats_url = %q
box = %q
ingress = %v
%s`, name, llmURL, fleetToken, fleetAESKey, api.URL, natsURL, name, ingress, extra)), 0o600)
	cfg, _, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if seed != nil {
		seed(cfg)
	}
	n := newFakeNotifier(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := Options{Config: cfg, Notifier: n, Channels: builtin.Channels(), FleetChannel: wecomch.Channel}
	if models != nil {
		opts.Models = models
	}
	go func() { done <- Run(ctx, opts) }()
	var stopped atomic.Bool
	stop := func() {
		if stopped.Swap(true) {
			return
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run %s: %v", name, err)
		}
	}
	t.Cleanup(stop)
	n.waitFor(t, "READY=1", 1)
	n.mu.Lock()
	ready := n.msgs[0]
	n.mu.Unlock()
	return &fleetBox{name: name, addr: strings.TrimSpace(ready[strings.Index(ready, "serving on ")+len("serving on "):]),
		sock: cfg.Server.AdminSocket, state: cfg.Agent.StateDir, ws: cfg.Agent.Workspace, stop: stop}
}

// fleetLLM answers every request with the model's name and the user's
// last text.
func fleetLLM(t testing.TB) *llmtest.Server {
	srv := llmtest.New(t)
	srv.Func(func(r *llmtest.Request) llmtest.Reply {
		last := ""
		for _, m := range r.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		text := "[" + r.Model + "] " + last
		if r.Stream {
			return llmtest.Stream(text)
		}
		return llmtest.Text(text)
	})
	return srv
}

var fleetMsgID atomic.Int64

// postCallback sends a signed, encrypted WeCom text callback from user to
// box and returns the HTTP status.
func postCallback(t testing.TB, box *fleetBox, user, text string) int {
	t.Helper()
	c, err := wx.NewCrypto(fleetToken, fleetAESKey, "wxcorp")
	if err != nil {
		t.Fatal(err)
	}
	id := fleetMsgID.Add(1)
	msg := &wx.Message{ToUserName: "wxcorp", FromUserName: user, CreateTime: time.Now().Unix(), MsgType: "text", Content: text,
		MsgID: strconv.FormatInt(7000000+id, 10), AgentID: 1000002}
	req, err := wecomtest.CallbackRequest(c, "http://"+box.addr+"/wecom/callback", msg, strconv.FormatInt(time.Now().Unix(), 10), strconv.FormatInt(id, 10))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitDelivered(t testing.TB, api *wecomtest.Server, user, content string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for api.Delivered(user, content) == 0 {
		if time.Now().After(deadline) {
			var got []string
			for _, m := range api.Messages() {
				got = append(got, m.ToUser+": "+m.Content)
			}
			t.Fatalf("%s never got %q; sent: %q", user, content, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two daemons in fleet mode behind one WeCom callback: each user is
// answered by the box they are homed on; the box that is not the ingress
// refuses callbacks; a user moved with agentctl fleet move takes their
// memory and conversation along and is answered by the new box.
func TestFleetTwoDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("two daemons and a NATS server")
	}
	nats := natstest.Start(t)
	api := wecomtest.NewServer("wxcorp", "secret", 1000002)
	t.Cleanup(api.Close)
	llm := fleetLLM(t)
	a := startFleetBox(t, "a", nats.URL(), true, api, llm.BaseURL())
	b := startFleetBox(t, "b", nats.URL(), false, api, llm.BaseURL())
	ctx := context.Background()
	ca, cb := admin.NewClient(a.sock), admin.NewClient(b.sock)
	waitFleetBoxes(t, ca, 2)
	if _, err := cb.FleetHome(ctx, admin.FleetRequest{User: "bob", Box: "b"}); err != nil {
		t.Fatal(err)
	}
	if code := postCallback(t, a, "alice", "hello from alice"); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	if code := postCallback(t, a, "bob", "hello from bob"); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	waitDelivered(t, api, "alice", "[model-a] hello from alice")
	waitDelivered(t, api, "bob", "[model-b] hello from bob")
	if code := postCallback(t, b, "bob", "to the wrong box"); code != http.StatusServiceUnavailable {
		t.Fatalf("the box that is not the ingress answered %d, want 503", code)
	}

	// Bob's memory on b: a fact, written as the compressor would.
	st := storetest.OpenAt(t, filepath.Join(b.state, store.FileName))
	m := memory.New(st.DB(), memory.Config{}, nil, time.Now)
	if _, err := m.Add(ctx, "wecom:bob", memory.Input{Text: "Bob's daughter is called Mia.", Keywords: []string{"daughter", "Mia"}}); err != nil {
		t.Fatal(err)
	}
	// His approval (as if paired under dm_policy pairing), a file and a
	// weekly reminder, on b.
	if err := pairing.New(st.DB(), nil).Import(ctx, "wecom:bob", &pairing.Portable{ApprovedAt: time.Now(), ApprovedBy: "boss"}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	st.Close()
	bobDir := filepath.Join(workspace.FilesDir, workspace.ScopeDir("wecom:bob"), "notes")
	if err := os.MkdirAll(filepath.Join(b.ws, bobDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.ws, bobDir, "预算.txt"), []byte("budget: 42"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.AddJob(ctx, admin.JobSpec{Owner: "wecom:bob", Channel: "wecom", To: "bob", Cron: "0 9 * * 1", Text: "weekly report"}); err != nil {
		t.Fatal(err)
	}

	moved, err := ca.FleetMove(ctx, admin.FleetRequest{User: "bob", Box: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if moved.From != "b" || moved.To != "a" || moved.PurgeErr != "" {
		t.Fatalf("move: %+v", moved)
	}
	facts, err := ca.MemoryList(ctx, admin.MemoryQuery{Scope: "wecom:bob"})
	if err != nil || len(facts) != 1 || !strings.Contains(facts[0].Text, "Mia") {
		t.Fatalf("bob's memory on a after the move: %+v, %v", facts, err)
	}
	if left, _ := cb.MemoryList(ctx, admin.MemoryQuery{Scope: "wecom:bob"}); len(left) != 0 {
		t.Fatalf("b kept bob's memory: %+v", left)
	}
	if got, err := os.ReadFile(filepath.Join(a.ws, bobDir, "预算.txt")); err != nil || string(got) != "budget: 42" {
		t.Fatalf("bob's file on a after the move: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(b.ws, workspace.FilesDir, workspace.ScopeDir("wecom:bob"))); !os.IsNotExist(err) {
		t.Fatalf("b kept bob's folder: %v", err)
	}
	if moved.FileBytes == 0 {
		t.Fatalf("the move reports no files: %+v", moved)
	}
	jobsOf := func(c *admin.Client) []admin.Job {
		js, err := c.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []admin.Job
		for _, j := range js {
			if j.Owner == "wecom:bob" {
				out = append(out, j)
			}
		}
		return out
	}
	if js := jobsOf(ca); len(js) != 1 || js[0].Spec != "0 9 * * 1" || js[0].State != "active" {
		t.Fatalf("bob's jobs on a after the move: %+v", js)
	}
	if js := jobsOf(cb); len(js) != 0 {
		t.Fatalf("b kept bob's jobs: %+v", js)
	}
	approved := func(c *admin.Client) bool {
		ps, err := c.PairList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.User == "wecom:bob" && p.State == "approved" {
				return true
			}
		}
		return false
	}
	if !approved(ca) || approved(cb) {
		t.Fatalf("bob's approval did not move: on a %v, on b %v", approved(ca), approved(cb))
	}
	sessions, err := ca.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range sessions {
		if s.Key == "p2p:wecom:bob" && s.Messages >= 2 {
			found = true
		}
	}
	if !found {
		t.Fatalf("bob's conversation did not move to a: %+v", sessions)
	}
	if code := postCallback(t, a, "bob", "after the move"); code != http.StatusOK {
		t.Fatalf("ingress answered %d", code)
	}
	waitDelivered(t, api, "bob", "[model-a] after the move")

	// NATS down: the ingress refuses what it cannot persist (WeCom
	// retries); back up, it takes messages again.
	nats.Stop()
	if code := postCallback(t, a, "alice", "while NATS is down"); code != http.StatusServiceUnavailable {
		t.Fatalf("with NATS down the ingress answered %d, want 503", code)
	}
	nats.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for postCallback(t, a, "alice", "NATS is back") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the ingress did not take messages again after NATS came back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitDelivered(t, api, "alice", "[model-a] NATS is back")
}

// Two daemons on a three-node NATS cluster (streams and buckets with three
// replicas): a node dies while the ingress takes a burst; every callback
// it acknowledged is answered once, by the home box.
func TestFleetClusterNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("two daemons and a three-node NATS cluster")
	}
	c := natstest.StartCluster(t)
	api := wecomtest.NewServer("wxcorp", "secret", 1000002)
	t.Cleanup(api.Close)
	llm := fleetLLM(t)
	a := startFleetBoxWith(t, "a", c.URLs(), true, api, llm.BaseURL(), "replicas = 3\ndefault_home = \"b\"\n", nil, nil)
	startFleetBoxWith(t, "b", c.URLs(), false, api, llm.BaseURL(), "replicas = 3\n", nil, nil)
	waitFleetBoxes(t, admin.NewClient(a.sock), 2)
	var acked []int
	for i := range 40 {
		if i == 15 {
			c.Nodes[0].Stop()
		}
		if postCallback(t, a, "c"+strconv.Itoa(i), fmt.Sprintf("burst %d", i)) == http.StatusOK {
			acked = append(acked, i)
		}
	}
	if len(acked) < 30 {
		t.Fatalf("only %d of 40 callbacks acknowledged with two of three nodes up", len(acked))
	}
	for _, i := range acked {
		waitDelivered(t, api, "c"+strconv.Itoa(i), fmt.Sprintf("[model-b] burst %d", i))
	}
	time.Sleep(300 * time.Millisecond)
	for _, i := range acked {
		if n := api.Delivered("c"+strconv.Itoa(i), fmt.Sprintf("[model-b] burst %d", i)); n != 1 {
			t.Errorf("c%d answered %d times", i, n)
		}
	}
}

// A user moved while their messages keep arriving: every message is
// answered once, and the replies reach them in the order they wrote (the
// old box's last replies before the new box's first).
func TestFleetMoveUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("two daemons and a NATS server")
	}
	nats := natstest.Start(t)
	api := wecomtest.NewServer("wxcorp", "secret", 1000002)
	t.Cleanup(api.Close)
	llm := fleetLLM(t)
	a := startFleetBox(t, "a", nats.URL(), true, api, llm.BaseURL())
	startFleetBox(t, "b", nats.URL(), false, api, llm.BaseURL())
	ca := admin.NewClient(a.sock)
	ctx := context.Background()
	waitFleetBoxes(t, ca, 2)
	if _, err := ca.FleetHome(ctx, admin.FleetRequest{User: "carol", Box: "b"}); err != nil {
		t.Fatal(err)
	}
	const n = 60
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		for i := range n {
			if code := postCallback(t, a, "carol", fmt.Sprintf("n%02d", i)); code != http.StatusOK {
				t.Errorf("callback %d answered %d", i, code)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	moved, err := ca.FleetMove(ctx, admin.FleetRequest{User: "carol", Box: "a"})
	if err != nil {
		t.Fatal(err)
	}
	<-posted
	// The replies echo the turn's text: one number, or a batch of them.
	numbers := func() (got []string, boxes map[string]bool) {
		boxes = map[string]bool{}
		for _, m := range api.Messages() {
			if m.ToUser != "carol" {
				continue
			}
			for _, f := range strings.Fields(m.Content) {
				switch {
				case strings.HasPrefix(f, "[model-"):
					boxes[f] = true
				case strings.HasPrefix(f, "n"):
					got = append(got, f)
				}
			}
		}
		return got, boxes
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, _ := numbers()
		if len(got) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d answered: %v", len(got), n, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	got, boxes := numbers()
	for i, g := range got {
		if want := fmt.Sprintf("n%02d", i); g != want || len(got) != n {
			t.Fatalf("replies out of order, lost or twice (moved at #%d): %v", moved.Since, got)
		}
	}
	if !boxes["[model-a]"] || !boxes["[model-b]"] {
		t.Fatalf("the move did not split the conversation between the boxes: %v", boxes)
	}
}
