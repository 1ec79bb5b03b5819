package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"agent/pkg/agent"
	"agent/pkg/embed/embedtest"
	"agent/pkg/llm"
	"agent/pkg/llm/llmtest"
	"agent/pkg/metrics"
	"agent/pkg/session"
)

// The benchmarks report latency percentiles (b.ReportMetric) because a
// mean hides the tail the targets are about. Facts get random 384-d unit
// vectors written directly (embedding 100k texts through the model would
// take minutes and the scan cost does not depend on what the vectors mean);
// queries go through the real ONNX path on the bge-small-shaped test model
// (testdata/models, `make testmodels`).

var benchWords = strings.Fields(`meeting project budget report client invoice deadline coffee tea lunch dinner
	doctor dentist school daughter son wife husband birthday holiday flight hotel train car garage
	password printer laptop phone email calendar Monday Tuesday Wednesday Thursday Friday weekend
	morning evening Shanghai Beijing Shenzhen Hangzhou Berlin London office warehouse shipment
	contract salary review training gym swimming running football piano guitar book movie music
	会议 项目 预算 报告 客户 发票 咖啡 午饭 医生 学校 女儿 生日 假期 航班 酒店 火车 周末 上海 北京 合同 培训 游泳 音乐`)

// benchVocab is benchWords followed by 20k generated words; a sentence
// draws from it with Zipf's law (s=1.1), as natural text does, so a few
// words are in a large share of the facts and most are rare.
var benchVocab = func() []string {
	v := slices.Clone(benchWords)
	r := rand.New(rand.NewPCG(5, 5))
	const letters = "abcdefghijklmnopqrstuvwxyz"
	for range 20_000 {
		n := 4 + r.IntN(6)
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[r.IntN(len(letters))]
		}
		v = append(v, string(b))
	}
	return v
}()

func benchSentence(r *rand.Rand) string {
	z := rand.NewZipf(r, 1.1, 1, uint64(len(benchVocab)-1))
	n := 6 + r.IntN(10)
	w := make([]string, n)
	for i := range w {
		w[i] = benchVocab[z.Uint64()]
	}
	return "The user " + strings.Join(w, " ") + "."
}

func randomUnit384(r *rand.Rand) []float32 { return hashVec(strconv.FormatUint(r.Uint64(), 16), 384) }

