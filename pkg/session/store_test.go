package session

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"agent/pkg/llm"
	"agent/pkg/store/storetest"
)

// clock is a manual clock for the Store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t *testing.T) (*Store, *clock) {
	t.Helper()
	db := storetest.Open(t)
	c := &clock{t: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)}
	return New(db.DB(), c.now), c
}

// must returns k, panicking on err (keys in tests are constants).
func must(k Key, err error) Key {
	if err != nil {
		panic(err)
	}
	return k
}

func TestCurrentCreatesOnceAndResetKeepsOld(t *testing.T) {
	s, clk := newStore(t)
	ctx := context.Background()
	key := must(P2P("wecom", "zhangsan"))

	first, err := s.Current(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Current(ctx, key)
	if err != nil || again != first {
		t.Fatalf("Current twice = %+v, %v; want %+v", again, err, first)
	}
	if !first.Open() || first.Key != key {
		t.Fatalf("first = %+v", first)
	}
	if err := s.Append(ctx, first.ID, user("old"), asst("reply")); err != nil {
		t.Fatal(err)
	}

	clk.advance(time.Minute)
	fresh, err := s.Reset(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ID == first.ID || !fresh.Open() {
		t.Fatalf("Reset = %+v; want a new open session", fresh)
	}
	if cur, err := s.Current(ctx, key); err != nil || cur.ID != fresh.ID {
		t.Fatalf("Current after Reset = %+v, %v; want id %d", cur, err, fresh.ID)
	}
	old, err := s.Get(ctx, first.ID)
	if err != nil || old.Open() || !old.ClosedAt.Equal(clk.now()) {
		t.Fatalf("old session = %+v, %v; want closed at %v", old, err, clk.now())
	}
	if msgs, err := s.Window(ctx, first.ID, 10); err != nil || len(msgs) != 2 {
		t.Fatalf("old session kept %d messages, %v; want 2", len(msgs), err)
	}
	if msgs, err := s.Window(ctx, fresh.ID, 10); err != nil || len(msgs) != 0 {
		t.Fatalf("new session has %d messages, %v; want 0", len(msgs), err)
	}
	if err := s.Append(ctx, first.ID, user("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append to closed = %v; want ErrClosed", err)
	}
	if err := s.Append(ctx, 9999, user("x")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Append to unknown = %v; want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, 9999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get unknown = %v; want ErrNotFound", err)
	}
	// Reset of a key never seen just creates one.
	other := must(Group("wecom", "chat"))
	if ss, err := s.Reset(ctx, other); err != nil || !ss.Open() {
		t.Fatalf("Reset new key = %+v, %v", ss, err)
	}
	if _, err := s.Current(ctx, "not a key"); !errors.Is(err, ErrBadKey) {
		t.Fatalf("Current bad key = %v; want ErrBadKey", err)
	}
}

func TestAppendWindowRoundTrip(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	ss, err := s.Current(ctx, must(Thread("wecom", "c", "t")))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []llm.Message{
		user("读一下 notes.txt"),
		{Role: llm.RoleAssistant, ReasoningContent: "I should read the file", ToolCalls: []llm.ToolCall{
			{ID: "call_1", Type: "function", Function: llm.FunctionCall{Name: "read_file", Arguments: `{"path":"notes.txt"}`}},
			{ID: "call_2", Type: "function", Function: llm.FunctionCall{Name: "list_files", Arguments: `not json {`}},
		}},
		{Role: llm.RoleTool, ToolCallID: "call_2", Name: "list_files", Content: "error: invalid JSON arguments"},
		{Role: llm.RoleTool, ToolCallID: "call_1", Name: "read_file", Content: "明天开会"},
		{Role: llm.RoleAssistant, Content: "文件说明天开会。", ReasoningContent: "done"},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("what is this?"), llm.ImagePart("image/png", []byte{1, 2, 3})}},
	}
	// Two appends: sequence numbers continue.
	if err := s.Append(ctx, ss.ID, msgs[:2]...); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, ss.ID, msgs[2:]...); err != nil {
		t.Fatal(err)
	}
	got, err := s.Window(ctx, ss.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, msgs) {
		t.Fatalf("round trip:\n got  %#v\n want %#v", got, msgs)
	}
	if err := s.Append(ctx, ss.ID); err != nil {
		t.Fatalf("empty Append: %v", err)
	}
	if err := s.Append(ctx, ss.ID, llm.Message{Content: "no role"}); err == nil {
		t.Fatal("Append without a role succeeded")
	}
	if got, _ := s.Window(ctx, ss.ID, 100); len(got) != len(msgs) {
		t.Fatalf("failed Append left %d messages; want %d", len(got), len(msgs))
	}
}

