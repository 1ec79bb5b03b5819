package memory

import (
	"encoding/binary"
	"math"
)

// encodeVector is the float32 little-endian blob sqlite-vec reads.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// decodeVector reverses encodeVector; ok is false for a blob of the wrong
// size.
func decodeVector(b []byte, dim int) ([]float32, bool) {
	if len(b) != 4*dim {
		return nil, false
	}
	v := make([]float32, dim)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, true
}

// cosine is the cosine similarity of a and b, computed in float64 (the
// embedder normalises, but facts written by other means may not be).
func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// cosineBlob is cosine(a, decodeVector(b)) without decoding into a new
// slice; ok is false for a blob of the wrong size.
func cosineBlob(a []float32, b []byte, dim int) (sim float64, ok bool) {
	if len(b) != 4*dim {
		return 0, false
	}
	if len(a) != dim || dim == 0 {
		return 0, true // as cosine of vectors of different lengths
	}
	var dot, na, nb float64
	for i, x := range a {
		y := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		dot += float64(x) * y
		na += float64(x) * float64(x)
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0, true
	}
	return dot / math.Sqrt(na*nb), true
}
