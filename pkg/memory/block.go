package memory

import (
	"context"
	"fmt"
	"strings"
	"time"

	"agent/pkg/clip"
)

// blockEntry is the last memory block built for a scope, kept for the
// zero-latency path.
type blockEntry struct {
	block string
	query string
}

// Format renders hits as the prompt's memory block: one dated line per
// fact with its id, so the model can correct or forget it.
func Format(hits []Hit, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	var b strings.Builder
	for _, h := range hits {
		when := h.Updated
		if !h.Time.IsZero() {
			when = h.Time
		}
		fmt.Fprintf(&b, "- #%d [%s] %s", h.ID, when.In(loc).Format("2006-01-02"), h.Text)
		var extra []string
		if h.Topic != "" {
			extra = append(extra, "topic: "+h.Topic)
		}
		if len(h.Persons) > 0 {
			extra = append(extra, "people: "+strings.Join(h.Persons, ", "))
		}
		if h.TimeText != "" && h.Time.IsZero() {
			extra = append(extra, "when: "+h.TimeText)
		}
		if len(extra) > 0 {
			b.WriteString(" (" + strings.Join(extra, "; ") + ")")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Block returns the memory block for a message of scope: the top k facts
// for query. With fast (the voice and hardware profiles) it does no
// embedding or database work on the caller's path: it starts a fresh
// retrieval, waits at most the fast budget for it, and otherwise returns
// the block cached for the scope by an earlier turn (the fresh one then
// replaces it when it completes, for the next turn).
func (s *Store) Block(ctx context.Context, scope, query string, fast bool) (string, error) {
	if !fast {
		return s.freshBlock(ctx, scope, query)
	}
	cached, hit := s.blocks.Get(scope)
	if hit && cached.query == query {
		return cached.block, nil
	}
	if s.bgCtx.Err() != nil {
		return cached.block, nil
	}
	if hit && !s.queryEmbedded(query) {
		// Embedding the query alone takes longer than the fast budget
		// (milliseconds of both cores on the box): take the cached block
		// now and refresh once the turn's first bytes are out, so the
		// retrieval does not compete with them for the CPU.
		s.refreshLater(scope, query)
		return cached.block, nil
	}
	done := make(chan string, 1)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		// The retrieval outlives a turn that stops waiting for it.
		rctx, cancel := context.WithTimeout(s.bgCtx, 10*time.Second)
		defer cancel()
		b, err := s.freshBlock(rctx, scope, query)
		if err != nil {
			s.logger.Warn("memory retrieval failed", "scope", scope, "err", err)
			return
		}
		done <- b
	}()
	budget := s.cfg.FastBudget
	if !hit {
		budget = s.cfg.ColdBudget
	}
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case b := <-done:
		return b, nil
	case <-t.C:
	case <-ctx.Done():
	}
	return cached.block, nil // "" on a cold cache
}

// RefreshDelay is how long a fast turn's deferred retrieval waits: longer
// than the turn takes to send its LLM request (about a millisecond).
const RefreshDelay = 20 * time.Millisecond

// queryEmbedded reports whether query's embedding is in the LRU (or there
// is no embedder, so retrieval is keyword-only and cheap).
func (s *Store) queryEmbedded(query string) bool {
	st := s.emb.Load()
	if st == nil {
		return true
	}
	_, ok := s.vectors.Get(st.id + "\x00" + clip.Bytes(query, MaxQueryBytes))
	return ok
}

// refreshLater rebuilds scope's cached block for query after RefreshDelay,
// in the background (Wait waits for it).
func (s *Store) refreshLater(scope, query string) {
	s.bg.Add(1)
	time.AfterFunc(RefreshDelay, func() {
		defer s.bg.Done()
		rctx, cancel := context.WithTimeout(s.bgCtx, 10*time.Second)
		defer cancel()
		if _, err := s.freshBlock(rctx, scope, query); err != nil && s.bgCtx.Err() == nil {
			s.logger.Warn("memory retrieval failed", "scope", scope, "err", err)
		}
	})
}

// CachedBlock returns the block cached for scope without any other work:
// the zero-latency path's lookup (for benchmarks and the voice channel's
// first bytes).
func (s *Store) CachedBlock(scope string) (string, bool) {
	e, ok := s.blocks.Get(scope)
	return e.block, ok
}

func (s *Store) freshBlock(ctx context.Context, scope, query string) (string, error) {
	s.cacheMu.Lock()
	gen := s.gen
	s.cacheMu.Unlock()
	hits, err := s.Search(ctx, scope, query, s.cfg.TopK)
	if err != nil {
		return "", err
	}
	b := Format(hits, s.cfg.Location)
	s.cacheMu.Lock()
	if s.gen == gen { // no fact changed while it ran: safe to cache
		s.blocks.Put(scope, blockEntry{block: b, query: query})
	}
	s.cacheMu.Unlock()
	return b, nil
}

// changed is called after facts of scope were written. A cached block may
// now be stale: after a forget it must not show the fact again, so it is
// dropped at once; either way it is rebuilt in the background for the
// query it was built for.
func (s *Store) changed(scope string, forgot bool) {
	s.cacheMu.Lock()
	s.gen++
	e, ok := s.blocks.Get(scope)
	if ok && forgot {
		s.blocks.Delete(scope)
	}
	if !ok || s.bgCtx.Err() != nil {
		s.cacheMu.Unlock()
		return
	}
	// One refresh per scope at a time: facts stored in a burst (a
	// compression batch) cost one more retrieval, not one each.
	if _, running := s.refreshing[scope]; running {
		s.refreshing[scope] = e.query // run once more when it finishes
		s.cacheMu.Unlock()
		return
	}
	s.refreshing[scope] = ""
	s.cacheMu.Unlock()
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		query := e.query
		for {
			ctx, cancel := context.WithTimeout(s.bgCtx, 10*time.Second)
			if _, err := s.freshBlock(ctx, scope, query); err != nil {
				s.logger.Warn("refreshing the memory cache failed", "scope", scope, "err", err)
			}
			cancel()
			s.cacheMu.Lock()
			again := s.refreshing[scope]
			if again == "" || s.bgCtx.Err() != nil {
				delete(s.refreshing, scope)
				s.cacheMu.Unlock()
				return
			}
			s.refreshing[scope] = ""
			s.cacheMu.Unlock()
			query = again
		}
	}()
}