func TestWindowBoundaries(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	ss, err := s.Current(ctx, must(P2P("admin", "u")))
	if err != nil {
		t.Fatal(err)
	}
	// seq: 1 user, 2 call(a,b), 3 res a, 4 res b, 5 asst, 6 user, 7 call(c), 8 res c, 9 asst
	hist := []llm.Message{
		user("q1"), calls("a", "b"), result("a", "1"), result("b", "2"), asst("r1"),
		user("q2"), calls("c"), result("c", "3"), asst("r2"),
	}
	if err := s.Append(ctx, ss.ID, hist...); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		n    int
		want []llm.Message
	}{
		{0, nil},
		{-1, nil},
		{1, hist[8:]}, // r2
		{2, hist[6:]}, // starts at res c: extended back to call(c)
		{3, hist[6:]}, // call(c)
		{5, hist[4:]}, // r1
		{6, hist[1:]}, // starts at res b: extended back to call(a,b)
		{7, hist[1:]}, // starts at res a: extended back to call(a,b)
		{8, hist[1:]}, // call(a,b)
		{9, hist},     // all
		{100, hist},   // more than there are
	}
	for _, tt := range tests {
		got, err := s.Window(ctx, ss.ID, tt.n)
		if err != nil {
			t.Fatalf("Window(%d): %v", tt.n, err)
		}
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Window(%d):\n got  %s\n want %s", tt.n, dump(got), dump(tt.want))
		}
		if err := Valid(got); err != nil {
			t.Errorf("Window(%d) invalid: %v", tt.n, err)
		}
	}
}

func TestWindowTrimsResultsWithoutCall(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	ss, err := s.Current(ctx, must(P2P("admin", "u")))
	if err != nil {
		t.Fatal(err)
	}
	// Stored history that is itself broken: results after a user message.
	hist := []llm.Message{user("q"), result("x", "1"), result("y", "2"), asst("r")}
	if err := s.Append(ctx, ss.ID, hist...); err != nil {
		t.Fatal(err)
	}
	got, err := s.Window(ctx, ss.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Window(2) = [res y, r]; nearest non-tool before is the user: trim.
	if want := hist[3:]; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s; want %s", dump(got), dump(want))
	}
	// Only tool results at the start of the session: trimmed too.
	ss2, _ := s.Reset(ctx, ss.Key)
	if err := s.Append(ctx, ss2.ID, result("z", "1"), asst("r")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Window(ctx, ss2.ID, 5); err != nil || !reflect.DeepEqual(got, []llm.Message{asst("r")}) {
		t.Fatalf("got %s, %v", dump(got), err)
	}
}

func TestList(t *testing.T) {
	s, clk := newStore(t)
	ctx := context.Background()
	k1 := must(P2P("wecom", "a"))
	k2 := must(Group("wecom", "g"))
	s1, _ := s.Current(ctx, k1)
	clk.advance(time.Second)
	s2, _ := s.Current(ctx, k2)
	clk.advance(time.Second)
	if err := s.Append(ctx, s1.ID, user("1"), asst("2"), user("3")); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Second)
	s3, err := s.Reset(ctx, k1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	want := []Summary{
		{Session{ID: s3.ID, Key: k1, CreatedAt: t0.Add(3 * time.Second), LastActivity: t0.Add(3 * time.Second)}, 0},
		{Session{ID: s1.ID, Key: k1, CreatedAt: t0, LastActivity: t0.Add(2 * time.Second), ClosedAt: t0.Add(3 * time.Second)}, 3},
		{Session{ID: s2.ID, Key: k2, CreatedAt: t0.Add(time.Second), LastActivity: t0.Add(time.Second)}, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("List:\n got  %+v\n want %+v", got, want)
	}
}

func TestConcurrentAppends(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const sessions, perSession = 4, 25
	ids := make([]int64, sessions)
	for i := range ids {
		ss, err := s.Current(ctx, must(P2P("admin", fmt.Sprint("u", i))))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = ss.ID
	}
	var wg sync.WaitGroup
	errs := make(chan error, sessions*perSession)
	for i, id := range ids {
		wg.Go(func() {
			for j := range perSession {
				if err := s.Append(ctx, id, user(fmt.Sprintf("%d-%d", i, j)), asst("ok")); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// Also concurrent Current on one new key: exactly one session results.
	key := must(P2P("admin", "race"))
	got := make(chan int64, 4)
	for range 4 {
		wg.Go(func() {
			ss, err := s.Current(ctx, key)
			if err != nil {
				errs <- err
				return
			}
			got <- ss.ID
		})
	}
	wg.Wait()
	close(errs)
	close(got)
	for err := range errs {
		t.Fatal(err)
	}
	var first int64
	for id := range got {
		if first == 0 {
			first = id
		} else if id != first {
			t.Fatalf("concurrent Current made two sessions: %d and %d", first, id)
		}
	}
	for i, id := range ids {
		msgs, err := s.Window(ctx, id, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 2*perSession {
			t.Fatalf("session %d has %d messages; want %d", i, len(msgs), 2*perSession)
		}
		for j := range perSession {
			if want := fmt.Sprintf("%d-%d", i, j); msgs[2*j].Content != want || msgs[2*j+1].Content != "ok" {
				t.Fatalf("session %d message %d = %q; want %q", i, 2*j, msgs[2*j].Content, want)
			}
		}
	}
}

// BenchmarkWindow40 reads the default prompt window from a session holding
// 400 messages with tool exchanges.
func BenchmarkWindow40(b *testing.B) {
	db := storetest.Open(b)
	s := New(db.DB(), nil)
	ctx := context.Background()
	ss, err := s.Current(ctx, must(P2P("admin", "bench")))
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		id := fmt.Sprint("c", i)
		if err := s.Append(ctx, ss.ID, user("question"), calls(id), result(id, "some tool output"), asst("answer")); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		msgs, err := s.Window(ctx, ss.ID, 40)
		if err != nil || len(msgs) != 40 {
			b.Fatal(len(msgs), err)
		}
		_ = Prune(Repair(msgs), 2000, nil)
	}
}
