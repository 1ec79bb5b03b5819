package daemon

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/admin"
	"agent/pkg/config"
	"agent/pkg/fleet/natstest"
	"agent/pkg/llm/llmtest"
	"agent/pkg/localmodels"
	"agent/pkg/memory"
	"agent/pkg/nativetest"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
	"agent/pkg/wecom/aibot"
	"agent/pkg/wecom/aibottest"
	"agent/pkg/wecom/wecomtest"
)

// BenchmarkFleetIngress: WeCom callbacks at 200 a second (open loop: each
// sent on its own schedule, whatever the earlier ones take) to the ingress
// daemon of a two-box fleet on a real NATS server (JetStream, file
// storage). ack: callback sent to WeCom's "success" (verify, decrypt,
// persist to the stream, wait for JetStream's acknowledgement).
// to_home_llm: callback sent to the home box's model request for it (the
// hop through the stream, the home box's inbox and the start of its turn).
func BenchmarkFleetIngress(b *testing.B) {
	nats := natstest.Start(b)
	api := wecomtest.NewServer("wxcorp", "secret", 1000002)
	b.Cleanup(api.Close)
	arrivals := make(chan string, 4096)
	llm := fleetLLM(b)
	llm.Func(func(r *llmtest.Request) llmtest.Reply {
		// The turn's own message is the last user message (the earlier
		// ones are its history).
		last := ""
		for _, m := range r.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		for _, line := range strings.Split(last, "\n") { // a batch: one line each
			select {
			case arrivals <- line:
			default:
			}
		}
		return llmtest.Text("ok")
	})
	a := startFleetBox(b, "a", nats.URL(), true, api, llm.BaseURL())
	startFleetBoxWith(b, "b", nats.URL(), false, api, llm.BaseURL(), "", nil, nil)
	ca := admin.NewClient(a.sock)
	ctx := context.Background()
	waitFleetBoxes(b, ca, 2)
	const users = 20
	for i := range users {
		if _, err := ca.FleetHome(ctx, admin.FleetRequest{User: "u" + strconv.Itoa(i), Box: "b"}); err != nil {
			b.Fatal(err)
		}
	}
	postCallback(b, a, "u0", "warm-up")
	<-arrivals
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var hops []time.Duration
	go func() {
		for content := range arrivals {
			mu.Lock()
			if t0, ok := sent[content]; ok {
				hops = append(hops, time.Since(t0))
				delete(sent, content) // once: a batch of two is one turn
			}
			mu.Unlock()
		}
	}()
	// rate=200: the ingress's acknowledgements under the load
	// (the home box's turns queue at that rate on two cores: the model
	// requests lag behind, which is the turn pipeline's throughput, not
	// the hop's). rate=20: the hop with no queue.
	for _, rate := range []int{200, 20} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			n := max(b.N, 10*rate)
			var acks []time.Duration
			mu.Lock()
			hops = hops[:0]
			clear(sent)
			mu.Unlock()
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i := range n {
				at := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
				time.Sleep(time.Until(at))
				wg.Add(1)
				go func() {
					defer wg.Done()
					text := fmt.Sprintf("message %d at %d/s", i, rate)
					t0 := time.Now()
					mu.Lock()
					sent[text] = t0
					mu.Unlock()
					if code := postCallback(b, a, "u"+strconv.Itoa(i%users), text); code != http.StatusOK {
						b.Errorf("callback answered %d", code)
					}
					mu.Lock()
					acks = append(acks, time.Since(t0))
					mu.Unlock()
				}()
			}
			wg.Wait()
			took := time.Since(start)
			deadline := time.Now().Add(2 * time.Minute)
			for {
				mu.Lock()
				got := len(hops)
				mu.Unlock()
				if got >= n || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			b.StopTimer()
			mu.Lock()
			defer mu.Unlock()
			if len(hops) < n {
				b.Fatalf("only %d of %d messages reached the home box's model", len(hops), n)
			}
			b.ReportMetric(float64(n)/took.Seconds(), "req/s")
			reportPercentiles(b, "ack", acks)
			reportPercentiles(b, "to_home_llm", hops)
		})
	}
}

