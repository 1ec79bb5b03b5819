package session

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"

	"agent/pkg/llm"
)

// Attacks on the session window cache.

func rawOf(s *Store) *Store { return &Store{db: s.db, now: s.now} }

// Window's miss path is: read the last 96 rows, then fill. An Append that
// commits between the read and the fill finds no entry (appended returns),
// and the fill then stores the pre-Append rows: the cache lacks a
// committed message until the next Append notices the gap. This replays
// that interleaving step by step with the Store's own code.
func TestStaleFillAfterConcurrentAppend(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	k := must(P2P("wecom", "alice"))
	cur, _ := s.Current(ctx, k)
	if err := s.Append(ctx, cur.ID, llm.Message{Role: llm.RoleUser, Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	// Goroutine A (a Window on a cold entry): the read.
	ver := s.c.version(cur.ID)
	seqs, msgs, err := s.query(ctx, `SELECT `+messageCols+` FROM session_messages
		WHERE session_id = ? ORDER BY seq DESC LIMIT ?`, cur.ID, cacheMessages)
	if err != nil {
		t.Fatal(err)
	}
	reverse(seqs)
	reverse(msgs)
	// Goroutine B (the turn's reply, a held-turn replay, a scheduled job):
	// commits while A has not filled yet.
	if err := s.Append(ctx, cur.ID, llm.Message{Role: llm.RoleAssistant, Content: "the reply"}); err != nil {
		t.Fatal(err)
	}
	// A fills.
	s.c.fill(cur.ID, ver, seqs, msgs, len(msgs) < cacheMessages || (len(seqs) > 0 && seqs[0] == 1))

	got, _ := s.Window(ctx, cur.ID, 40)
	want, _ := rawOf(s).Window(ctx, cur.ID, 40)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after a fill that raced an Append the cache answers %d messages, SQLite %d: the committed reply is missing until the next Append", len(got), len(want))
	}
}

// The same race with real goroutines: the entry is cold (as after an
// eviction or a drop), one goroutine reads a Window, another Appends.
func TestStaleFillRace(t *testing.T) {
	s, _ := newStore(t)
	raw := rawOf(s)
	ctx := context.Background()
	k := must(P2P("wecom", "alice"))
	cur, _ := s.Current(ctx, k)
	bad := 0
	for i := range 300 {
		s.c.drop(cur.ID) // cold, as after eviction
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); s.Window(ctx, cur.ID, 40) }()
		go func() {
			defer wg.Done()
			if err := s.Append(ctx, cur.ID, llm.Message{Role: llm.RoleUser, Content: fmt.Sprint("m", i)}); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		got, _ := s.Window(ctx, cur.ID, 40)
		want, _ := raw.Window(ctx, cur.ID, 40)
		if !reflect.DeepEqual(got, want) {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of 300 rounds left a cached window that differs from SQLite", bad)
	}
	t.Log("race not hit in 300 rounds (timing)")
}

// Current's miss path reads the open row, then setCurrent. A Reset that
// runs in between closes that session and caches the new one; the late
// setCurrent then puts the closed session back, and every later Current
// answers it: every Append is ErrClosed until eviction or restart.
func TestCurrentRacesReset(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	k := must(P2P("wecom", "alice"))
	if _, err := s.Current(ctx, k); err != nil {
		t.Fatal(err)
	}
	s.c.mu.Lock()
	clear(s.c.open) // as setCurrent does when 128 keys are open
	s.c.mu.Unlock()
	// A: Current misses and reads the row.
	mark := s.c.resetsNow()
	old, err := scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE key = ? AND closed_at IS NULL`, string(k)))
	if err != nil {
		t.Fatal(err)
	}
	// B: /new.
	if _, err := s.Reset(ctx, k); err != nil {
		t.Fatal(err)
	}
	// A: caches what it read (as Current does: only if no Reset came between).
	s.c.setCurrentRead(old, mark)

	cur, _ := s.Current(ctx, k)
	err = s.Append(ctx, cur.ID, llm.Message{Role: llm.RoleUser, Content: "hello"})
	if errors.Is(err, ErrClosed) {
		t.Fatalf("Current answers the closed session %d after a racing Reset; Append: %v (stuck until eviction/restart)", cur.ID, err)
	}
}

// With real goroutines.
func TestCurrentResetRace(t *testing.T) {
	s, _ := newStore(t)
	raw := rawOf(s)
	ctx := context.Background()
	k := must(P2P("wecom", "alice"))
	bad := 0
	for range 300 {
		s.c.mu.Lock()
		clear(s.c.open)
		s.c.mu.Unlock()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); s.Current(ctx, k) }()
		go func() { defer wg.Done(); s.Reset(ctx, k) }()
		wg.Wait()
		got, _ := s.Current(ctx, k)
		want, _ := raw.Current(ctx, k)
		if got.ID != want.ID {
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of 300 rounds: Current cached a closed session", bad)
	}
	t.Log("race not hit in 300 rounds (timing)")
}

// A tool-heavy session: tool results are capped at 16 KiB by the agent,
// so ~16 of them in the last 96 messages exceed 256 KB and fill refuses
// the whole session, although the 40-message window a turn asks for
// is far under the bound. Every turn then reads 96 rows and then n rows
// again: the cache never serves it and costs an extra query.
func TestToolHeavySessionNeverCached(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	k := must(P2P("voice", "panel"))
	cur, _ := s.Current(ctx, k)
	result := strings.Repeat("x", 16<<10)
	for i := range 20 { // 80 messages, 20 full tool results (~330 KB)
		id := fmt.Sprint("c", i)
		if err := s.Append(ctx, cur.ID,
			llm.Message{Role: llm.RoleUser, Content: "check"},
			llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Type: "function", Function: llm.FunctionCall{Name: "read", Arguments: "{}"}}}},
			llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: result},
			llm.Message{Role: llm.RoleAssistant, Content: "done"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if _, err := s.Window(ctx, cur.ID, 40); err != nil {
			t.Fatal(err)
		}
	}
	s.c.mu.Lock()
	_, ok := s.c.wins[cur.ID]
	s.c.mu.Unlock()
	if !ok {
		t.Fatalf("a session with 20 capped tool results (the 40-message window ~170 KB) is never cached: each Window reads 96 rows, rejects them, and queries again")
	}
}

// How much of TestCacheAgreesWithSQLite's checking the cache answers:
// the same generator, counting windows the cache could answer.
func TestAgreeTestCoverage(t *testing.T) {
	s, clk := newStore(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	keys := []Key{must(P2P("wecom", "alice")), must(P2P("wecom", "bob")), must(P2P("voice", "panel"))}
	msg := func(i int) llm.Message {
		switch r.IntN(7) {
		case 0:
			return llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: fmt.Sprint("c", i), Type: "function",
				Function: llm.FunctionCall{Name: "echo", Arguments: `{"n":` + fmt.Sprint(i) + `}`}}}}
		case 1, 2:
			return llm.Message{Role: llm.RoleTool, ToolCallID: fmt.Sprint("c", i-1), Content: fmt.Sprint("result ", i)}
		case 3:
			return llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart(fmt.Sprint("look ", i))}}
		case 4:
			return llm.Message{Role: llm.RoleAssistant, Content: fmt.Sprint("answer ", i), ReasoningContent: "because"}
		case 5:
			return llm.Message{Role: llm.RoleUser, Content: strings.Repeat("long ", r.IntN(20000))}
		}
		return llm.Message{Role: llm.RoleUser, Content: fmt.Sprint("hello ", i)}
	}
	windows, warm, afterFill := 0, 0, 0
	for i := range 1500 {
		k := keys[r.IntN(len(keys))]
		cur, _ := s.Current(ctx, k)
		_, _ = rawOf(s).Current(ctx, k)
		switch op := r.IntN(20); {
		case op == 0:
			s.Reset(ctx, k)
		case op < 12:
			batch := make([]llm.Message, 1+r.IntN(3))
			for j := range batch {
				batch[j] = msg(i)
			}
			clk.advance(1e9)
			s.Append(ctx, cur.ID, batch...)
		default:
			n := 1 + r.IntN(110)
			windows++
			if _, ok := s.c.window(cur.ID, n); ok {
				warm++
			}
			s.Window(ctx, cur.ID, n)
			if _, ok := s.c.window(cur.ID, n); ok {
				afterFill++
			}
			rawOf(s).Window(ctx, cur.ID, n)
		}
	}
	t.Logf("windows %d: answered by a warm cache entry %d (%.0f%%), cache usable right after %d", windows, warm, 100*float64(warm)/float64(windows), afterFill)
}
