package websearch

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/config"
	"agent/pkg/webtest"
)

// logRecord is one captured log line.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
	text  string // msg and every attribute, for leak checks
}

// logCapture is a slog.Handler keeping every record.
type logCapture struct {
	mu   *sync.Mutex
	recs *[]logRecord
	with []slog.Attr
}

func newLogCapture() *logCapture {
	return &logCapture{mu: &sync.Mutex{}, recs: &[]logRecord{}}
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	var b strings.Builder
	b.WriteString(r.Message)
	add := func(a slog.Attr) {
		v := a.Value.Resolve().String()
		rec.attrs[a.Key] = v
		fmt.Fprintf(&b, " %s=%s", a.Key, v)
	}
	for _, a := range h.with {
		add(a)
	}
	r.Attrs(func(a slog.Attr) bool { add(a); return true })
	rec.text = b.String()
	h.mu.Lock()
	*h.recs = append(*h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.with = append(append([]slog.Attr(nil), h.with...), as...)
	return &c
}

func (h *logCapture) WithGroup(string) slog.Handler { return h }

func (h *logCapture) records() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logRecord(nil), *h.recs...)
}

// fixture is a router over the fake engines, with a fake clock and a log
// capture.
type fixture struct {
	fake  *webtest.Engines
	clock *clock.Fake
	logs  *logCapture
	r     *Router
}

var epoch = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// newFixture builds the fixture; edit changes the [web] section first.
func newFixture(t *testing.T, edit func(w *config.Web)) *fixture {
	t.Helper()
	f := &fixture{fake: webtest.NewEngines(t), clock: clock.NewFake(epoch), logs: newLogCapture()}
	f.fake.SetClock(f.clock.Now)
	w := f.fake.Web()
	if edit != nil {
		edit(&w)
	}
	f.r = New(Config{Web: w, Clock: f.clock, Logger: slog.New(f.logs)})
	return f
}

func (f *fixture) search(t *testing.T, engine, q string, max int) (*Outcome, error) {
	t.Helper()
	return f.r.Search(context.Background(), engine, Query{Text: q, Max: max})
}

var allKeys = []string{webtest.TavilyKey, webtest.BraveKey, webtest.GitHubKey, webtest.HuggingFaceKey}

// noSecrets fails when s holds a key.
func noSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, k := range allKeys {
		if strings.Contains(s, k) {
			t.Errorf("%s holds the key %q: %s", what, k, s)
		}
	}
}
