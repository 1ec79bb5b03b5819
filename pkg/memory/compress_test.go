package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"agent/pkg/clock"
	"agent/pkg/llm"
	"agent/pkg/llm/llmtest"
	"agent/pkg/session"
)

// fill appends n alternating user/assistant messages to key's session.
func fill(t *testing.T, ss *session.Store, key session.Key, n int, say func(i int) string) session.Session {
	t.Helper()
	sess, err := ss.Current(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		role := llm.RoleUser
		if i%2 == 1 {
			role = llm.RoleAssistant
		}
		if err := ss.Append(ctx, sess.ID, llm.Message{Role: role, Content: say(i)}); err != nil {
			t.Fatal(err)
		}
	}
	return sess
}

func memorySeq(t *testing.T, s *Store, id int64) int64 {
	t.Helper()
	var n int64
	if err := s.db.QueryRow(`SELECT memory_seq FROM sessions WHERE id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

type compressRig struct {
	mem  *Store
	ss   *session.Store
	clk  *clock.Fake
	llm  *llmtest.Server
	comp *Compressor
}

func newCompressRig(t *testing.T, e Embedder, replies ...string) *compressRig {
	t.Helper()
	mem, clk := newMem(t, e, Config{})
	r := &compressRig{mem: mem, clk: clk, ss: session.New(mem.db, clk.Now), llm: newLLM(t, replies...)}
	r.comp = NewCompressor(CompressorConfig{SessionMax: 40, Overlap: 5, Clock: clk}, mem, llmClient(t, r.llm), r.ss, nil)
	return r
}

func say(i int) string { return fmt.Sprintf("message %d", i) }

func TestCompressStoresFacts(t *testing.T) {
	e := newVecs()
	r := newCompressRig(t, e, `{"facts": [
		{"fact": "The user's daughter is called Mei", "keywords": ["daughter", "Mei"], "persons": ["Mei"], "time": "", "topic": "family", "supersedes": null},
		{"fact": "The user has a dentist appointment on 2026-12-03", "keywords": "dentist, appointment", "persons": [], "time": "2026-12-03", "topic": "health"},
		{"keywords": ["no fact here"]}
	]}`)
	key, _ := session.P2P("wecom", "alice")
	sess := fill(t, r.ss, key, 39, say)
	out, err := r.comp.Compress(ctx, sess.ID)
	if err != nil || out.Skipped == "" || r.llm.Count() != 0 {
		t.Fatalf("39 messages: %+v %v, %d requests", out, err, r.llm.Count())
	}
	fill(t, r.ss, key, 2, func(i int) string { return say(39 + i) })
	out, err = r.comp.Compress(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out.Messages != 36 || len(out.Facts) != 2 || memorySeq(t, r.mem, sess.ID) != 36 {
		t.Fatalf("41 messages: %+v, memory_seq %d; want 36 read (5 kept), 2 facts", out, memorySeq(t, r.mem, sess.ID))
	}
	// The request carried the transcript up to message 35 and the format.
	msgs := r.llm.Request(0).Messages
	user := msgs[1].Content
	if !strings.Contains(user, "User: message 34") || strings.Contains(user, "message 36") || !strings.Contains(msgs[0].Content, `"facts"`) {
		t.Errorf("request:\n%s", user)
	}
	facts, _ := r.mem.List(ctx, Filter{Scope: "wecom:alice"})
	if len(facts) != 2 {
		t.Fatalf("facts in alice's scope: %d", len(facts))
	}
	for _, f := range facts {
		if f.Source != fmt.Sprintf("session:%d", sess.ID) {
			t.Errorf("source %q", f.Source)
		}
		if f.Topic == "health" && (f.Time.IsZero() || strings.Join(f.Keywords, ",") != "dentist,appointment") {
			t.Errorf("health fact: %+v", f)
		}
	}
	// Nothing new until 40 more uncompressed messages.
	if out, _ := r.comp.Compress(ctx, sess.ID); out.Skipped == "" {
		t.Errorf("compressed again: %+v", out)
	}
	// /new: the closed session's rest is compressed.
	if _, err := r.ss.Reset(ctx, key); err != nil {
		t.Fatal(err)
	}
	out, err = r.comp.Compress(ctx, sess.ID)
	if err != nil || out.Messages != 5 || memorySeq(t, r.mem, sess.ID) != 41 {
		t.Fatalf("closed session: %+v %v", out, err)
	}
}

func TestCompressSupersedesShownFactsOnly(t *testing.T) {
	e := newVecs()
	r := newCompressRig(t, e)
	key, _ := session.P2P("wecom", "alice")
	old := mustAdd(t, r.mem, "wecom:alice", Input{Text: "The user lives in Beijing"})
	other := mustAdd(t, r.mem, "wecom:bob", Input{Text: "Bob lives in Xi'an"})
	r.llm.Script(llmtest.Text(fmt.Sprintf(`{"facts": [
		{"fact": "The user moved to Shanghai", "supersedes": %d},
		{"fact": "The user's colleague moved too", "supersedes": "%d"}]}`, old.ID, other.ID)))
	sess := fill(t, r.ss, key, 41, func(i int) string {
		if i == 0 {
			return "I moved from Beijing to Shanghai"
		}
		return say(i)
	})
	out, err := r.comp.Compress(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Facts) != 2 || out.Facts[0].Action != Superseded || out.Facts[1].Action != Inserted {
		t.Fatalf("outcome: %+v", out.Facts)
	}
	user := r.llm.Request(0).Messages[1].Content
	if !strings.Contains(user, fmt.Sprintf("- id %d: The user lives in Beijing", old.ID)) || strings.Contains(user, "Xi'an") {
		t.Errorf("existing facts shown:\n%s", user)
	}
	if f, _ := r.mem.Get(ctx, "wecom:bob", other.ID); !f.Current() {
		t.Error("bob's fact was superseded from alice's session")
	}
}

func TestCompressMalformedReplies(t *testing.T) {
	key, _ := session.P2P("wecom", "alice")
	t.Run("retried once", func(t *testing.T) {
		r := newCompressRig(t, nil, "Sure! Here are the facts: the user likes tea.", `{"facts":[{"fact":"The user likes tea"}]}`)
		sess := fill(t, r.ss, key, 41, say)
		out, err := r.comp.Compress(ctx, sess.ID)
		if err != nil || len(out.Facts) != 1 || out.Dropped || r.llm.Count() != 2 {
			t.Fatalf("%+v %v, %d requests", out, err, r.llm.Count())
		}
		retry := r.llm.Request(1).Messages
		if len(retry) != 4 || !strings.Contains(retry[3].Content, "invalid JSON") {
			t.Errorf("retry request: %v", retry)
		}
	})
	t.Run("dropped after two", func(t *testing.T) {
		r := newCompressRig(t, nil, `{"facts": [`, "```json\n{\"fact\": 1}\n```")
		sess := fill(t, r.ss, key, 41, say)
		out, err := r.comp.Compress(ctx, sess.ID)
		if err != nil || !out.Dropped || len(out.Facts) != 0 || r.llm.Count() != 2 {
			t.Fatalf("%+v %v, %d requests", out, err, r.llm.Count())
		}
		// Dropped, not lost: the session still has every message, and the
		// batch is not asked for again.
		_, msgs, _ := r.ss.Range(ctx, sess.ID, 0, 100)
		if len(msgs) != 41 || memorySeq(t, r.mem, sess.ID) != 36 {
			t.Errorf("session after a drop: %d messages, memory_seq %d", len(msgs), memorySeq(t, r.mem, sess.ID))
		}
	})
	t.Run("llm down backs off", func(t *testing.T) {
		down := make([]string, 20)
		r := newCompressRig(t, nil, down...)
		sess := fill(t, r.ss, key, 41, say)
		_, err := r.comp.Compress(ctx, sess.ID)
		if !errors.Is(err, llm.ErrServer) || memorySeq(t, r.mem, sess.ID) != 0 {
			t.Fatalf("LLM down: %v, memory_seq %d", err, memorySeq(t, r.mem, sess.ID))
		}
		n := r.llm.Count()
		if out, err := r.comp.Compress(ctx, sess.ID); err != nil || out.Skipped == "" || r.llm.Count() != n {
			t.Fatalf("during backoff: %+v %v", out, err)
		}
		r.llm.Script() // {"facts": []} from now on
		r.clk.Advance(2 * time.Minute)
		if out, err := r.comp.Compress(ctx, sess.ID); err != nil || out.Skipped != "" || memorySeq(t, r.mem, sess.ID) != 36 {
			t.Fatalf("after backoff: %+v %v", out, err)
		}
	})
}

func TestCompressorWorker(t *testing.T) {
	r := newCompressRig(t, nil, `{"facts":[{"fact":"Closed session fact"}]}`)
	key, _ := session.P2P("wecom", "carol")
	sess := fill(t, r.ss, key, 3, say)
	if _, err := r.ss.Reset(ctx, key); err != nil {
		t.Fatal(err)
	}
	// The start-up sweep finds the closed session with uncompressed messages.
	r.comp.Start()
	deadline := time.Now().Add(10 * time.Second)
	for memorySeq(t, r.mem, sess.ID) != 3 {
		if time.Now().After(deadline) {
			t.Fatal("the worker did not compress the closed session")
		}
		time.Sleep(5 * time.Millisecond) // polling the worker's write
	}
	r.comp.Notify(sess.ID) // nothing left: no request
	if err := r.comp.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.llm.Count() != 1 {
		t.Errorf("%d requests, want 1", r.llm.Count())
	}
	if facts, _ := r.mem.List(ctx, Filter{Scope: "wecom:carol"}); len(facts) != 1 {
		t.Errorf("facts: %v", facts)
	}
}

func TestParseFacts(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		err  bool
		supe int64
	}{
		{`{"facts": []}`, 0, false, 0},
		{`[{"fact": "a", "supersedes": 7}]`, 1, false, 7},
		{"```json\n{\"facts\": [{\"fact\": \"a\", \"supersedes\": \"#12\"}]}\n```", 1, false, 12},
		{`{"facts": [{"fact": "a", "supersedes": [3, 4]}, "junk", {"fact": ""}, {"fact": 5}]}`, 1, false, 3},
		{`{"facts": [{"fact": "a", "supersedes": -1, "keywords": [1, true, null, "x"]}]}`, 1, false, 0},
		{`{"memories": []}`, 0, true, 0},
		{`The user likes tea.`, 0, true, 0},
		{``, 0, true, 0},
		{`{"facts": [`, 0, true, 0},
		{`{"facts": null}`, 0, true, 0},
	}
	for _, c := range cases {
		got, err := ParseFacts(c.in)
		if (err != nil) != c.err || len(got) != c.n {
			t.Errorf("ParseFacts(%q) = %d facts, %v", c.in, len(got), err)
			continue
		}
		if c.n > 0 && got[0].Supersedes != c.supe {
			t.Errorf("ParseFacts(%q): supersedes %d, want %d", c.in, got[0].Supersedes, c.supe)
		}
	}
	many := `{"facts": [` + strings.TrimSuffix(strings.Repeat(`{"fact":"x"},`, 500), ",") + `]}`
	if got, _ := ParseFacts(many); len(got) != MaxFactsPerBatch {
		t.Errorf("500 facts: kept %d", len(got))
	}
}

