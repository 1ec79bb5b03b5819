// Package errlog keeps the daemon's recent warnings and errors in the
// database (table error_log), so self_check can report what went wrong
// since it last looked and diagnose can find the errors of one session.
//
// It is a slog.Handler wrapper: every record still goes to the wrapped
// handler (journald) first; warnings and above are also queued for a single
// writer goroutine. The logger never blocks on the database and never
// recurses: a full queue or an exhausted rate budget drops the record (and
// counts it, written later as one summary row), and the writer reports its
// own failures only through counters, never through the logger. The table
// is bounded: after every batch rows beyond MaxRows are deleted, oldest
// first.
package errlog

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"agent/pkg/clip"
	"agent/pkg/logging"
)

// Defaults of Options.
const (
	DefaultMaxRows = 2000
	DefaultRate    = 2.0 // records per second, sustained
	DefaultBurst   = 50
	DefaultQueue   = 256
)

// Limits on what one row holds.
const (
	maxMsg   = 1000
	maxValue = 1000
	maxStack = 4000
	maxAttrs = 32
)

// Options of a Recorder. Zero values take the defaults.
type Options struct {
	MaxRows int        // rows kept
	Rate    float64    // records per second admitted on average
	Burst   int        // records admitted at once
	Queue   int        // records waiting for the writer
	Level   slog.Level // lowest level kept; default slog.LevelWarn
	Now     func() time.Time
	// Scrub removes secrets from messages and values before they are
	// stored (logging.Scrubber.Scrub: the configured secrets and the
	// well-known secret shapes); default logging.ScrubPatterns.
	Scrub func(string) string
}

// Recorder writes records to error_log. Safe for concurrent use.
type Recorder struct {
	db   *sql.DB
	o    Options
	ch   chan item
	quit chan struct{}
	done chan struct{}
	once sync.Once

	mu     sync.Mutex // token bucket
	tokens float64
	last   time.Time

	dropped   atomic.Int64 // since the last summary row
	dropTotal atomic.Int64
	writeErrs atomic.Int64
}

type item struct {
	e     Entry
	flush chan struct{} // set: a Flush marker, not a record
}

// New starts a Recorder writing to db (which must have the error_log
// table). Close stops it.
func New(db *sql.DB, o Options) *Recorder {
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMaxRows
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.Level == 0 {
		o.Level = slog.LevelWarn
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Scrub == nil {
		o.Scrub = logging.ScrubPatterns
	}
	r := &Recorder{db: db, o: o, ch: make(chan item, o.Queue), quit: make(chan struct{}), done: make(chan struct{}),
		tokens: float64(o.Burst)}
	go r.writer()
	return r
}

// Dropped is how many records were not kept (rate limit, full queue).
func (r *Recorder) Dropped() int64 { return r.dropTotal.Load() }

// WriteErrors is how many batches failed to be written.
func (r *Recorder) WriteErrors() int64 { return r.writeErrs.Load() }

// Queued is how many records wait for the writer.
func (r *Recorder) Queued() int { return len(r.ch) }

// Flush waits until everything queued before it is written, or ctx ends.
func (r *Recorder) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case r.ch <- item{flush: done}:
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is queued and stops the writer; records logged later
// are dropped. It waits at most until ctx ends.
func (r *Recorder) Close(ctx context.Context) error {
	r.once.Do(func() { close(r.quit) })
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("errlog: close: %w", ctx.Err())
	}
}

// admit takes a token from the bucket.
func (r *Recorder) admit(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() {
		if dt := now.Sub(r.last).Seconds(); dt > 0 {
			r.tokens = min(float64(r.o.Burst), r.tokens+dt*r.o.Rate)
		}
	}
	r.last = now
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}

// enqueue never blocks.
func (r *Recorder) enqueue(e Entry) {
	select {
	case <-r.quit:
		return
	default:
	}
	if !r.admit(e.At) {
		r.drop()
		return
	}
	select {
	case r.ch <- item{e: e}:
	default:
		r.drop()
	}
}

func (r *Recorder) drop() {
	r.dropped.Add(1)
	r.dropTotal.Add(1)
}

