package store

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	sqlitevec "github.com/asg017/sqlite-vec-go-bindings/cgo"
)

const benchDim = 384

// randomUnit returns an L2-normalised random vector, as the embedder does.
func randomUnit(r *rand.Rand) []float32 {
	v := make([]float32, benchDim)
	var n float64
	for i := range v {
		v[i] = float32(r.NormFloat64())
		n += float64(v[i]) * float64(v[i])
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// BenchmarkVecKNN measures a top-5 KNN over N 384-d vectors partitioned by
// user (as memory stores them), one user's partition holding all N.
//
// metric=l2 gives the same ranking as cosine for L2-normalised embeddings
// (|a-b|^2 = 2 - 2cos) and is the metric sqlite-vec has SIMD kernels for
// (NEON in arm64 builds).
func BenchmarkVecKNN(b *testing.B) {
	for _, metric := range []string{"cosine", "l2"} {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("metric=%s/n=%d", metric, n), func(b *testing.B) { benchKNN(b, metric, n) })
		}
	}
}

func benchKNN(b *testing.B, metric string, n int) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), FileName), nil, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	db := s.DB()
	if _, err := db.Exec(`CREATE VIRTUAL TABLE v USING vec0(user TEXT partition key, embedding float[384] distance_metric=` + metric + `)`); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	stmt, err := tx.Prepare(`INSERT INTO v(user, embedding) VALUES ('u1', ?)`)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		blob, _ := sqlitevec.SerializeFloat32(randomUnit(r))
		if _, err := stmt.Exec(blob); err != nil {
			b.Fatal(err)
		}
	}
	stmt.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	q, _ := sqlitevec.SerializeFloat32(randomUnit(r))
	b.ResetTimer()
	for b.Loop() {
		rows, err := db.Query(`SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = 5 AND user = 'u1'`, q)
		if err != nil {
			b.Fatal(err)
		}
		k := 0
		for rows.Next() {
			k++
		}
		rows.Close()
		if k != 5 {
			b.Fatalf("got %d rows", k)
		}
	}
}
