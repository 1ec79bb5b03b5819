package websearch

// Attacks on web_search by a hostile or broken engine (security review of
// issue 16). Tests named TestAttack* that fail show a finding; the others
// are attacks that held and stay as regression tests.

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"agent/pkg/config"
	"agent/pkg/webtest"
)

// FINDING: Retry-After as a number is capped at maxCooldown (24 h), as an
// HTTP date it is not. One 429 with "Retry-After: Fri, 31 Dec 9999 ..."
// (from the engine or any proxy in front of it) benches the engine until
// the daemon restarts or [web] changes, and the model is told to retry in
// 2562047h.
func TestAttackRetryAfterDateIsCapped(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT")
	if got := retryAfter(h, now); got > maxCooldown {
		t.Errorf("Retry-After date in 9999: %v, want at most %v", got, maxCooldown)
	}

	f := newFixture(t, nil)
	f.fake.Handle(config.EngineSearXNG, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	_, _ = f.search(t, config.EngineSearXNG, "tidal", 2)
	if until, ok := f.r.coolingDown(config.EngineSearXNG); !ok || until.Sub(f.clock.Now()) > maxCooldown {
		t.Errorf("searxng benched until %v (%v from now), want at most %v", until, until.Sub(f.clock.Now()), maxCooldown)
	}
}

// FINDING (low): scrub replaces the whole key only, and runs after clean
// has cut the engine's message at 200 characters. An error that echoes the
// key past character ~170 is cut inside the key, and the part before the
// cut reaches the model, the user and the log.
func TestAttackKeyLeaksWhenErrorIsCut(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.Handle(config.EngineTavily, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		pad := strings.Repeat("x", 149) // the key starts at character 180 of the message
		fmt.Fprintf(w, `{"detail": {"error": "Unauthorized: %s invalid API key %s"}}`, pad, webtest.TavilyKey)
	})
	_, err := f.search(t, config.EngineTavily, "tidal", 2)
	if err == nil {
		t.Fatal("no error")
	}
	t.Logf("error: %v", err)
	key := webtest.TavilyKey
	for n := len(key); n >= 12; n-- {
		if strings.Contains(err.Error(), key[:n]) {
			t.Errorf("the error holds %d of the key's %d characters (%q): %s", n, len(key), key[:n], err)
			break
		}
	}
	for _, rec := range f.logs.records() {
		if strings.Contains(rec.text, key[:12]) {
			t.Errorf("log holds part of the key: %s", rec.text)
			break
		}
	}
}

// FINDING (low): errors are scrubbed of the key, results are not. An
// engine that echoes the key in a hit (or a page that shows it) hands it
// to the model and the user in the tool answer.
func TestAttackKeyEchoedInResults(t *testing.T) {
	f := newFixture(t, nil)
	f.fake.Handle(config.EngineTavily, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"results": [{"title": "debug", "url": "https://example.com/", "content": "request from key %s"}]}`, r.Header.Get("Authorization")[len("Bearer "):])
	})
	out, err := runTool(t, f.r, map[string]any{"query": "tidal power", "engine": "tavily"})
	if strings.Contains(out+fmt.Sprint(err), webtest.TavilyKey) {
		t.Errorf("the tool answer holds the Tavily key:\n%s%v", out, err)
	}
}

// --- Attacks that held. ---

func TestAttackRetryValuesAreBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, v := range []string{"-1", "-9223372036854775808", "9223372036854775807", "1e9", "0x10", " 60 ", "Thu, 01 Jan 1970 00:00:00 GMT"} {
		h := http.Header{}
		h.Set("Retry-After", v)
		if got := retryAfter(h, now); got < 0 || got > maxCooldown {
			t.Errorf("Retry-After %q: %v", v, got)
		}
	}
	for _, v := range []string{`"api";r=0;t=-5`, `"api";r=0;t=9223372036854775807`, `t=` + fmt.Sprint(uint64(math.MaxUint64))} {
		if got := rateLimitReset(v); got < 0 || got > maxCooldown {
			t.Errorf("RateLimit %q: %v", v, got)
		}
	}
	b := http.Header{}
	b.Set("X-RateLimit-Remaining", "0, 0")
	b.Set("X-RateLimit-Reset", "-9223372036854775808, 9223372036854775807")
	if got := braveReset(b); got < 0 || got > maxCooldown {
		t.Errorf("Brave reset: %v", got)
	}
	// GitHub: x-ratelimit-reset is an epoch; MinInt64 - now overflows.
	f := newFixture(t, nil)
	for _, reset := range []string{"-9223372036854775808", "9223372036854775807", "-1"} {
		f.fake.Handle(config.EngineGitHub, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Ratelimit-Remaining", "0")
			w.Header().Set("X-Ratelimit-Reset", reset)
			w.WriteHeader(http.StatusForbidden)
		})
		f.r.mu.Lock()
		f.r.cooldown = map[string]time.Time{}
		f.r.mu.Unlock()
		f.search(t, config.EngineGitHub, "golang repo", 2)
		if until, ok := f.r.coolingDown(config.EngineGitHub); ok && until.Sub(f.clock.Now()) > maxCooldown {
			t.Errorf("reset %s: benched %v", reset, until.Sub(f.clock.Now()))
		}
	}
}

// A gzip bomb and a body without end from an engine: read up to MaxBody.
func TestAttackEngineBodyBombs(t *testing.T) {
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	zw.Write([]byte(`{"results": [`))
	chunk := bytes.Repeat([]byte(`{"title":"a","url":"https://a.example/","content":"b"},`), 1<<14)
	for range 200 {
		zw.Write(chunk)
	}
	zw.Close()
	bomb := z.Bytes()
	f := newFixture(t, nil)
	f.fake.Handle(config.EngineSearXNG, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(bomb)
	})
	f.fake.Handle(config.EngineBrave, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	for _, e := range []string{config.EngineSearXNG, config.EngineBrave} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := f.search(t, e, "tidal", 2)
		runtime.ReadMemStats(&after)
		if err == nil || time.Since(start) > 5*time.Second || after.TotalAlloc-before.TotalAlloc > 64<<20 {
			t.Errorf("%s: %v after %v, %d MB allocated", e, err, time.Since(start), (after.TotalAlloc-before.TotalAlloc)>>20)
		}
	}
}

// JSON nested past encoding/json's depth limit, and huge numbers: an
// error, no panic.
func TestAttackEngineJSONPathologies(t *testing.T) {
	f := newFixture(t, nil)
	bodies := []string{
		`{"results": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
		`{"results": [{"title": ` + strings.Repeat("{\"a\":", 20000) + "1" + strings.Repeat("}", 20000) + `}]}`,
		`{"results": [{"title": 1e999999, "url": "https://a.example/", "content": "x"}]}`,
	}
	for i, b := range bodies {
		f.fake.Handle(config.EngineSearXNG, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(b))
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = f.r.Search(ctx, config.EngineSearXNG, Query{Text: "tidal", Max: 2})
		cancel()
		_ = i
	}
}
