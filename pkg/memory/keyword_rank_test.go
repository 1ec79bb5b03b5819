package memory

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
)

// The keyword search ranks the best 4n matches in the FTS5 index alone and
// checks only those rows (rankedIDs, narrow): its answer must be the one
// ranking every match with the check gives, whatever share of the best
// matches is superseded or another scope's (then it falls back).
func TestRankedIDsNarrowEqualsFull(t *testing.T) {
	s, _ := newMem(t, &vecs{dim: 384, m: map[string][]float32{}}, Config{})
	populate(t, s, 3000, 3) // three scopes of 1000
	ctx := context.Background()
	// Supersede a third of scope 0's facts that hold common words, so the
	// best matches are often not current.
	r := rand.New(rand.NewPCG(1, 2))
	var ids []int64
	rows, err := s.db.Query(`SELECT id FROM memory_facts WHERE scope = 'wecom:user0' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if r.IntN(3) == 0 {
			if _, err := s.db.Exec(`UPDATE memory_facts SET superseded_by = ? WHERE id = ?`, ids[0], id); err != nil {
				t.Fatal(err)
			}
		}
	}
	fallbacks := 0
	for i := range 200 {
		words, _, _ := ftsTerms(benchSentence(r))
		if len(words) == 0 {
			continue
		}
		match := "(" + ftsQuery(words) + ")"
		scope := []string{"wecom:user0", "wecom:user1", ""}[i%3]
		for _, n := range []int{1, 5, 20} {
			want, err := s.rankedIDs(ctx, "memory_words", match, scope, n, false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.rankedIDs(ctx, "memory_words", match, scope, n, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("scope %q n=%d %s: narrow %v, full %v", scope, n, match, got, want)
			}
			// Was the fallback taken? The best 4n in the index, of which
			// fewer than n are the scope's current facts.
			cand, _ := s.ids(ctx, `SELECT rowid FROM memory_words WHERE memory_words MATCH ? ORDER BY rank, rowid DESC LIMIT ?`, match, 4*n)
			pass := 0
			for _, id := range cand {
				var ok bool
				s.db.QueryRow(`SELECT (scope = ? OR ? = '') AND superseded_by IS NULL FROM memory_facts WHERE id = ?`, scope, scope, id).Scan(&ok)
				if ok {
					pass++
				}
			}
			if len(cand) == 4*n && pass < n {
				fallbacks++
			}
		}
	}
	if fallbacks == 0 {
		t.Fatal("no query had fewer current matches than asked: the fallback was not exercised")
	}
}

// A query of many words keeps the rarest within the posting budget (at
// least one), and a word in most facts is dropped.
func TestPickWordsBudget(t *testing.T) {
	s, _ := newMem(t, &vecs{dim: 384, m: map[string][]float32{}}, Config{})
	populate(t, s, 5000, 1)
	ctx := context.Background()
	var total int64
	s.db.QueryRow(`SELECT max(id) FROM memory_facts`).Scan(&total)
	df := func(w string) int64 { n, _ := s.docFreq(ctx, w, total); return n }
	words := []string{"the", "user", "meeting", "budget", "coffee", "zzzznotaword"}
	kept, postings, err := s.pickWords(ctx, words, total)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) == 0 || kept[0] != "zzzznotaword" {
		t.Fatalf("kept %v: the rarest word first", kept)
	}
	var sum int64
	for _, w := range kept {
		sum += df(w)
		if w == "the" || w == "user" {
			t.Fatalf("kept %v: %q is in every fact", kept, w)
		}
	}
	if sum != postings || (len(kept) > 1 && postings > postingBudget) {
		t.Fatalf("kept %v with %d postings (counted %d), budget %d", kept, postings, sum, postingBudget)
	}
	// All common: the rarest one is still searched.
	kept, _, _ = s.pickWords(ctx, []string{"the", "user"}, total)
	if len(kept) != 1 {
		t.Fatalf("all common: kept %v, want the rarest one", kept)
	}
}
