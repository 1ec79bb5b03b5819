// Package metrics is a small Prometheus text-format registry: counters,
// gauges and gauge functions, enough for an appliance's /metrics without
// pulling in a client library.
package metrics

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry holds metric families. Safe for concurrent use.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
}

type family struct {
	name, help, kind string
	series           map[string]func() float64 // label string -> value
	owners           map[string]any            // label string -> *Counter / *Gauge
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{families: map[string]*family{}} }

// Counter only goes up.
type Counter struct{ bits atomic.Uint64 }

// Add adds v (ignored when negative).
func (c *Counter) Add(v float64) {
	if v < 0 {
		return
	}
	for {
		old := c.bits.Load()
		if c.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Inc adds one.
func (c *Counter) Inc() { c.Add(1) }

// Value reads the counter.
func (c *Counter) Value() float64 { return math.Float64frombits(c.bits.Load()) }

// Gauge goes up and down.
type Gauge struct{ bits atomic.Uint64 }

// Set stores v.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Value reads the gauge.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

// Labels are a metric's constant labels.
type Labels map[string]string

// Counter registers (or returns the existing) counter for name+labels.
func (r *Registry) Counter(name, help string, labels Labels) *Counter {
	c := &Counter{}
	if prev := r.add(name, help, "counter", labels, c, c.Value); prev != nil {
		return prev.(*Counter)
	}
	return c
}

// Gauge registers (or returns the existing) gauge for name+labels.
func (r *Registry) Gauge(name, help string, labels Labels) *Gauge {
	g := &Gauge{}
	if prev := r.add(name, help, "gauge", labels, g, g.Value); prev != nil {
		return prev.(*Gauge)
	}
	return g
}

// GaugeFunc registers a gauge computed at scrape time.
func (r *Registry) GaugeFunc(name, help string, labels Labels, fn func() float64) {
	r.add(name, help, "gauge", labels, nil, fn)
}

func (r *Registry) add(name, help, kind string, labels Labels, owner any, fn func() float64) any {
	if !validName(name) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", name)) // programming error
	}
	key := labelString(labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.families[name]
	if f == nil {
		f = &family{name: name, help: help, kind: kind, series: map[string]func() float64{}, owners: map[string]any{}}
		r.families[name] = f
	}
	if f.kind != kind {
		panic(fmt.Sprintf("metrics: %s registered as %s and %s", name, f.kind, kind))
	}
	if prev, ok := f.owners[key]; ok && owner != nil {
		return prev
	}
	f.series[key] = fn
	if owner != nil {
		f.owners[key] = owner
	}
	return nil
}

// WriteText writes every family in Prometheus text exposition format 0.0.4.
func (r *Registry) WriteText(w io.Writer) error {
	r.mu.Lock()
	names := make([]string, 0, len(r.families))
	for n := range r.families {
		names = append(names, n)
	}
	sort.Strings(names)
	type line struct {
		labels string
		fn     func() float64
		owner  any // a seriesWriter writes its own lines (histogram.go)
	}
	type snap struct {
		f     *family
		lines []line
	}
	snaps := make([]snap, 0, len(names))
	for _, n := range names {
		f := r.families[n]
		s := snap{f: f}
		for k, fn := range f.series {
			s.lines = append(s.lines, line{k, fn, f.owners[k]})
		}
		sort.Slice(s.lines, func(i, j int) bool { return s.lines[i].labels < s.lines[j].labels })
		snaps = append(snaps, s)
	}
	r.mu.Unlock()

	var b strings.Builder
	for _, s := range snaps {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", s.f.name, escapeHelp(s.f.help), s.f.name, s.f.kind)
		for _, l := range s.lines {
			if w, ok := l.owner.(seriesWriter); ok {
				w.writeSeries(&b, s.f.name, l.labels)
				continue
			}
			b.WriteString(s.f.name)
			b.WriteString(l.labels)
			b.WriteByte(' ')
			b.WriteString(formatFloat(l.fn()))
			b.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RegisterProcess adds process_* and go_* gauges read at scrape time.
func (r *Registry) RegisterProcess(pageSize int) {
	r.GaugeFunc("process_resident_memory_bytes", "Resident set size in bytes.", nil, func() float64 {
		return float64(ResidentBytes(pageSize))
	})
	r.GaugeFunc("go_goroutines", "Number of goroutines.", nil, func() float64 { return float64(runtime.NumGoroutine()) })
	r.GaugeFunc("go_memstats_heap_inuse_bytes", "Go heap in use.", nil, func() float64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapInuse)
	})
}

// ResidentBytes reads this process's RSS from /proc/self/statm (0 when
// unavailable).
func ResidentBytes(pageSize int) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(pageSize)
}

func labelString(l Labels) string {
	if len(l) == 0 {
		return ""
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		if !validName(k) {
			panic(fmt.Sprintf("metrics: invalid label name %q", k))
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=\"%s\"", k, escapeLabel(l[k]))
	}
	b.WriteByte('}')
	return b.String()
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		ok := c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
