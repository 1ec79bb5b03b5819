// Package logging builds the daemon's slog logger: text to stderr, no
// timestamps under journald (it stamps lines itself), and secrets scrubbed
// from messages and attributes: every configured secret, and the
// well-known secret shapes (patterns.go: access_token=, Bearer, API keys in
// URLs, headers and JSON). The same Scrubber redacts the error texts the
// daemon stores in its database (error log, job errors, tool results).
package logging

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Options configure New.
type Options struct {
	Level    string // debug | info | warn | error
	Journald bool   // true when stderr goes to the journal (JOURNAL_STREAM is set)
	JSON     bool
}

// Scrubber replaces secret values in log output and in the error texts the
// daemon keeps in its database. Update it on reload. A nil *Scrubber still
// removes the well-known secret shapes (ScrubPatterns).
type Scrubber struct {
	r atomic.Pointer[strings.Replacer]
}

// Set installs the secrets to scrub (empty strings and very short values
// are ignored: scrubbing "a" would destroy every line). A secret is also
// replaced where it appears URL-escaped or JSON-escaped; longer secrets win
// over shorter ones they contain.
func (s *Scrubber) Set(secrets []string) {
	seen := map[string]bool{}
	var forms []string
	for _, v := range secrets {
		if len(v) < 4 {
			continue
		}
		for _, f := range []string{v, url.QueryEscape(v), url.PathEscape(v), jsonEscape(v)} {
			if !seen[f] {
				seen[f] = true
				forms = append(forms, f)
			}
		}
	}
	// strings.Replacer tries the pairs in order at each position: a secret
	// that starts with another one must come first, or its tail leaks.
	slices.SortStableFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, "***")
	}
	s.r.Store(strings.NewReplacer(pairs...))
}

func jsonEscape(v string) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) < 2 {
		return v
	}
	return string(b[1 : len(b)-1])
}

// Scrub returns v with the configured secrets replaced, then the
// well-known secret shapes (ScrubPatterns). The database error log
// (pkg/errlog) and the scheduler's job errors store texts scrubbed by it.
func (s *Scrubber) Scrub(v string) string { return s.scrub(v) }

func (s *Scrubber) scrub(v string) string {
	if s != nil {
		if r := s.r.Load(); r != nil {
			v = r.Replace(v)
		}
	}
	return ScrubPatterns(v)
}

// ParseLevel maps a level name to slog.Level.
func ParseLevel(name string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(name)); err != nil {
		return 0, fmt.Errorf("logging: unknown level %q (want debug, info, warn or error)", name)
	}
	return l, nil
}

// New returns a logger writing to w, with level as a LevelVar so SIGHUP can
// change it.
func New(w io.Writer, level *slog.LevelVar, opts Options, scrub *Scrubber) *slog.Logger {
	ho := &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey && opts.Journald {
				return slog.Attr{}
			}
			// A nil scrub still removes the well-known secret shapes.
			switch a.Value.Kind() {
			case slog.KindString:
				a.Value = slog.StringValue(scrub.scrub(a.Value.String()))
			case slog.KindAny:
				switch v := a.Value.Any().(type) {
				case error:
					a.Value = slog.StringValue(scrub.scrub(v.Error()))
				default:
					// A URL, a request, a struct: printed as the text
					// handler would, replaced only when it held a secret
					// (the JSON handler keeps its encoding of clean values).
					str := fmt.Sprintf("%+v", v)
					if clean := scrub.scrub(str); clean != str {
						a.Value = slog.StringValue(clean)
					}
				}
			}
			return a
		},
	}
	var pw *priorityWriter
	if opts.Journald {
		pw = &priorityWriter{w: w}
		w = pw
	}
	var h slog.Handler
	if opts.JSON {
		h = slog.NewJSONHandler(w, ho)
	} else {
		h = slog.NewTextHandler(w, ho)
	}
	if pw != nil {
		h = &priorityHandler{Handler: h, w: pw}
	}
	return slog.New(h)
}

// priorityWriter prefixes each line with the syslog priority journald
// reads from a stream ("<3>" error ... "<7>" debug), so that
// `journalctl -p warning` works.
type priorityWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func (p *priorityWriter) Write(b []byte) (int, error) {
	// Called by the inner handler while priorityHandler holds p.mu.
	if _, err := io.WriteString(p.w, p.prefix); err != nil {
		return 0, err
	}
	return p.w.Write(b)
}

type priorityHandler struct {
	slog.Handler
	w *priorityWriter
}

func (h *priorityHandler) Handle(ctx context.Context, r slog.Record) error {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	h.w.prefix = priority(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h *priorityHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &priorityHandler{Handler: h.Handler.WithAttrs(as), w: h.w}
}

func (h *priorityHandler) WithGroup(name string) slog.Handler {
	return &priorityHandler{Handler: h.Handler.WithGroup(name), w: h.w}
}

func priority(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "<3>"
	case l >= slog.LevelWarn:
		return "<4>"
	case l >= slog.LevelInfo:
		return "<6>"
	}
	return "<7>"
}
