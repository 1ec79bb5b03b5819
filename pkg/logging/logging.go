// Package logging builds the daemon's slog logger: text to stderr, no
// timestamps under journald (it stamps lines itself), and every configured
// secret scrubbed from messages and attributes.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
)

// Options configure New.
type Options struct {
	Level    string // debug | info | warn | error
	Journald bool   // true when stderr goes to the journal (JOURNAL_STREAM is set)
	JSON     bool
}

// Scrubber replaces secret values in log output. Update it on reload.
type Scrubber struct {
	r atomic.Pointer[strings.Replacer]
}

// Set installs the secrets to scrub (empty strings and very short values
// are ignored: scrubbing "a" would destroy every line).
func (s *Scrubber) Set(secrets []string) {
	var pairs []string
	for _, v := range secrets {
		if len(v) >= 4 {
			pairs = append(pairs, v, "***")
		}
	}
	s.r.Store(strings.NewReplacer(pairs...))
}

func (s *Scrubber) scrub(v string) string {
	if r := s.r.Load(); r != nil {
		return r.Replace(v)
	}
	return v
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
			if scrub != nil {
				switch a.Value.Kind() {
				case slog.KindString:
					a.Value = slog.StringValue(scrub.scrub(a.Value.String()))
				case slog.KindAny:
					if err, ok := a.Value.Any().(error); ok {
						a.Value = slog.StringValue(scrub.scrub(err.Error()))
					}
				}
			}
			return a
		},
	}
	var h slog.Handler
	if opts.JSON {
		h = slog.NewJSONHandler(w, ho)
	} else {
		h = slog.NewTextHandler(w, ho)
	}
	return slog.New(h)
}