func FuzzParseFacts(f *testing.F) {
	for _, s := range []string{`{"facts": [{"fact": "a", "keywords": ["k"], "supersedes": 1}]}`, `[{"fact":"x"}]`, "```json\n[]\n```", `{"facts":[{"supersedes":[[[1]]]}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		facts, err := ParseFacts(s)
		if err != nil {
			return
		}
		for _, in := range facts {
			if strings.TrimSpace(in.Text) == "" || len(in.Text) > MaxFactBytes || in.Supersedes < 0 {
				t.Fatalf("invalid fact passed: %+v", in)
			}
		}
	})
}

func TestCompressHugeAndEmojiMessages(t *testing.T) {
	r := newCompressRig(t, nil, `{"facts":[{"fact":"The user sent a very long message 🎉"}]}`)
	key, _ := session.P2P("wecom", "dave")
	sess := fill(t, r.ss, key, 41, func(i int) string {
		return strings.Repeat("🎉 emoji and text ", 20_000) + fmt.Sprint(i) // ~400 KB each
	})
	out, err := r.comp.Compress(ctx, sess.ID)
	if err != nil || len(out.Facts) != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	user := r.llm.Request(0).Messages[1].Content
	if len(user) > 40<<10 {
		t.Errorf("request transcript is %d bytes; the bound is 24 KiB plus related facts", len(user))
	}
	if !utf8.ValidString(user) {
		t.Error("transcript cut inside a character")
	}
}

// TestCompressorWaitsForQuiet: while turns keep ending, triggered work
// waits; it runs once the conversation pauses for Quiet.
func TestCompressorWaitsForQuiet(t *testing.T) {
	r := newCompressRig(t, nil, `{"facts":[{"fact":"Quiet fact"}]}`)
	r.comp = NewCompressor(CompressorConfig{SessionMax: 40, Overlap: 5, Quiet: time.Second, MaxDelay: time.Minute, Clock: r.clk},
		r.mem, llmClient(t, r.llm), r.ss, nil)
	key, _ := session.P2P("voice", "dana")
	sess := fill(t, r.ss, key, 45, say)
	// A turn has just ended when the worker starts: its start-up sweep
	// finds the session too, and that work waits for the pause as well.
	r.comp.Notify(sess.ID)
	r.comp.Start()
	defer r.comp.Close(context.Background())
	waitTimers(t, r.clk, 2) // asleep: the next sweep and the quiet period
	for i := range 15 {     // a turn every 100 ms (a tenth of Quiet) for 1.5 s
		r.clk.Advance(100 * time.Millisecond)
		r.comp.Notify(sess.ID)
		waitTimers(t, r.clk, 2) // asleep again, the quiet period restarted
		if r.llm.Count() != 0 {
			t.Fatalf("compressed during the conversation, %v after it started", time.Duration(i+1)*100*time.Millisecond)
		}
	}
	r.clk.Advance(time.Second) // the pause
	r.llm.Wait(1)
	deadline := time.Now().Add(10 * time.Second)
	for memorySeq(t, r.mem, sess.ID) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("not compressed after the pause")
		}
		time.Sleep(5 * time.Millisecond) // polling the worker's write
	}
}
