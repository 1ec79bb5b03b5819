package memory

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"agent/pkg/llm"
	"agent/pkg/store"
)

const testDim = 16

// openDB opens a migrated database in a temporary directory.
func openDB(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), store.FileName), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newMem returns a Store with the vector embedder (nil: keyword-only).
func newMem(t testing.TB, e Embedder, cfg Config) (*Store, *clock) {
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

// scripted is an OpenAI-compatible chat completions server answering from
// a script (an entry of "" answers 503), recording the requests.
type scripted struct {
	*httptest.Server
	mu      sync.Mutex
	replies []string
	reqs    []map[string]any
}

func newScripted(t testing.TB, replies ...string) *scripted {
	t.Helper()
	s := &scripted{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body: %v", err)
		}
		s.mu.Lock()
		n := len(s.reqs)
		s.reqs = append(s.reqs, body)
		reply := `{"facts": []}`
		if n < len(s.replies) {
			reply = s.replies[n]
		}
		s.mu.Unlock()
		if reply == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
			return
		}
		out, _ := json.Marshal(map[string]any{
			"id": "x", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": reply}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
		})
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *scripted) request(i int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[i]
}

// client is a real LLM client on the scripted server, without retries'
// waiting.
func (s *scripted) client(t testing.TB) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{Provider: "custom", BaseURL: s.URL + "/v1", APIKey: "k", Model: "m",
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