func reportPercentiles(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(at(0.5), name+"_p50_ms")
	b.ReportMetric(at(0.99), name+"_p99_ms")
}

func waitFleetBoxes(tb testing.TB, c *admin.Client, n int) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := c.FleetStatus(context.Background())
		if err == nil && len(v.Boxes) == n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("fleet status: %+v, %v", v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkFleetMove10k: agentctl fleet move of a user with 10,000 facts
// (with their 384-dimensional vectors: both boxes load the same
// bge-small-shaped model) and a 200-message conversation, between two
// daemons on a real NATS server: the old box settles and snapshots, the
// snapshot goes through the object store, the new box restores it, the
// home switches and the old copy is purged.
func BenchmarkFleetMove10k(b *testing.B) {
	root := moduleRoot(b)
	modelDir := filepath.Join(root, "testdata", "models", "bge-small-random")
	ort := os.Getenv("AGENT_ORT_LIB")
	if ort == "" {
		ort = filepath.Join(root, ".deps", "onnxruntime", "linux-"+runtime.GOARCH, "libonnxruntime.so.1")
	}
	for _, p := range []string{filepath.Join(modelDir, "model.onnx"), ort} {
		if _, err := os.Stat(p); err != nil {
			nativetest.Missing(b, p, "make testmodels; scripts/deps.sh ort", err)
		}
	}
	extra := fmt.Sprintf("[embedding]\nmodel_dir = %q\nonnxruntime_lib = %q\nthreads = 2\n", modelDir, ort)
	nats := natstest.Start(b)
	api := wecomtest.NewServer("wxcorp", "secret", 1000002)
	b.Cleanup(api.Close)
	llm := fleetLLM(b)
	const facts = 10_000
	seed := func(cfg *config.Config) {
		dir := cfg.Agent.StateDir
		os.MkdirAll(dir, 0o750)
		ctx := context.Background()
		st := storetest.OpenAt(b, filepath.Join(dir, store.FileName))
		defer st.Close() // before the box's daemon opens it
		m := memory.New(st.DB(), memory.Config{}, nil, time.Now)
		defer m.Close()
		id := localmodels.EmbeddingID(cfg)
		if err := m.SetEmbedder(ctx, dimOnly(384), id); err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 1))
		list := make([]memory.Portable, facts)
		now := time.Now().UnixMilli()
		for i := range list {
			v := make([]float32, 384)
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			list[i] = memory.Portable{Text: fmt.Sprintf("Fact %d about the user's week: meeting %d, project %d.", i, r.IntN(1000), r.IntN(1000)),
				Keywords: "meeting, project", CreatedAt: now, UpdatedAt: now, Seen: 1, Embedding: encodeVec(v)}
		}
		if n, err := m.Import(ctx, "wecom:mover", id, list); err != nil || n != facts {
			b.Fatalf("seed: %d facts, %v", n, err)
		}
	}
	mb := &localmodels.Set{}
	ma := &localmodels.Set{}
	bb := startFleetBoxWith(b, "b", nats.URL(), false, api, llm.BaseURL(), extra, mb, seed)
	a := startFleetBoxWith(b, "a", nats.URL(), true, api, llm.BaseURL(), extra, ma, nil)
	ca, cb := admin.NewClient(a.sock), admin.NewClient(bb.sock)
	ctx := context.Background()
	waitFleetBoxes(b, ca, 2)
	if _, err := ca.FleetHome(ctx, admin.FleetRequest{User: "mover", Box: "b"}); err != nil {
		b.Fatal(err)
	}
	for i := range 100 { // a 200-message conversation on b
		postCallback(b, a, "mover", fmt.Sprintf("turn %d", i))
	}
	for deadline := time.Now().Add(time.Minute); !slices.ContainsFunc(api.Messages(), func(m wecomtest.Sent) bool {
		return m.ToUser == "mover" && strings.HasSuffix(m.Content, "turn 99")
	}); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the conversation was not answered on b")
		}
	}
	for _, s := range []*localmodels.Set{ma, mb} {
		for deadline := time.Now().Add(time.Minute); s.Embedder() == nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("the embedding model did not load")
			}
		}
	}
	b.ResetTimer()
	var took []time.Duration
	var bytes int
	to := []string{"a", "b"}
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		m, err := ca.FleetMove(ctx, admin.FleetRequest{User: "mover", Box: to[i%2]})
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
		bytes = m.Bytes
	}
	b.StopTimer()
	st, err := ca.Status(ctx)
	if err != nil {
		b.Fatal(err)
	}
	where := ca
	if len(took)%2 == 0 {
		where = cb
	}
	list, err := where.MemoryList(ctx, admin.MemoryQuery{Scope: "wecom:mover", Limit: 1})
	if err != nil || len(list) == 0 {
		b.Fatalf("the moved memory is not on its new box: %v %v", list, err)
	}
	_ = st
	reportPercentiles(b, "move", took)
	b.ReportMetric(float64(bytes)/(1<<20), "snapshot_MB")
}

