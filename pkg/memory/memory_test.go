package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

var ctx = context.Background()

func mustAdd(t *testing.T, s *Store, scope string, in Input) Result {
	t.Helper()
	res, err := s.Add(ctx, scope, in)
	if err != nil {
		t.Fatalf("Add(%q, %q): %v", scope, in.Text, err)
	}
	return res
}

func ids(hits []Hit) []int64 {
	out := make([]int64, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func TestDedupAtThreshold(t *testing.T) {
	e := newVecs()
	s, _ := newMem(t, e, Config{})
	e.Set("base", axis(0))
	e.Set("at threshold", mix(0, 1, 0.92))
	e.Set("just below", mix(0, 2, 0.9199))
	base := mustAdd(t, s, "wecom:alice", Input{Text: "base", Keywords: []string{"a"}})
	if base.Action != Inserted {
		t.Fatalf("first fact: %+v", base)
	}
	dup := mustAdd(t, s, "wecom:alice", Input{Text: "at threshold", Keywords: []string{"b", "A"}, Persons: []string{"Li"}})
	if dup.Action != Duplicate || dup.ID != base.ID {
		t.Fatalf("cosine 0.92: got %+v, want a duplicate of #%d", dup, base.ID)
	}
	if dup.Similarity < 0.919999 || dup.Similarity > 0.920001 {
		t.Errorf("similarity %v, want 0.92", dup.Similarity)
	}
	f, err := s.Get(ctx, "wecom:alice", base.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.Seen != 2 || strings.Join(f.Keywords, ",") != "a,b" || strings.Join(f.Persons, ",") != "Li" {
		t.Errorf("refreshed fact: seen %d keywords %q persons %q; want 2, a,b (merged, case-insensitive), Li", f.Seen, f.Keywords, f.Persons)
	}
	below := mustAdd(t, s, "wecom:alice", Input{Text: "just below"})
	if below.Action != Inserted {
		t.Fatalf("cosine 0.9199: got %+v, want inserted", below)
	}
	// The same text is a duplicate without any vector.
	kw, _ := newMem(t, nil, Config{})
	a := mustAdd(t, kw, "u", Input{Text: "Likes  green tea"})
	b := mustAdd(t, kw, "u", Input{Text: "Likes green tea "})
	if b.Action != Duplicate || b.ID != a.ID {
		t.Errorf("same text without a model: %+v", b)
	}
}

func TestScopesAreIsolated(t *testing.T) {
	e := newVecs()
	s, _ := newMem(t, e, Config{})
	e.Set("Alice's door code is 4711", axis(3))
	e.Set("door code", axis(3))
	a := mustAdd(t, s, "wecom:alice", Input{Text: "Alice's door code is 4711", Keywords: []string{"door"}})
	// Bob stores the very same text: not a duplicate across scopes.
	b := mustAdd(t, s, "wecom:bob", Input{Text: "Alice's door code is 4711"})
	if b.Action != Inserted || b.ID == a.ID {
		t.Fatalf("the same fact in another scope: %+v", b)
	}
	if _, err := s.Forget(ctx, "wecom:bob", b.ID); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"door code", "4711", "Alice"} {
		hits, err := s.Search(ctx, "wecom:bob", q, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 0 {
			t.Errorf("bob searching %q sees %v", q, ids(hits))
		}
		hits, err = s.Search(ctx, "group:wecom:team", q, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 0 {
			t.Errorf("a group searching %q sees %v", q, ids(hits))
		}
	}
	hits, err := s.Search(ctx, "wecom:alice", "door code", 5)
	if err != nil || len(hits) != 1 || hits[0].ID != a.ID {
		t.Fatalf("alice: %v %v", ids(hits), err)
	}
	if _, err := s.Get(ctx, "wecom:bob", a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob reads alice's fact by id: %v", err)
	}
	if _, err := s.Forget(ctx, "wecom:bob", a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob forgets alice's fact: %v", err)
	}
	if _, err := s.Correct(ctx, "wecom:bob", a.ID, "changed", "tool"); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob corrects alice's fact: %v", err)
	}
	// Naming another scope's fact in Supersedes does not touch it.
	res := mustAdd(t, s, "wecom:bob", Input{Text: "Bob has no door code", Supersedes: a.ID})
	if res.Action != Inserted {
		t.Errorf("supersede across scopes: %+v", res)
	}
	if f, _ := s.Get(ctx, "wecom:alice", a.ID); !f.Current() {
		t.Error("alice's fact was superseded by bob's")
	}
}

func TestSupersedeKeepsHistory(t *testing.T) {
	e := newVecs()
	s, _ := newMem(t, e, Config{})
	e.Set("The user lives in Beijing", axis(0))
	e.Set("The user moved to Shanghai", axis(1))
	e.Set("where does the user live", mix(0, 1, 0.7))
	old := mustAdd(t, s, "u", Input{Text: "The user lives in Beijing", Topic: "home"})
	nw := mustAdd(t, s, "u", Input{Text: "The user moved to Shanghai", Topic: "home", Supersedes: old.ID})
	if nw.Action != Superseded || nw.Of != old.ID {
		t.Fatalf("got %+v", nw)
	}
	hits, err := s.Search(ctx, "u", "where does the user live", 5)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(hits); len(got) != 1 || got[0] != nw.ID {
		t.Fatalf("search after supersede: %v, want only #%d", got, nw.ID)
	}
	hist, err := s.List(ctx, Filter{Scope: "u", History: true})
	if err != nil || len(hist) != 2 {
		t.Fatalf("history: %d facts, %v", len(hist), err)
	}
	f, _ := s.Get(ctx, "u", old.ID)
	if f.SupersededBy != nw.ID || f.SupersededAt.IsZero() {
		t.Errorf("old fact: %+v", f)
	}
	// Correct the correction: a chain of three.
	c, err := s.Correct(ctx, "u", nw.ID, "The user moved to Hangzhou", "tool")
	if err != nil || c.Action != Superseded {
		t.Fatalf("Correct: %+v %v", c, err)
	}
	if _, err := s.Correct(ctx, "u", nw.ID, "again", "tool"); !errors.Is(err, ErrNotFound) {
		t.Errorf("correcting a replaced fact: %v", err)
	}
	// Forgetting any version forgets the whole chain.
	gone, err := s.Forget(ctx, "u", old.ID)
	if err != nil || gone.ID != c.ID {
		t.Fatalf("Forget: %+v %v", gone, err)
	}
	hist, _ = s.List(ctx, Filter{Scope: "u", History: true})
	if len(hist) != 0 {
		t.Errorf("after forget, %d versions remain", len(hist))
	}
	var vec int
	s.db.QueryRow(`SELECT count(*) FROM memory_vec`).Scan(&vec)
	var fts int
	s.db.QueryRow(`SELECT count(*) FROM memory_fts WHERE memory_fts MATCH '"Beijing" OR "Shanghai" OR "Hangzhou"'`).Scan(&fts)
	if vec != 0 || fts != 0 {
		t.Errorf("after forget: %d vectors, %d index entries left", vec, fts)
	}
}

func TestFusionOrder(t *testing.T) {
	e := newVecs()
	s, _ := newMem(t, e, Config{})
	// Vector ranks for the query (axis 0): A 0.9, B 0.8, C 0.1.
	// Keyword ranks for "espresso": C and B contain it, A does not.
	e.Set("q espresso", axis(0))
	e.Set("A likes black coffee", mix(0, 1, 0.9))
	e.Set("B drinks espresso daily", mix(0, 2, 0.8))
	e.Set("C bought an espresso machine", mix(0, 3, 0.1))
	e.Set("D unrelated thing", mix(0, 4, 0.0))
	a := mustAdd(t, s, "u", Input{Text: "A likes black coffee"})
	b := mustAdd(t, s, "u", Input{Text: "B drinks espresso daily"})
	c := mustAdd(t, s, "u", Input{Text: "C bought an espresso machine"})
	mustAdd(t, s, "u", Input{Text: "D unrelated thing"})
	hits, err := s.Search(ctx, "u", "q espresso", 3)
	if err != nil {
		t.Fatal(err)
	}
	// B is in both lists: first. A (vector 1st) and C (keyword 1st or 2nd)
	// follow; ties in score go to the higher similarity.
	got := ids(hits)
	if len(got) != 3 || got[0] != b.ID {
		t.Fatalf("fused order %v, want #%d first", got, b.ID)
	}
	if hits[0].VectorRank != 2 || hits[0].KeywordRank == 0 {
		t.Errorf("B ranks: vector %d keyword %d", hits[0].VectorRank, hits[0].KeywordRank)
	}
	want := 1.0/float64(rrfK+2) + 1.0/float64(rrfK+hits[0].KeywordRank)
	if d := hits[0].Score - want; d > 1e-12 || d < -1e-12 {
		t.Errorf("B score %v, want %v", hits[0].Score, want)
	}
	if !(got[1] == a.ID && got[2] == c.ID) && !(got[1] == c.ID && got[2] == a.ID) {
		t.Errorf("order %v: want A and C after B", got)
	}
}

func TestChineseKeywords(t *testing.T) {
	s, _ := newMem(t, nil, Config{}) // keyword-only: what runs without a model
	coffee := mustAdd(t, s, "u", Input{Text: "用户每天早上喝一杯咖啡", Keywords: []string{"咖啡", "早餐"}})
	meet := mustAdd(t, s, "u", Input{Text: "周五下午三点和王经理开会", Persons: []string{"王经理"}, Topic: "会议"})
	mustAdd(t, s, "u", Input{Text: "The user prefers tea in the afternoon"})
	cases := []struct {
		q    string
		want int64
	}{
		{"咖啡", coffee.ID},        // two characters: below the trigram minimum
		{"我早上喝什么咖啡？", coffee.ID}, // trigram windows of a sentence
		{"王经理", meet.ID},
		{"下午三点有什么安排", meet.ID},
		{"会议", meet.ID},
	}
	for _, c := range cases {
		hits, err := s.Search(ctx, "u", c.q, 2)
		if err != nil {
			t.Fatalf("%q: %v", c.q, err)
		}
		if len(hits) == 0 || hits[0].ID != c.want {
			t.Errorf("%q: got %v, want #%d first", c.q, ids(hits), c.want)
		}
	}
}

func TestHostileQueries(t *testing.T) {
	s, _ := newMem(t, newVecs(), Config{})
	mustAdd(t, s, "u", Input{Text: `He said "DROP TABLE memory_facts; --" as a joke 😀`})
	for _, q := range []string{
		`"; DROP TABLE memory_facts; --`, `' OR 1=1 --`, `NEAR(foo bar, 2)`, `fact:*`, `* AND OR NOT`,
		`"unbalanced`, `^foo`, `foo NOT bar`, `{fact keywords}: x`, "\x00\x01", `\u0000`, "😀😀😀",
		strings.Repeat("ab", 100_000), strings.Repeat("咖", 5000), `)))(((`,
	} {
		if _, err := s.Search(ctx, "u", q, 5); err != nil {
			t.Errorf("Search(%.40q): %v", q, err)
		}
		if _, err := s.ForgetMatching(ctx, "nobody", q); err != nil && !errors.Is(err, ErrTooMany) {
			t.Errorf("ForgetMatching(%.40q): %v", q, err)
		}
	}
	hits, err := s.Search(ctx, "u", "DROP TABLE joke", 5)
	if err != nil || len(hits) != 1 {
		t.Fatalf("the fact with SQL in it: %v %v", ids(hits), err)
	}
	if _, err := s.Add(ctx, "u", Input{Text: strings.Repeat("x", MaxFactBytes+1)}); !errors.Is(err, ErrInvalid) {
		t.Errorf("huge fact: %v", err)
	}
	if _, err := s.Add(ctx, "u", Input{Text: " \n\t"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty fact: %v", err)
	}
	if _, err := s.Add(ctx, "", Input{Text: "x"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no scope: %v", err)
	}
	// Emoji, invalid UTF-8, long keyword lists survive.
	r := mustAdd(t, s, "u", Input{Text: "likes 🍣 and 🍜 \xff", Keywords: strings.Split(strings.Repeat("k,", 500), ",")})
	f, _ := s.Get(ctx, "u", r.ID)
	if !strings.Contains(f.Text, "🍣") || len(strings.Join(f.Keywords, ", ")) > MaxListBytes {
		t.Errorf("stored %q with %d keyword bytes", f.Text, len(strings.Join(f.Keywords, ", ")))
	}
}

func TestConcurrentWriters(t *testing.T) {
	e := newVecs()
	s, _ := newMem(t, e, Config{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if _, err := s.Add(ctx, "u", Input{Text: "The user's birthday is 3 May"}); err != nil {
					t.Error(err)
				}
				if _, err := s.Add(ctx, "u", Input{Text: fmt.Sprintf("fact %d from writer %d", i, w)}); err != nil {
					t.Error(err)
				}
				if _, err := s.Search(ctx, "u", "birthday", 3); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	var n, seen int
	s.db.QueryRow(`SELECT count(*), coalesce(sum(seen), 0) FROM memory_facts WHERE fact = 'The user''s birthday is 3 May'`).Scan(&n, &seen)
	if n != 1 || seen != 160 {
		t.Errorf("one fact written 160 times concurrently: %d rows, seen %d", n, seen)
	}
	st, _ := s.Stats(ctx, "u")
	if st.Facts != 161 {
		t.Errorf("facts: %d, want 161", st.Facts)
	}
}

func TestKeywordOnlyThenBackfill(t *testing.T) {
	db := openDB(t)
	s := New(db.DB(), Config{}, nil, nil)
	a := mustAdd(t, s, "u", Input{Text: "stored before the model"})
	if st, _ := s.Stats(ctx, "u"); st.Unembedded != 1 || st.Semantic {
		t.Fatalf("stats without a model: %+v", st)
	}
	e := newVecs()
	e.Set("stored before the model", axis(5))
	e.Set("zzz", axis(5))
	if err := s.SetEmbedder(ctx, e, "m1"); err != nil {
		t.Fatal(err)
	}
	s.Wait()
	if st, _ := s.Stats(ctx, "u"); st.Unembedded != 0 || !st.Semantic {
		t.Fatalf("stats after backfill: %+v", st)
	}
	// "zzz" shares no word with the fact: only the vector finds it.
	hits, err := s.Search(ctx, "u", "zzz", 3)
	if err != nil || len(hits) != 1 || hits[0].ID != a.ID {
		t.Fatalf("vector search after backfill: %v %v", ids(hits), err)
	}
	// A restart with the same model keeps the vectors; the index is
	// rebuilt from them if it was lost.
	if _, err := db.DB().Exec(`DROP TABLE memory_vec`); err != nil {
		t.Fatal(err)
	}
	s2 := New(db.DB(), Config{}, nil, nil)
	calls := e.Calls()
	if err := s2.SetEmbedder(ctx, e, "m1"); err != nil {
		t.Fatal(err)
	}
	s2.Wait()
	if e.Calls() != calls {
		t.Errorf("same model: %d embeddings recomputed", e.Calls()-calls)
	}
	if hits, _ := s2.Search(ctx, "u", "zzz", 3); len(hits) != 1 {
		t.Errorf("rebuilt index: %v", ids(hits))
	}
	// Another model: the vectors are recomputed.
	e2 := newVecs()
	if err := s2.SetEmbedder(ctx, e2, "m2"); err != nil {
		t.Fatal(err)
	}
	s2.Wait()
	if e2.Calls() == 0 {
		t.Error("a new model did not re-embed the facts")
	}
	if st, _ := s2.Stats(ctx, "u"); st.Unembedded != 0 {
		t.Errorf("after the model change: %+v", st)
	}
	// A failing embedder does not lose a fact.
	e2.mu.Lock()
	e2.fail = errors.New("onnx exploded")
	e2.mu.Unlock()
	r := mustAdd(t, s2, "u", Input{Text: "kept despite the embedder"})
	if hits, _ := s2.Search(ctx, "u", "kept despite", 3); len(hits) != 1 || hits[0].ID != r.ID {
		t.Errorf("keyword search with a failing embedder: %v", ids(hits))
	}
}

func TestForgetMatching(t *testing.T) {
	e := newVecs()
	s, _ := newMem(t, e, Config{})
	e.Set("my old phone number", axis(7))
	e.Set("The user's phone number is 138-0000", mix(7, 8, 0.9))
	phone := mustAdd(t, s, "u", Input{Text: "The user's phone number is 138-0000"})
	tea := mustAdd(t, s, "u", Input{Text: "The user likes green tea", Keywords: []string{"tea"}})
	for i := range MaxForget + 1 {
		mustAdd(t, s, "u", Input{Text: fmt.Sprintf("meeting note %d", i)})
	}
	got, err := s.ForgetMatching(ctx, "u", "my old phone number") // semantic
	if err != nil || len(got) != 1 || got[0].ID != phone.ID {
		t.Fatalf("semantic forget: %v %v", got, err)
	}
	got, err = s.ForgetMatching(ctx, "u", "GREEN TEA") // substring, any case
	if err != nil || len(got) != 1 || got[0].ID != tea.ID {
		t.Fatalf("substring forget: %v %v", got, err)
	}
	if _, err := s.ForgetMatching(ctx, "u", "meeting"); !errors.Is(err, ErrTooMany) {
		t.Fatalf("forget matching too many: %v", err)
	}
	if st, _ := s.Stats(ctx, "u"); st.Facts != MaxForget+1 {
		t.Errorf("a refused forget deleted facts: %d left", st.Facts)
	}
	list, _ := s.List(ctx, Filter{Scope: "u", Limit: 1})
	got, err = s.ForgetMatching(ctx, "u", fmt.Sprintf("#%d", list[0].ID))
	if err != nil || len(got) != 1 {
		t.Fatalf("forget #id: %v %v", got, err)
	}
	if got, err := s.ForgetMatching(ctx, "u", "nothing like this"); err != nil || len(got) != 0 {
		t.Errorf("no match: %v %v", got, err)
	}
}

func TestFastBlock(t *testing.T) {
	e := newVecs()
	s, _ := newMem(t, e, Config{FastBudget: 5 * time.Millisecond, ColdBudget: 10 * time.Millisecond})
	e.Set("what do I drink", axis(0))
	e.Set("The user drinks oolong", axis(0))
	r := mustAdd(t, s, "wecom:alice", Input{Text: "The user drinks oolong"})
	// A normal turn computes the block and caches it.
	b, err := s.Block(ctx, "wecom:alice", "what do I drink", false)
	if err != nil || !strings.Contains(b, fmt.Sprintf("#%d [2026-11-20] The user drinks oolong", r.ID)) {
		t.Fatalf("block: %q %v", b, err)
	}
	if c, ok := s.CachedBlock("wecom:alice"); !ok || c != b {
		t.Fatalf("cache after a turn: %q %v", c, ok)
	}
	// A voice turn with a slow embedder gets the cached block at once.
	gate := make(chan struct{})
	e.mu.Lock()
	e.gate = gate
	e.mu.Unlock()
	fast, err := s.Block(ctx, "wecom:alice", "something new to embed", true)
	if err != nil || fast != b {
		t.Fatalf("fast block: %q %v, want the cached one", fast, err)
	}
	// A cold scope waits the cold budget, then goes without.
	cold, err := s.Block(ctx, "wecom:bob", "anything else", true)
	if err != nil || cold != "" {
		t.Fatalf("cold fast block: %q %v", cold, err)
	}
	close(gate)
	s.Wait()
	// The same utterance again is served by the cache as is.
	calls := e.Calls()
	if again, _ := s.Block(ctx, "wecom:alice", "something new to embed", true); again == "" || e.Calls() != calls {
		t.Errorf("repeated utterance: %q, %d embeddings", again, e.Calls()-calls)
	}
	// Forget drops the fact from the cache immediately.
	if _, err := s.Forget(ctx, "wecom:alice", r.ID); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.CachedBlock("wecom:alice"); strings.Contains(c, "oolong") {
		t.Errorf("forgotten fact still cached: %q", c)
	}
	s.Wait()
	if c, _ := s.CachedBlock("wecom:alice"); strings.Contains(c, "oolong") {
		t.Errorf("forgotten fact cached again by the refresh: %q", c)
	}
}

func TestEmbeddingCache(t *testing.T) {
	e := newVecs()
	s, _ := newMem(t, e, Config{})
	mustAdd(t, s, "u", Input{Text: "fact"})
	calls := e.Calls()
	for range 5 {
		if _, err := s.Search(ctx, "u", "turn on the kitchen light", 3); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.Calls() - calls; n != 1 {
		t.Errorf("5 identical queries embedded %d times, want 1", n)
	}
}

func TestRecallFilters(t *testing.T) {
	s, clk := newMem(t, nil, Config{})
	mustAdd(t, s, "u", Input{Text: "Dentist appointment", Time: "2026-12-03", Topic: "health"})
	clk.Advance(48 * time.Hour)
	mustAdd(t, s, "u", Input{Text: "Lunch with Wang", Persons: []string{"Wang Wei"}, Topic: "social"})
	cases := []struct {
		f    Filter
		want []string
	}{
		{Filter{Topic: "HEAL"}, []string{"Dentist appointment"}},
		{Filter{Person: "wang"}, []string{"Lunch with Wang"}},
		{Filter{From: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}, []string{"Dentist appointment"}},
		{Filter{From: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}, []string{"Lunch with Wang"}},
	}
	for _, c := range cases {
		c.f.Scope = "u"
		facts, err := s.List(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range facts {
			got = append(got, f.Text)
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%+v: got %q, want %q", c.f, got, c.want)
		}
	}
}

func TestFTSTerms(t *testing.T) {
	cases := []struct {
		q                   string
		words, grams, short string
	}{
		{"What is the weather in Berlin?", "weather|berlin", "", ""},
		{"go to NY", "go|ny", "", ""},
		{"我喜欢咖啡", "", "我喜欢|喜欢咖|欢咖啡", ""},
		{"咖啡 ok", "ok", "", "咖啡"},
		{`"; DROP--`, "drop", "", ""},
		{"café naïve 2026", "café|naïve|2026", "", ""},
		{"AI用户喜欢", "ai", "用户喜|户喜欢", ""},
		{`tag:x AND NEAR(a b) OR "c"*`, "tag|near", "", ""},
	}
	for _, c := range cases {
		w, g, sh := ftsTerms(c.q)
		if strings.Join(w, "|") != c.words || strings.Join(g, "|") != c.grams || strings.Join(sh, "|") != c.short {
			t.Errorf("ftsTerms(%q) = %q, %q, %q; want %q, %q, %q", c.q, w, g, sh, c.words, c.grams, c.short)
		}
	}
	if q := ftsQuery([]string{`a"b`, "c"}); q != `"a""b" OR "c"` {
		t.Errorf("ftsQuery: %s", q)
	}
}

func TestSearchAllScopes(t *testing.T) {
	s, _ := newMem(t, newVecs(), Config{})
	mustAdd(t, s, "wecom:alice", Input{Text: "Alice parks in bay 12"})
	mustAdd(t, s, "wecom:bob", Input{Text: "Bob parks in bay 40"})
	hits, err := s.SearchAllScopes(ctx, "parks", 10)
	if err != nil || len(hits) != 2 {
		t.Fatalf("all scopes: %v %v", ids(hits), err)
	}
	if _, err := s.Search(ctx, "", "parks", 10); !errors.Is(err, ErrInvalid) {
		t.Errorf("Search without a scope: %v", err)
	}
}

// FuzzKeywordQuery: any text is a valid search; nothing it contains reaches
// FTS5 as syntax.
func FuzzKeywordQuery(f *testing.F) {
	for _, s := range []string{`"; DROP TABLE memory_facts; --`, `NEAR(a b, 2)`, `tag:x* AND ^y`, "咖啡 ok", "😀 \x00 \xff", `a OR b NOT c`} {
		f.Add(s)
	}
	db := openDB(f)
	s := New(db.DB(), Config{}, nil, nil)
	s.Add(context.Background(), "u", Input{Text: "The user likes coffee and 咖啡"})
	f.Fuzz(func(t *testing.T, q string) {
		if _, err := s.keywordSearch(context.Background(), "u", q, 5); err != nil {
			t.Fatalf("keywordSearch(%q): %v", q, err)
		}
		if _, err := s.ForgetMatching(context.Background(), "nobody", q); err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNotFound) {
			t.Fatalf("ForgetMatching(%q): %v", q, err)
		}
	})
}

func TestForgetOverwritesTheFile(t *testing.T) {
	db := openDB(t)
	s := New(db.DB(), Config{}, nil, nil)
	secret := "the-vault-combination-is-31-41-59"
	r := mustAdd(t, s, "u", Input{Text: "The user's " + secret})
	for i := range 50 { // enough rows that pages get reused, not just truncated
		mustAdd(t, s, "u", Input{Text: fmt.Sprintf("filler fact number %d with some words", i)})
	}
	if _, err := s.Forget(ctx, "u", r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DB().Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{db.Path(), db.Path() + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("%s still contains the forgotten fact", f)
		}
	}
}

// TestFastBlockDefersRetrieval: a voice turn whose query is not embedded
// yet takes the cached block without starting the embedding on its way;
// the retrieval follows RefreshDelay later and refreshes the cache.
func TestFastBlockDefersRetrieval(t *testing.T) {
	e := newVecs()
	s, _ := newMem(t, e, Config{})
	e.Set("what do I drink", axis(0))
	e.Set("The user drinks oolong", axis(0))
	e.Set("and what do I eat", axis(0))
	mustAdd(t, s, "wecom:alice", Input{Text: "The user drinks oolong"})
	first, err := s.Block(ctx, "wecom:alice", "what do I drink", false)
	if err != nil || first == "" {
		t.Fatalf("block: %q %v", first, err)
	}
	calls := e.Calls()
	fast, err := s.Block(ctx, "wecom:alice", "and what do I eat", true)
	if err != nil || fast != first {
		t.Fatalf("fast block %q %v, want the cached one", fast, err)
	}
	if e.Calls() != calls {
		t.Errorf("the fast turn embedded %d texts on its way", e.Calls()-calls)
	}
	s.Wait()
	if e.Calls() != calls+1 {
		t.Errorf("%d embeddings after the deferred refresh, want 1", e.Calls()-calls)
	}
	// The refreshed cache now serves that utterance whole.
	if again, _ := s.Block(ctx, "wecom:alice", "and what do I eat", true); again != first || e.Calls() != calls+1 {
		t.Errorf("repeat after refresh: %q, %d embeddings", again, e.Calls()-calls)
	}
}
