package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	sqlitevec "github.com/asg017/sqlite-vec-go-bindings/cgo"
)

const benchDim = 384

func randomUnit(r *rand.Rand) []float32 {
	v := make([]float32, benchDim)
	var n float64
	for i := range v {
		v[i] = float32(r.NormFloat64())
		n += float64(v[i] * v[i])
	}
	return v
}

// BenchmarkVecKNN measures a top-5 cosine KNN over N 384-d vectors
// partitioned by user (as memory stores them), for one user's partition
// holding all N.
func BenchmarkVecKNN(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			s, err := Open(context.Background(), filepath.Join(b.TempDir(), FileName), nil, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			db := s.DB()
			if _, err := db.Exec(`CREATE VIRTUAL TABLE v USING vec0(user TEXT partition key, embedding float[384] distance_metric=cosine)`); err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			tx, _ := db.Begin()
			stmt, _ := tx.Prepare(`INSERT INTO v(user, embedding) VALUES ('u1', ?)`)
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
		})
	}
}
