package memory

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode"

	"agent/pkg/clip"
)

// Hit is one retrieved fact.
type Hit struct {
	Fact
	Score      float64 // fused (reciprocal rank) score; higher is better
	Similarity float64 // cosine to the query; 0 without a vector match
	// VectorRank and KeywordRank are the 1-based ranks in each list (0:
	// not in it).
	VectorRank  int
	KeywordRank int
}

// rrfK is the reciprocal rank fusion constant (Cormack et al.): a rank r
// contributes 1/(rrfK+r).
const rrfK = 60

type scored struct {
	id  int64
	sim float64
}

// embedOne embeds a query or fact, through the embedding LRU.
func (s *Store) embedOne(ctx context.Context, st *embedderState, text string) ([]float32, error) {
	text = clip.Bytes(text, MaxQueryBytes)
	key := st.id + "\x00" + text
	if v, ok := s.vectors.Get(key); ok {
		return v, nil
	}
	vecs, err := st.e.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	if len(vecs) != 1 || len(vecs[0]) != st.dim {
		return nil, fmt.Errorf("memory: embedder returned %d vectors of width %d, want 1 of %d", len(vecs), widthOf(vecs), st.dim)
	}
	s.vectors.Put(key, vecs[0])
	return vecs[0], nil
}

func widthOf(v [][]float32) int {
	if len(v) == 0 {
		return 0
	}
	return len(v[0])
}

// nearest returns the k current facts of scope closest to vec by exact
// cosine, among the candidates the bit index proposes.
func (s *Store) nearest(ctx context.Context, scope string, vec []float32, st *embedderState, k int) ([]scored, error) {
	cand := max(s.cfg.Candidates, 8*k)
	if scope != "" && s.hasVec.Load() {
		return s.nearestInRAM(ctx, scope, vec, st, k, cand)
	}
	q := `WITH knn AS (
			SELECT rowid, distance FROM memory_vec
			WHERE embedding MATCH vec_quantize_binary(?1) AND k = ?2 AND scope = ?3)
		SELECT f.id, f.embedding FROM knn JOIN memory_facts f ON f.id = knn.rowid
		WHERE f.superseded_by IS NULL AND f.scope = ?3`
	if scope == "" { // SearchAllScopes: the operator
		q = `WITH knn AS (
			SELECT rowid, distance FROM memory_vec WHERE embedding MATCH vec_quantize_binary(?1) AND k = ?2)
		SELECT f.id, f.embedding FROM knn JOIN memory_facts f ON f.id = knn.rowid WHERE f.superseded_by IS NULL`
	}
	rows, err := s.db.QueryContext(ctx, q, encodeVector(vec), cand, scope)
	if err != nil {
		return nil, fmt.Errorf("memory: vector search: %w", err)
	}
	return rerank(rows, vec, st, k)
}

// nearestInRAM is nearest over scope's index in RAM (bitindex.go): cand
// candidates by Hamming distance, re-ranked by exact cosine from SQLite.
func (s *Store) nearestInRAM(ctx context.Context, scope string, vec []float32, st *embedderState, k, cand int) ([]scored, error) {
	idx, err := s.bitScope(ctx, scope, st.dim)
	if err != nil {
		return nil, err
	}
	ids := idx.nearest(quantize(vec), cand)
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, scope)
	marks := make([]byte, 0, 2*len(ids))
	for i, id := range ids {
		if i > 0 {
			marks = append(marks, ',')
		}
		marks = append(marks, '?')
		args = append(args, id)
	}
	// "+scope": the ids are looked up by primary key; an index on scope
	// would have SQLite walk the scope's every fact.
	rows, err := s.db.QueryContext(ctx, `SELECT id, embedding FROM memory_facts
		WHERE +scope = ? AND superseded_by IS NULL AND embedding IS NOT NULL AND id IN (`+string(marks)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("memory: vector search: %w", err)
	}
	return rerank(rows, vec, st, k)
}