// populate bulk-loads n facts spread over users scopes, bypassing dedup.
func populate(b testing.TB, s *Store, n, users int) {
	b.Helper()
	r := rand.New(rand.NewPCG(uint64(n), uint64(users)))
	tx, err := s.db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	ins, err := tx.Prepare(`INSERT INTO memory_facts(scope, tag, fact, keywords, topic, created_at, updated_at, embedding)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for i := range n {
		scope := fmt.Sprintf("wecom:user%d", i%users)
		blob := encodeVector(randomUnit384(r))
		var id int64
		if err := ins.QueryRow(scope, scopeTag(scope), benchSentence(r), benchWords[r.IntN(len(benchWords))], "bench", now, now, blob).Scan(&id); err != nil {
			b.Fatal(err)
		}
		if err := insertVec(context.Background(), tx, id, scope, blob); err != nil {
			b.Fatal(err)
		}
	}
	ins.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

func benchModelDir(b *testing.B) string {
	dir := filepath.Join(embedtest.RepoRoot(b), "testdata", "models", "bge-small-random")
	if _, err := os.Stat(filepath.Join(dir, "model.onnx")); err != nil {
		b.Skip("bge-small test model missing: make testmodels")
	}
	return dir
}

type percentiles []time.Duration

func (p percentiles) report(b *testing.B, prefix string, unit time.Duration, name string) {
	slices.Sort(p)
	at := func(q float64) float64 { return float64(p[int(q*float64(len(p)-1))]) / float64(unit) }
	b.ReportMetric(at(0.5), prefix+"p50-"+name)
	b.ReportMetric(at(0.99), prefix+"p99-"+name)
}

// BenchmarkHybridRetrieval: embed the query (real ONNX, bge-small shape) +
// bit KNN with exact re-rank + FTS5 + fusion + loading the top 5, for a
// user whose partition holds all n facts (the worst case), and the KNN
// alone. users=100 spreads the same n over 100 users' partitions.
func BenchmarkHybridRetrieval(b *testing.B) {
	dir := benchModelDir(b)
	e := onnxEmbedder(b, dir, embedtest.BGESmall())
	for _, c := range []struct{ n, users int }{{1000, 1}, {10_000, 1}, {100_000, 1}, {100_000, 100}} {
		b.Run(fmt.Sprintf("n=%d/users=%d", c.n, c.users), func(b *testing.B) {
			db := openDB(b)
			s := New(db.DB(), Config{}, nil, nil)
			defer s.Close()
			if err := s.SetEmbedder(context.Background(), e, "bench"); err != nil {
				b.Fatal(err)
			}
			populate(b, s, c.n, c.users)
			ctx := context.Background()
			r := rand.New(rand.NewPCG(9, 9))
			st := s.emb.Load()
			// The scope's index in RAM loads on its first search (once per
			// scope and process): timed on its own.
			t0 := time.Now()
			if _, err := s.bitScope(ctx, "wecom:user0", st.dim); err != nil {
				b.Fatal(err)
			}
			load := time.Since(t0)
			var hybrid, knn, kw percentiles
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				q := benchSentence(r) + " " + strconv.Itoa(i) // distinct: no embedding cache hits
				t0 := time.Now()
				hits, err := s.Search(ctx, "wecom:user0", q, 5)
				hybrid = append(hybrid, time.Since(t0))
				if err != nil || len(hits) != 5 {
					b.Fatalf("search: %d hits, %v", len(hits), err)
				}
				vec, _ := s.embedOne(ctx, st, q)
				t0 = time.Now()
				if _, err := s.nearest(ctx, "wecom:user0", vec, st, 20); err != nil {
					b.Fatal(err)
				}
				knn = append(knn, time.Since(t0))
				t0 = time.Now()
				if _, err := s.keywordSearch(ctx, "wecom:user0", q, 20); err != nil {
					b.Fatal(err)
				}
				kw = append(kw, time.Since(t0))
			}
			b.StopTimer()
			hybrid.report(b, "hybrid-", time.Millisecond, "ms")
			knn.report(b, "knn-", time.Millisecond, "ms")
			kw.report(b, "keyword-", time.Millisecond, "ms")
			b.ReportMetric(float64(load.Microseconds())/1000, "index-load-ms")
		})
	}
}

// BenchmarkCachedBlock is the zero-latency path of a voice turn with a warm
// cache: the memory block from the cache plus the system prompt around it
// (the static part cached by agent.Prompt), no ONNX and no SQLite. Repeat:
// the same utterance again (served whole from the cache). New: a new
// utterance, which also waits up to the fast budget for a fresh retrieval.
func BenchmarkCachedBlock(b *testing.B) {
	db := openDB(b)
	e := newVecs()
	e.dim = 384
	s := New(db.DB(), Config{}, nil, nil)
	defer s.Close()
	if err := s.SetEmbedder(context.Background(), e, "bench"); err != nil {
		b.Fatal(err)
	}
	populate(b, s, 10_000, 1)
	ws := b.TempDir()
	os.WriteFile(filepath.Join(ws, "SOUL.md"), []byte(strings.Repeat("You are a helpful office assistant. ", 40)), 0o600)
	prompt := agent.NewPrompt(ws, nil)
	ctx := context.Background()
	if _, err := s.Block(ctx, "wecom:user0", "what is on my calendar", false); err != nil {
		b.Fatal(err)
	}
	loc := time.UTC
	for _, mode := range []string{"repeat", "new"} {
		b.Run(mode, func(b *testing.B) {
			var lat percentiles
			for i := 0; b.Loop(); i++ {
				q := "what is on my calendar"
				if mode == "new" {
					q += strconv.Itoa(i)
				}
				t0 := time.Now()
				block, err := s.Block(ctx, "wecom:user0", q, true)
				sys := prompt.System(time.Now(), loc, block)
				lat = append(lat, time.Since(t0))
				if err != nil || block == "" || !strings.Contains(sys, "Relevant memory") {
					b.Fatalf("block %q, %v", block, err)
				}
				if mode == "new" {
					s.Wait() // let the fresh retrieval finish before the next turn
					s.Block(ctx, "wecom:user0", "what is on my calendar", false)
				}
			}
			lat.report(b, "", time.Microsecond, "us")
		})
	}
}

// BenchmarkCompression is the compressor's own work per batch of 35
// messages against an instant LLM: reading the batch, the related-facts
// search, parsing the reply and storing 5 facts (each embedded on the
// bge-small-shaped model, deduplicated and indexed).
func BenchmarkCompression(b *testing.B) {
	dir := benchModelDir(b)
	e := onnxEmbedder(b, dir, embedtest.BGESmall())
	facts := make([]string, 5)
	for i := range facts {
		facts[i] = fmt.Sprintf(`{"fact": "fact %%d-%d about the user's schedule and preferences", "keywords": ["k%d"], "topic": "bench"}`, i, i)
	}
	var n int
	srv := newLLM(b)
	mem, clk := newMem(b, nil, Config{DedupThreshold: 1})
	if err := mem.SetEmbedder(context.Background(), e, "bench"); err != nil {
		b.Fatal(err)
	}
	ss := session.New(mem.db, clk.Now)
	comp := NewCompressor(CompressorConfig{SessionMax: 40, Overlap: 5}, mem, llmClient(b, srv), ss, nil)
	key, _ := session.P2P("wecom", "bench")
	ctx := context.Background()
	msgs := 0
	start := time.Now()
	for b.Loop() {
		n++
		reply := `{"facts": [` + fmt.Sprintf(strings.Join(facts, ","), n, n, n, n, n) + `]}`
		srv.Push(llmtest.Text(reply))
		b.StopTimer()
		sess, err := ss.Reset(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 41 {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			ss.Append(ctx, sess.ID, llmMessage(role, benchSentence(rand.New(rand.NewPCG(uint64(i), uint64(n))))))
		}
		b.StartTimer()
		out, err := comp.Compress(ctx, sess.ID)
		if err != nil || len(out.Facts) != 5 {
			b.Fatalf("compress: %+v %v", out, err)
		}
		msgs += out.Messages
	}
	b.ReportMetric(float64(msgs)/time.Since(start).Seconds(), "msgs/s")
	b.ReportMetric(float64(5*n)/time.Since(start).Seconds(), "facts/s")
}

// BenchmarkRSSGrowth100k loads 100k facts into one user's memory and runs
// 200 hybrid searches, reporting the process RSS growth over the store
// opened empty (the page cache of SQLite, the vector index and Go heap).
func BenchmarkRSSGrowth100k(b *testing.B) {
	dir := benchModelDir(b)
	e := onnxEmbedder(b, dir, embedtest.BGESmall())
	for b.Loop() {
		db := openDB(b)
		s := New(db.DB(), Config{}, nil, nil)
		if err := s.SetEmbedder(context.Background(), e, "bench"); err != nil {
			b.Fatal(err)
		}
		s.Search(context.Background(), "wecom:user0", "warm up the embedder", 5)
		runtime.GC()
		before := metrics.ResidentBytes(os.Getpagesize())
		anon0, file0 := rssSplit(b)
		populate(b, s, 100_000, 1)
		r := rand.New(rand.NewPCG(1, 1))
		for i := range 200 {
			if _, err := s.Search(context.Background(), "wecom:user0", benchSentence(r)+strconv.Itoa(i), 5); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		after := metrics.ResidentBytes(os.Getpagesize())
		anon1, file1 := rssSplit(b)
		b.ReportMetric(float64(after-before)/(1<<20), "rss-growth-MiB")
		// Anonymous memory is what the facts cost (heaps, the bit index,
		// caches); file-backed pages are the database's mapped pages,
		// page cache the kernel drops under pressure.
		b.ReportMetric(float64(anon1-anon0)/(1<<10), "anon-growth-MiB")
		b.ReportMetric(float64(file1-file0)/(1<<10), "file-growth-MiB")
		s.Close()
	}
}

// rssSplit reads the process's resident anonymous and file-backed memory
// in kB (RssAnon, RssFile of /proc/self/status).
func rssSplit(b *testing.B) (anonKB, fileKB int64) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "RssAnon:":
			anonKB = n
		case "RssFile:":
			fileKB = n
		}
	}
	return anonKB, fileKB
}

func llmMessage(role, content string) llm.Message { return llm.Message{Role: role, Content: content} }