func (r *Recorder) writer() {
	defer close(r.done)
	if err := r.rescrub(); err != nil {
		r.writeErrs.Add(1)
	}
	for {
		var batch []item
		select {
		case it := <-r.ch:
			batch = append(batch, it)
		case <-r.quit:
			r.drain(nil)
			return
		}
		r.drain(batch)
	}
}

// drain writes batch plus whatever else is queued now.
func (r *Recorder) drain(batch []item) {
more:
	for len(batch) < 128 {
		select {
		case it := <-r.ch:
			batch = append(batch, it)
		default:
			break more
		}
	}
	var entries []Entry
	var flushes []chan struct{}
	for _, it := range batch {
		if it.flush != nil {
			flushes = append(flushes, it.flush)
			continue
		}
		entries = append(entries, it.e)
	}
	if n := r.dropped.Swap(0); n > 0 {
		entries = append(entries, Entry{At: r.o.Now(), Level: "WARN", Component: "errlog",
			Msg: fmt.Sprintf("%d log records not kept in error_log (rate limit or full queue; the journal has them)", n)})
	}
	if len(entries) > 0 {
		if err := r.write(entries); err != nil {
			r.writeErrs.Add(1)
		}
	}
	for _, f := range flushes {
		close(f)
	}
}

func (r *Recorder) write(entries []Entry) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO error_log(at, level, component, msg, attrs) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, e := range entries {
		attrs := ""
		if len(e.Attrs) > 0 {
			b, _ := json.Marshal(e.Attrs)
			attrs = string(b)
		}
		if _, err := stmt.ExecContext(ctx, e.At.UnixMilli(), e.Level, e.Component, e.Msg, attrs); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM error_log WHERE id <= (SELECT max(id) FROM error_log) - ?`, r.o.MaxRows); err != nil {
		return err
	}
	return tx.Commit()
}

// rescrub passes the rows already stored through Scrub once, when the
// writer starts: rows written by an older release, or before a secret was
// configured, lose it too (secure_delete overwrites the old text in the
// file; the WAL keeps it until the next checkpoint). The table is bounded,
// so this is at most MaxRows small rows.
func (r *Recorder) rescrub() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := r.db.QueryContext(ctx, `SELECT id, component, msg, attrs FROM error_log`)
	if err != nil {
		return err
	}
	type fix struct {
		id                    int64
		component, msg, attrs string
	}
	var fixes []fix
	for rows.Next() {
		var f fix
		if err := rows.Scan(&f.id, &f.component, &f.msg, &f.attrs); err != nil {
			rows.Close()
			return err
		}
		changed := false
		for _, p := range []*string{&f.component, &f.msg} {
			if v := r.o.Scrub(*p); v != *p {
				*p, changed = v, true
			}
		}
		var attrs map[string]string
		if f.attrs != "" && json.Unmarshal([]byte(f.attrs), &attrs) == nil {
			dirty := false
			for k, v := range attrs {
				if c := r.o.Scrub(v); c != v {
					attrs[k], dirty = c, true
				}
			}
			if dirty {
				b, _ := json.Marshal(attrs)
				f.attrs, changed = string(b), true
			}
		} else if v := r.o.Scrub(f.attrs); v != f.attrs {
			f.attrs, changed = v, true // not JSON: scrubbed as text
		}
		if changed {
			fixes = append(fixes, f)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(fixes) == 0 {
		return err
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, f := range fixes {
		if _, err := tx.ExecContext(ctx, `UPDATE error_log SET component = ?, msg = ?, attrs = ? WHERE id = ?`,
			f.component, f.msg, f.attrs, f.id); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Handler wraps next: every record goes to next; records at Options.Level
// and above are also kept in error_log.
func (r *Recorder) Handler(next slog.Handler) slog.Handler {
	return &handler{next: next, r: r}
}

type handler struct {
	next   slog.Handler
	r      *Recorder
	attrs  []slog.Attr // from WithAttrs, keys already prefixed by groups
	prefix string      // from WithGroup: "g." ...
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.r.o.Level || h.next.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	var err error
	if h.next.Enabled(ctx, rec.Level) {
		err = h.next.Handle(ctx, rec)
	}
	if rec.Level >= h.r.o.Level {
		h.r.enqueue(h.entry(rec))
	}
	return err
}

func (h *handler) entry(rec slog.Record) Entry {
	// The recorder's clock, not rec.Time: rows line up with the session
	// timestamps written under the same (injectable) clock.
	e := Entry{At: h.r.o.Now(), Level: rec.Level.String(), Msg: clip.String(h.r.o.Scrub(rec.Message), maxMsg), Attrs: map[string]string{}}
	add := func(key string, v slog.Value) {
		if len(e.Attrs) >= maxAttrs {
			return
		}
		s := h.r.o.Scrub(valueString(v))
		if key == "component" {
			e.Component = clip.String(s, 64)
			return
		}
		limit := maxValue
		if key == "stack" {
			limit = maxStack
		}
		e.Attrs[key] = clip.String(s, limit)
	}
	for _, a := range h.attrs {
		flatten(a.Key, a.Value, add)
	}
	rec.Attrs(func(a slog.Attr) bool {
		flatten(h.prefix+a.Key, a.Value, add)
		return true
	})
	return e
}

func flatten(key string, v slog.Value, add func(string, slog.Value)) {
	v = v.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, a := range v.Group() {
			k := a.Key
			if key != "" {
				k = key + "." + k
			}
			flatten(k, a.Value, add)
		}
		return
	}
	if key == "" {
		return
	}
	add(key, v)
}

func valueString(v slog.Value) string {
	if v.Kind() == slog.KindAny {
		if err, ok := v.Any().(error); ok {
			return err.Error()
		}
	}
	return v.String()
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.next = h.next.WithAttrs(as)
	n.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		n.attrs = append(n.attrs, slog.Attr{Key: h.prefix + a.Key, Value: a.Value})
	}
	return &n
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.next = h.next.WithGroup(name)
	n.prefix = h.prefix + name + "."
	return &n
}

// Entry is one kept record.
type Entry struct {
	ID        int64             `json:"id"`
	At        time.Time         `json:"at"`
	Level     string            `json:"level"`
	Component string            `json:"component,omitempty"`
	Msg       string            `json:"msg"`
	Attrs     map[string]string `json:"attrs,omitempty"`
}

// Panic reports whether the record is about a recovered panic (the runner
// and the agent log those with a "panic" attribute).
func (e Entry) Panic() bool {
	_, ok := e.Attrs["panic"]
	return ok || strings.Contains(strings.ToLower(e.Msg), "panicked")
}

// Error reports whether the record is at error level or above.
func (e Entry) Error() bool {
	var l slog.Level
	if err := l.UnmarshalText([]byte(e.Level)); err != nil {
		return false
	}
	return l >= slog.LevelError
}

const selectEntries = `SELECT id, at, level, component, msg, attrs FROM error_log `

// Since returns the entries after since, oldest first, at most limit.
func Since(ctx context.Context, db *sql.DB, since time.Time, limit int) ([]Entry, error) {
	return query(ctx, db, selectEntries+`WHERE at > ? ORDER BY id LIMIT ?`, since.UnixMilli(), limit)
}

// ForKey returns the entries logged with attribute key=routingKey between
// from and to (inclusive), oldest first, at most limit.
func ForKey(ctx context.Context, db *sql.DB, routingKey string, from, to time.Time, limit int) ([]Entry, error) {
	return query(ctx, db, selectEntries+`WHERE at BETWEEN ? AND ? AND attrs <> '' AND json_extract(attrs, '$.key') = ? ORDER BY id LIMIT ?`,
		from.UnixMilli(), to.UnixMilli(), routingKey, limit)
}

func query(ctx context.Context, db *sql.DB, q string, args ...any) ([]Entry, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("errlog: read error_log: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var at int64
		var attrs string
		if err := rows.Scan(&e.ID, &at, &e.Level, &e.Component, &e.Msg, &attrs); err != nil {
			return nil, fmt.Errorf("errlog: read error_log: %w", err)
		}
		e.At = time.UnixMilli(at)
		if attrs != "" {
			_ = json.Unmarshal([]byte(attrs), &e.Attrs) // a damaged row still shows its message
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("errlog: read error_log: %w", err)
	}
	return out, nil
}
