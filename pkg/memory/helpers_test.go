package memory

import (
	"context"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/llm"
	"agent/pkg/llm/llmtest"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
)

const testDim = 16

// openDB opens a migrated database in a temporary directory.
func openDB(t testing.TB) *store.Store {
	t.Helper()
	return storetest.Open(t)
}

// newClock returns the fake clock memory tests run on.
func newClock() *clock.Fake { return clock.NewFake(time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)) }

// waitTimers waits until n timers are pending on c (a worker asleep).
func waitTimers(t *testing.T, c *clock.Fake, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !c.WaitTimers(n, ctx.Done()) {
		t.Fatalf("%d timers pending, want %d", c.Pending(), n)
	}
}

// newMem returns a Store with the vector embedder (nil: keyword-only).
func newMem(t testing.TB, e Embedder, cfg Config) (*Store, *clock.Fake) {
	t.Helper()
	db := openDB(t)
	c := newClock()
	s := New(db.DB(), cfg, nil, c.Now)
	if e != nil {
		if err := s.SetEmbedder(context.Background(), e, "test-model"); err != nil {
			t.Fatal(err)
		}
		s.Wait()
	}
	t.Cleanup(s.Close)
	return s, c
}

// vecs is an embedder with controlled vectors: texts set with Set embed
// to those vectors, any other text to a fixed pseudo-random unit vector.
type vecs struct {
	mu    sync.Mutex
	dim   int
	m     map[string][]float32
	calls int
	gate  chan struct{} // when set, each Embed waits for a receive... close to release
	fail  error
}

func newVecs() *vecs { return &vecs{dim: testDim, m: map[string][]float32{}} }

func (v *vecs) Dim() int { return v.dim }

func (v *vecs) Set(text string, vec []float32) {
	v.mu.Lock()
	v.m[text] = vec
	v.mu.Unlock()
}

func (v *vecs) Calls() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls
}

func (v *vecs) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	v.mu.Lock()
	gate, fail := v.gate, v.fail
	v.calls++
	v.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail != nil {
		return nil, fail
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v.mu.Lock()
		vec, ok := v.m[t]
		v.mu.Unlock()
		if !ok {
			vec = hashVec(t, v.dim)
		}
		out[i] = vec
	}
	return out, nil
}

func hashVec(text string, dim int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(text))
	r := rand.New(rand.NewPCG(h.Sum64(), 7))
	v := make([]float32, dim)
	var n float64
	for i := range v {
		v[i] = float32(r.NormFloat64())
		n += float64(v[i] * v[i])
	}
	for i := range v {
		v[i] /= float32(math.Sqrt(n))
	}
	return v
}

// axis is the unit vector along dimension i.
func axis(i int) []float32 {
	v := make([]float32, testDim)
	v[i] = 1
	return v
}

// mix is a unit vector at cosine c to axis(i), in the plane of axes i, j.
func mix(i, j int, c float64) []float32 {
	v := make([]float32, testDim)
	v[i] = float32(c)
	v[j] = float32(math.Sqrt(1 - c*c))
	return v
}

// newLLM is a fake chat-completions server answering replies in order (an
// entry of "" answers 503), then {"facts": []}.
func newLLM(t testing.TB, replies ...string) *llmtest.Server {
	t.Helper()
	script := make([]llmtest.Reply, len(replies))
	for i, r := range replies {
		script[i] = llmtest.Text(r)
		if r == "" {
			script[i] = llmtest.ServerError(http.StatusServiceUnavailable)
		}
	}
	srv := llmtest.New(t, script...)
	srv.Default(llmtest.Text(`{"facts": []}`))
	return srv
}

// llmClient is a real LLM client on srv that does not retry (a failure is
// the compressor's to handle).
func llmClient(t testing.TB, srv *llmtest.Server) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{Provider: "custom", BaseURL: srv.BaseURL(), APIKey: "k", Model: "m"},
		llm.WithRetry(llm.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