// rerank reads (id, embedding) rows and keeps the k closest to vec by
// exact cosine. It closes rows.
func rerank(rows *sql.Rows, vec []float32, st *embedderState, k int) ([]scored, error) {
	defer rows.Close()
	var out []scored
	for rows.Next() {
		var id int64
		var blob sql.RawBytes // read in place: no copy, no garbage per candidate
		if err := rows.Scan(&id, &blob); err != nil {
			return nil, fmt.Errorf("memory: vector search: %w", err)
		}
		sim, ok := cosineBlob(vec, blob, st.dim)
		if !ok {
			continue
		}
		out = append(out, scored{id: id, sim: sim})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("memory: vector search: %w", err)
	}
	slices.SortFunc(out, func(a, b scored) int {
		if c := cmp.Compare(b.sim, a.sim); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	return out[:min(k, len(out))], nil
}

// Search returns the k facts of scope most relevant to query: vector
// search (when a model is loaded) and keyword search fused by reciprocal
// rank. k <= 0 means the configured top k.
func (s *Store) Search(ctx context.Context, scope, query string, k int) ([]Hit, error) {
	if scope == "" {
		return nil, fmt.Errorf("%w: no scope", ErrInvalid)
	}
	return s.search(ctx, scope, query, k)
}

// SearchAllScopes is Search over every scope: for the operator (agentctl
// memory search), never for a conversation.
func (s *Store) SearchAllScopes(ctx context.Context, query string, k int) ([]Hit, error) {
	return s.search(ctx, "", query, k)
}

// search is Search; scope "" searches every scope.
func (s *Store) search(ctx context.Context, scope, query string, k int) ([]Hit, error) {
	if k <= 0 {
		k = s.cfg.TopK
	}
	k = min(k, 100)
	query = clip.Bytes(strings.TrimSpace(query), MaxQueryBytes)
	if query == "" {
		return nil, nil
	}
	depth := max(4*k, 20) // how deep each list goes into the fusion
	// Keyword search needs neither the embedding nor the vector search.
	// It runs beside the embedding when a core is free for it; otherwise
	// after the embedding, beside the vector search (a single thread, as
	// the keyword search is). On a two-core box ONNX Runtime's threads take
	// both cores, and a query run beside them delays the embedding by
	// about as long as it takes, and the embedding's tail by more.
	type kwResult struct {
		lists [][]int64
		err   error
	}
	kwDone := make(chan kwResult, 1)
	startKeywords := sync.OnceFunc(func() {
		go func() {
			lists, err := s.keywordSearch(ctx, scope, query, depth)
			kwDone <- kwResult{lists, err}
		}()
	})
	st := s.emb.Load()
	if st == nil || runtime.GOMAXPROCS(0) > embedThreads(st.e) {
		startKeywords()
	}
	var (
		vecList []scored
		vecErr  error
	)
	if st != nil {
		var vec []float32
		vec, vecErr = s.embedOne(ctx, st, query)
		startKeywords()
		if vecErr == nil {
			vecList, vecErr = s.nearest(ctx, scope, vec, st, depth)
		}
		if vecErr != nil {
			if ctx.Err() != nil {
				<-kwDone
				return nil, ctx.Err()
			}
			// Degrade to keywords rather than fail the turn.
			s.logger.Warn("vector search failed; keyword search only", "err", vecErr)
		}
	}
	kw := <-kwDone
	kwLists, err := kw.lists, kw.err
	if err != nil {
		if vecList == nil {
			return nil, err
		}
		s.logger.Warn("keyword search failed; vector search only", "err", err)
	}
	return s.fuse(ctx, scope, vecList, kwLists, k)
}

// embedThreads is how many cores an embedding keeps busy (embed.Embedder
// says; 1 for an embedder that does not).
func embedThreads(e Embedder) int {
	if t, ok := e.(interface{ Threads() int }); ok {
		return max(t.Threads(), 1)
	}
	return 1
}

func (s *Store) fuse(ctx context.Context, scope string, vecList []scored, kwLists [][]int64, k int) ([]Hit, error) {
	hits := map[int64]*Hit{}
	get := func(id int64) *Hit {
		h := hits[id]
		if h == nil {
			h = &Hit{Fact: Fact{ID: id}}
			hits[id] = h
		}
		return h
	}
	for i, c := range vecList {
		h := get(c.id)
		h.VectorRank, h.Similarity = i+1, c.sim
		h.Score += 1 / float64(rrfK+i+1)
	}
	for _, list := range kwLists {
		for i, id := range list {
			h := get(id)
			if h.KeywordRank == 0 || i+1 < h.KeywordRank {
				h.KeywordRank = i + 1
			}
			h.Score += 1 / float64(rrfK+i+1)
		}
	}
	list := make([]*Hit, 0, len(hits))
	for _, h := range hits {
		list = append(list, h)
	}
	slices.SortFunc(list, func(a, b *Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Similarity, a.Similarity); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	out := make([]Hit, 0, min(k, len(list)))
	for _, h := range list[:min(k, len(list))] {
		f, err := s.Get(ctx, scope, h.ID)
		if errors.Is(err, ErrNotFound) {
			continue // forgotten meanwhile
		}
		if err != nil {
			return nil, err
		}
		h.Fact = f
		out = append(out, *h)
	}
	return out, nil
}

// scopeTag is the one-token stand-in for a scope in memory_words, so a
// keyword search reads only that scope's postings (FTS5 intersects the
// tag's short list with the terms' lists instead of ranking every match of
// every scope). Hash collisions only cost speed: results are filtered by
// scope as well.
func scopeTag(scope string) string {
	h := fnv.New64a()
	h.Write([]byte(scope))
	return fmt.Sprintf("t%016x", h.Sum64())
}

// keywordSearch ranks the current facts of scope ("" = all) for the
// query's terms: words of alphabetic scripts by FTS5 bm25 over memory_words
// (restricted to the scope's tag), runs of Chinese, Japanese or Korean by
// their three-character windows over the trigram index. A query with
// neither but a two-character CJK word (below the trigram minimum) is
// matched as a substring. Each list is ranked on its own; fusion merges
// them.
func (s *Store) keywordSearch(ctx context.Context, scope, query string, n int) ([][]int64, error) {
	words, grams, short := ftsTerms(query)
	var lists [][]int64
	run := func(ids []int64, err error) error {
		if err != nil {
			return fmt.Errorf("memory: keyword search: %w", err)
		}
		if len(ids) > 0 {
			lists = append(lists, ids)
		}
		return nil
	}
	if len(words) == 0 && len(grams) == 0 && len(short) == 0 {
		return nil, nil
	}
	inScope, total, err := s.scopeSize(ctx, scope)
	if err != nil {
		return nil, err
	}
	// Most matches are the scope's when the scope holds most of the memory.
	mostly := 2*inScope >= total
	if len(words) > 0 {
		kept, postings, err := s.pickWords(ctx, words, total)
		if err != nil {
			return nil, err
		}
		match := "(" + ftsQuery(kept) + ")"
		// The scope's tag narrows the match to the scope: worth it when
		// its list is the shorter one to intersect. When one scope holds
		// most of the memory it costs a walk of a long list and saves
		// nothing.
		tag := scope != "" && inScope < postings
		if tag {
			match = "tag:" + scopeTag(scope) + " AND " + match
		}
		if err := run(s.rankedIDs(ctx, "memory_words", match, scope, n, tag || mostly)); err != nil {
			return nil, err
		}
	}
	if len(grams) > 0 {
		if err := run(s.rankedIDs(ctx, "memory_fts", ftsQuery(grams), scope, n, mostly)); err != nil {
			return nil, err
		}
	}
	if len(words) == 0 && len(grams) == 0 && len(short) > 0 {
		var cond []string
		var args []any
		where := `superseded_by IS NULL`
		if scope != "" { // the index on (scope, updated_at) narrows the scan
			where = `scope = ? AND superseded_by IS NULL`
			args = append(args, scope)
		}
		for _, t := range short {
			cond = append(cond, `instr(fact || ' ' || keywords || ' ' || persons || ' ' || topic, ?) > 0`)
			args = append(args, t)
		}
		args = append(args, n)
		if err := run(s.ids(ctx, `SELECT id FROM memory_facts WHERE `+where+` AND (`+
			strings.Join(cond, " OR ")+`) ORDER BY updated_at DESC, id DESC LIMIT ?`, args...)); err != nil {
			return nil, err
		}
	}
	return lists, nil
}

// rankedIDs returns the n best current facts of scope ("" = all) for
// match on the FTS5 table (memory_words or memory_fts), by bm25. Ranking
// in the index is fast; what is slow at scale is reading each match's row
// of memory_facts (a random page of a large table) to check its scope and
// that it is current. So when most matches can be expected to pass
// (narrow), the best 4n are ranked in the index alone and only those are
// checked; should fewer than n of them pass, every match is ranked with
// the check. Either way the result is the same.
func (s *Store) rankedIDs(ctx context.Context, table, match, scope string, n int, narrow bool) ([]int64, error) {
	full := func() ([]int64, error) {
		return s.ids(ctx, `SELECT f.id FROM `+table+` JOIN memory_facts f ON f.id = `+table+`.rowid
			WHERE `+table+` MATCH ? AND (f.scope = ? OR ? = '') AND f.superseded_by IS NULL
			ORDER BY `+table+`.rank, f.id DESC LIMIT ?`, match, scope, scope, n)
	}
	if !narrow {
		return full()
	}
	m := 4 * n
	cand, err := s.ids(ctx, `SELECT rowid FROM `+table+` WHERE `+table+` MATCH ? ORDER BY rank, rowid DESC LIMIT ?`, match, m)
	if err != nil || len(cand) == 0 {
		return nil, err
	}
	args := make([]any, 0, len(cand)+2)
	args = append(args, scope, scope)
	for _, id := range cand {
		args = append(args, id)
	}
	ok, err := s.ids(ctx, `SELECT id FROM memory_facts WHERE (scope = ? OR ? = '') AND superseded_by IS NULL
		AND id IN (?`+strings.Repeat(",?", len(cand)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	pass := make(map[int64]bool, len(ok))
	for _, id := range ok {
		pass[id] = true
	}
	var out []int64
	for _, id := range cand {
		if pass[id] && len(out) < n {
			out = append(out, id)
		}
	}
	if len(out) < n && len(cand) == m {
		return full()
	}
	return out, nil
}

// scopeSize is about how many facts scope holds (counted in the keyword
// index with the scope's tag, cached like any word's count) and the size
// of the whole memory; for scope "" both are the whole memory's.
func (s *Store) scopeSize(ctx context.Context, scope string) (inScope, total int64, err error) {
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM memory_facts`).Scan(&total); err != nil {
		return 0, 0, fmt.Errorf("memory: keyword search: %w", err)
	}
	if scope == "" {
		return total, total, nil
	}
	inScope, err = s.docFreq(ctx, scopeTag(scope), total)
	return inScope, total, err
}

// FTS5 ranks (bm25) every fact that holds any word of the query, so the
// cost of a keyword search is the length of the words' posting lists.
// Words in more than commonShare of all facts (and more than commonMin)
// are dropped: their bm25 weight is close to nothing. Of the rest, the
// rarest are kept while their postings add up to at most postingBudget:
// a rare word weighs most in bm25, and the budget bounds the search at
// any size of memory (all of a small memory's words fit).
const (
	commonShare   = 0.02
	commonMin     = 1000
	postingBudget = 4000
)

// pickWords chooses the words of a keyword query (see postingBudget) in
// a memory of total facts, keeping at least the rarest, and returns how
// many postings they have.
func (s *Store) pickWords(ctx context.Context, words []string, total int64) ([]string, int64, error) {
	if total <= commonMin {
		return words, total, nil // small: every word
	}
	limit := max(int64(commonShare*float64(total)), commonMin)
	df := make(map[string]int64, len(words))
	for _, w := range words {
		n, err := s.docFreq(ctx, w, total)
		if err != nil {
			return nil, 0, err
		}
		df[w] = n
	}
	sorted := slices.Clone(words)
	slices.SortStableFunc(sorted, func(a, b string) int { return cmp.Compare(df[a], df[b]) })
	var kept []string
	var postings int64
	for _, w := range sorted {
		if len(kept) > 0 && (df[w] > limit || postings+df[w] > postingBudget) {
			break
		}
		kept = append(kept, w)
		postings += df[w]
	}
	return kept, postings, nil
}

// docFreq is how many facts contain word. Counting walks the word's whole
// posting list (fts5vocab), milliseconds for a common word at 100k facts:
// counts are kept in an LRU and counted again once the memory has grown
// by a tenth since (whether a word is common changes slowly).
func (s *Store) docFreq(ctx context.Context, word string, total int64) (int64, error) {
	if e, ok := s.docFreqs.Get(word); ok && total <= e.total+e.total/10 {
		return e.df, nil
	}
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT doc FROM memory_words_vocab WHERE term = ?`, word).Scan(&n)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("memory: keyword search: %w", err)
	}
	s.docFreqs.Put(word, docFreqEntry{df: n, total: total})
	return n, nil
}

type docFreqEntry struct{ df, total int64 }

func (s *Store) ids(ctx context.Context, q string, args ...any) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

const (
	maxTerms      = 24
	maxShortTerms = 4
)

// stopwords are English words too common to rank by.
var stopwords = map[string]bool{
	"the": true, "and": true, "for": true, "are": true, "but": true, "not": true, "you": true, "all": true,
	"any": true, "can": true, "had": true, "her": true, "was": true, "one": true, "our": true, "out": true,
	"has": true, "him": true, "his": true, "how": true, "its": true, "may": true, "who": true, "did": true,
	"yes": true, "she": true, "too": true, "use": true, "what": true, "when": true, "where": true,
	"which": true, "with": true, "this": true, "that": true, "have": true, "from": true, "they": true,
	"will": true, "would": true, "there": true, "their": true, "about": true, "been": true, "were": true,
	"your": true, "into": true, "than": true, "then": true, "them": true, "these": true, "some": true,
	"does": true, "just": true, "like": true, "also": true, "please": true, "tell": true, "know": true,
	"is": true, "in": true, "at": true, "on": true, "of": true, "to": true, "do": true, "my": true,
	"me": true, "we": true, "it": true, "an": true, "as": true, "be": true, "by": true, "or": true,
	"if": true, "so": true, "no": true, "up": true, "us": true, "am": true, "he": true, "i": true,
}

// ftsTerms splits a query into search terms: words (runs of letters and
// digits outside CJK, lower-cased, at least two characters, stopwords
// dropped) for the word index; every three-character window of a run of
// Chinese, Japanese or Korean characters for the trigram index; and CJK
// runs of two characters, too short for trigrams, in short. Only letters
// and digits survive, so no FTS5 syntax reaches MATCH.
func ftsTerms(query string) (words, grams, short []string) {
	seen := map[string]bool{}
	add := func(list *[]string, t string, max int) {
		if !seen[t] && len(*list) < max {
			seen[t] = true
			*list = append(*list, t)
		}
	}
	flush := func(run []rune, cjk bool) {
		switch {
		case len(run) == 0:
		case cjk && len(run) >= 3:
			for i := 0; i+3 <= len(run); i++ {
				add(&grams, string(run[i:i+3]), maxTerms)
			}
		case cjk && len(run) == 2:
			add(&short, string(run), maxShortTerms)
		case !cjk:
			if w := strings.ToLower(string(run)); len(run) >= 2 && !stopwords[w] {
				add(&words, w, maxTerms)
			}
		}
	}
	var run []rune
	runCJK := false
	for _, r := range query {
		isWord := unicode.IsLetter(r) || unicode.IsDigit(r)
		cjk := isCJK(r)
		if !isWord || (len(run) > 0 && cjk != runCJK) {
			flush(run, runCJK)
			run = run[:0]
		}
		if isWord {
			run = append(run, r)
			runCJK = cjk
		}
	}
	flush(run, runCJK)
	return words, grams, short
}

func isCJK(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// ftsQuery ORs the terms, each a quoted FTS5 string.
func ftsQuery(terms []string) string {
	q := make([]string, len(terms))
	for i, t := range terms {
		q[i] = `"` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	return strings.Join(q, " OR ")
}
