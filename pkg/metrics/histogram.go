package metrics

import (
	"math"
	"sort"
	"strings"
	"sync"
)

// seriesWriter is a metric that writes its own exposition lines (a
// histogram has _bucket, _sum and _count lines under one family).
type seriesWriter interface {
	writeSeries(b *strings.Builder, name, labels string)
}

// Histogram counts observations in cumulative buckets, Prometheus style.
type Histogram struct {
	mu     sync.Mutex
	bounds []float64 // upper bounds, ascending, without +Inf
	counts []uint64  // per bucket, not cumulative; last is +Inf
	sum    float64
	count  uint64
}

// Histogram registers (or returns the existing) histogram for name+labels
// with the given upper bounds (sorted here; +Inf is implied).
func (r *Registry) Histogram(name, help string, labels Labels, buckets []float64) *Histogram {
	b := make([]float64, 0, len(buckets))
	for _, v := range buckets {
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			b = append(b, v)
		}
	}
	sort.Float64s(b)
	h := &Histogram{bounds: b, counts: make([]uint64, len(b)+1)}
	if prev := r.add(name, help, "histogram", labels, h, func() float64 { return float64(h.Count()) }); prev != nil {
		return prev.(*Histogram)
	}
	return h
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

func (h *Histogram) writeSeries(b *strings.Builder, name, labels string) {
	h.mu.Lock()
	counts := append([]uint64(nil), h.counts...)
	sum, count := h.sum, h.count
	h.mu.Unlock()
	var cum uint64
	for i, c := range counts {
		cum += c
		le := "+Inf"
		if i < len(h.bounds) {
			le = formatFloat(h.bounds[i])
		}
		b.WriteString(name + "_bucket" + withLabel(labels, "le", le) + " " + formatFloat(float64(cum)) + "\n")
	}
	b.WriteString(name + "_sum" + labels + " " + formatFloat(sum) + "\n")
	b.WriteString(name + "_count" + labels + " " + formatFloat(float64(count)) + "\n")
}

// withLabel adds k="v" to a rendered label string ("" or "{a=\"b\"}").
func withLabel(labels, k, v string) string {
	pair := k + `="` + escapeLabel(v) + `"`
	if labels == "" {
		return "{" + pair + "}"
	}
	return labels[:len(labels)-1] + "," + pair + "}"
}