// dimOnly is an embedder that only says its width (seeding memory with
// vectors made elsewhere).
type dimOnly int

func (d dimOnly) Dim() int { return int(d) }
func (d dimOnly) Embed(context.Context, []string) ([][]float32, error) {
	return nil, fmt.Errorf("dimOnly does not embed")
}

// encodeVec is a vector as memory stores it (little-endian float32).
func encodeVec(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// BenchmarkFleetBot: AI Bot messages, one at a time, to a two-box fleet
// whose ingress holds the bot's connection (a fake WeCom endpoint on
// loopback). home=ingress: the user is homed on the ingress; home=other:
// on the other box, so the message goes there through the stream and
// every frame of its reply stream comes back through the ingress.
// first_frame: message sent to the stream's first frame ("…") at WeCom;
// finished: to the frame that finishes the stream with the answer.
func BenchmarkFleetBot(b *testing.B) {
	nats := natstest.Start(b)
	api := wecomtest.NewServer("wxcorp", "secret", 1000002)
	b.Cleanup(api.Close)
	llm := fleetLLM(b)
	bot := aibottest.New(b)
	a := startFleetBoxWith(b, "a", nats.URL(), true, api, llm.BaseURL(), fleetBotConfig(bot), nil, nil)
	startFleetBox(b, "b", nats.URL(), false, api, llm.BaseURL())
	ca := admin.NewClient(a.sock)
	ctx := context.Background()
	waitFleetBoxes(b, ca, 2)
	if !bot.WaitReady(20 * time.Second) {
		b.Fatal("the ingress did not subscribe")
	}
	for _, home := range []string{"a", "b"} {
		if _, err := ca.FleetHome(ctx, admin.FleetRequest{User: "user-" + home, Box: home}); err != nil {
			b.Fatal(err)
		}
	}
	seq := 0
	for _, c := range []struct{ name, home string }{{"ingress", "a"}, {"other", "b"}} {
		b.Run("home="+c.name, func(b *testing.B) {
			n := max(b.N, 100)
			var first, finished []time.Duration
			for i := range n + 1 { // the first warms the path up
				seq++
				after := bot.Count()
				t0 := time.Now()
				req := bot.Text(fmt.Sprintf("bench-%d", seq), "user-"+c.home, "single", "", fmt.Sprintf("question %d", seq))
				if _, ok := bot.Await(20*time.Second, after, func(f aibot.Frame) bool { return f.Cmd == aibot.CmdRespond && f.Headers.ReqID == req }); !ok {
					b.Fatalf("no stream frame for message %d", seq)
				}
				t1 := time.Now()
				f, ok := bot.Await(20*time.Second, after, func(f aibot.Frame) bool {
					return f.Cmd == aibot.CmdRespond && f.Headers.ReqID == req && strings.Contains(string(f.Body), `"finish":true`)
				})
				if !ok {
					b.Fatalf("the stream of message %d was not finished", seq)
				}
				t2 := time.Now()
				if !strings.Contains(string(f.Body), "[model-"+c.home+"]") {
					b.Fatalf("message %d was answered by the wrong box: %s", seq, f.Body)
				}
				if i > 0 {
					first, finished = append(first, t1.Sub(t0)), append(finished, t2.Sub(t0))
				}
			}
			reportPercentiles(b, "first_frame", first)
			reportPercentiles(b, "finished", finished)
		})
	}
}
