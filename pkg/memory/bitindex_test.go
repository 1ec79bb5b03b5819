package memory

import (
	"context"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// Our quantisation is the one sqlite-vec stores: the same bits for the
// same vector, so an index loaded from memory_vec and a query quantised
// in Go are compared bit for bit.
func TestQuantizeMatchesSQLiteVec(t *testing.T) {
	db := openDB(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, dim := range []int{8, 16, 104, 384, 512} {
		v := make([]float32, dim)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		v[0], v[dim-1] = 0, float32(math.Copysign(0, -1)) // zero, either sign, is not positive
		var blob []byte
		if err := db.DB().QueryRow(`SELECT vec_quantize_binary(?)`, encodeVector(v)).Scan(&blob); err != nil {
			t.Fatal(err)
		}
		words := (dim + 63) / 64
		got, ok := unpackBits(blob, words)
		if !ok || !slices.Equal(got, quantize(v)) {
			t.Fatalf("dim %d: sqlite-vec %x, ours %x", dim, got, quantize(v))
		}
		if fromBlob, ok := quantizeBlob(encodeVector(v), words); !ok || !slices.Equal(fromBlob, got) {
			t.Fatalf("dim %d: quantizeBlob %x, sqlite-vec %x", dim, fromBlob, got)
		}
	}
}

// The index in RAM agrees with SQLite through inserts, supersedes,
// corrections, forgets and backfills: its candidates are exactly the
// current embedded facts of the scope nearest by Hamming distance, never
// another scope's.
func TestBitIndexInStepWithSQLite(t *testing.T) {
	e := newVecs()
	e.dim = 384
	s, _ := newMem(t, e, Config{DedupThreshold: 0.9999})
	ctx := context.Background()
	st := s.emb.Load()
	r := rand.New(rand.NewPCG(3, 4))
	ids := map[string][]int64{}
	text := func(i int) string { return "fact number " + strconv.Itoa(i) + " " + strconv.FormatUint(r.Uint64(), 36) }
	// Load both scopes' indexes early, so that later writes must update them.
	for _, sc := range []string{"wecom:alice", "wecom:bob"} {
		if _, err := s.nearest(ctx, sc, hashVec("warm", 384), st, 3); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		sc := []string{"wecom:alice", "wecom:bob"}[i%2]
		res, err := s.Add(ctx, sc, Input{Text: text(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[sc] = append(ids[sc], res.ID)
		switch {
		case i%7 == 3 && len(ids[sc]) > 2: // supersede an older one
			old := ids[sc][len(ids[sc])/2]
			if cur, _ := s.isCurrent(ctx, sc, old); cur {
				if _, err := s.Correct(ctx, sc, old, text(i)+" corrected", "test"); err != nil {
					t.Fatal(err)
				}
			}
		case i%11 == 5: // forget one
			if _, err := s.Forget(ctx, sc, res.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, sc := range []string{"wecom:alice", "wecom:bob"} {
		checkAgainstSQLite(t, s, sc, hashVec("query "+sc, 384))
	}
	// A new store on the same database (a restart after a crash) loads the
	// same index from SQLite.
	s2 := New(s.db, Config{}, nil, nil)
	defer s2.Close()
	if err := s2.SetEmbedder(ctx, e, "test-model"); err != nil {
		t.Fatal(err)
	}
	checkAgainstSQLite(t, s2, "wecom:alice", hashVec("after restart", 384))
}

// checkAgainstSQLite compares the index's 40 nearest with a brute force
// over the scope's current embedded facts in SQLite: same Hamming
// distances, and every id current and of the scope.
func checkAgainstSQLite(t *testing.T, s *Store, scope string, q []float32) {
	t.Helper()
	st := s.emb.Load()
	idx, err := s.bitScope(context.Background(), scope, st.dim)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.Query(`SELECT id, embedding FROM memory_facts WHERE scope = ? AND superseded_by IS NULL AND embedding IS NOT NULL`, scope)
	if err != nil {
		t.Fatal(err)
	}
	qb := quantize(q)
	dist := map[int64]int{}
	for rows.Next() {
		var id int64
		var blob []byte
		rows.Scan(&id, &blob)
		v, _ := decodeVector(blob, st.dim)
		d := 0
		for j, w := range quantize(v) {
			d += bits.OnesCount64(w ^ qb[j])
		}
		dist[id] = d
	}
	rows.Close()
	if idx.len() != len(dist) {
		t.Fatalf("%s: the index holds %d vectors, SQLite %d current embedded facts", scope, idx.len(), len(dist))
	}
	var want []int
	for _, d := range dist {
		want = append(want, d)
	}
	slices.Sort(want)
	got := idx.nearest(qb, 40)
	var gotD []int
	for _, id := range got {
		d, ok := dist[id]
		if !ok {
			t.Fatalf("%s: the index proposes %d, not a current fact of the scope", scope, id)
		}
		gotD = append(gotD, d)
	}
	if !slices.Equal(gotD, want[:len(gotD)]) || len(gotD) != min(40, len(want)) {
		t.Fatalf("%s: distances %v, want %v", scope, gotD, want[:min(40, len(want))])
	}
}

func TestBitIndexRemoveCompact(t *testing.T) {
	b := &bitIndex{words: 1, ready: make(chan struct{})}
	for i := range 100 {
		b.put(int64(i*2), []uint64{uint64(i)})
	}
	b.put(51, []uint64{7}) // out of order: inserted in place
	for i := range 60 {
		b.remove(int64(i * 2))
	}
	if b.len() != 41 || !slices.IsSorted(b.ids) {
		t.Fatalf("len %d, sorted %v", b.len(), slices.IsSorted(b.ids))
	}
	if got := b.nearest([]uint64{7}, 1); !slices.Equal(got, []int64{51}) {
		t.Fatalf("nearest = %v", got)
	}
	b.remove(51)
	b.remove(51) // twice: nothing more
	if got := b.nearest([]uint64{7}, 100); len(got) != 40 || slices.Contains(got, 51) {
		t.Fatalf("after remove: %d ids %v", len(got), got)
	}
}

// BenchmarkBitScan100k: the Hamming scan of one scope's 100k vectors
// (bge-small's 384 dimensions) for 160 candidates, alone.
func BenchmarkBitScan100k(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	x := &bitIndex{words: 6, ready: make(chan struct{})}
	for i := range 100_000 {
		x.ids = append(x.ids, int64(i+1))
		for range 6 {
			x.bits = append(x.bits, r.Uint64())
		}
	}
	x.dead = make([]bool, len(x.ids))
	q := []uint64{r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()}
	for b.Loop() {
		x.nearest(q, 160)
	}
}

// unpackBits reads a vec0 bit column (len(blob)*8 dimensions) into words.
func unpackBits(blob []byte, words int) ([]uint64, bool) {
	if len(blob) > words*8 || len(blob) == 0 {
		return nil, false
	}
	q := make([]uint64, words)
	for i, c := range blob {
		q[i/8] |= uint64(c) << (8 * (i % 8))
	}
	return q, true
}

// TestCosineBlob: the re-ranking's in-place cosine is the cosine of the
// decoded vector, and a blob of the wrong size is refused.
func TestCosineBlob(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dim := range []int{1, 3, 384} {
		a, b := make([]float32, dim), make([]float32, dim)
		for i := range a {
			a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		blob := encodeVector(b)
		got, ok := cosineBlob(a, blob, dim)
		dec, _ := decodeVector(blob, dim)
		if want := cosine(a, dec); !ok || got != want {
			t.Errorf("dim %d: cosineBlob = %v, %v; cosine = %v", dim, got, ok, want)
		}
		if _, ok := cosineBlob(a, blob[:len(blob)-1], dim); ok {
			t.Errorf("dim %d: a short blob is accepted", dim)
		}
		if got, ok := cosineBlob(a[:dim-1], blob, dim); !ok || got != 0 {
			t.Errorf("dim %d: a query of another size: %v, %v; want 0, true", dim, got, ok)
		}
	}
	if got, ok := cosineBlob(make([]float32, 4), encodeVector(make([]float32, 4)), 4); !ok || got != 0 {
		t.Errorf("zero vectors: %v, %v", got, ok)
	}
}
