package toolselect

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"agent/pkg/tools"
)

// builtins registers tools named like the agent's (descriptions shortened)
// plus n MCP-style tools, and find_tools.
func builtins(t testing.TB, s func(*Selector), extra ...tools.Tool) (*tools.Registry, *Selector) {
	t.Helper()
	reg := tools.NewRegistry()
	h := func(context.Context, tools.Call) (string, error) { return "ok", nil }
	for _, tl := range []tools.Tool{
		{Name: "exec", Description: "Run a shell command in a sandbox."},
		{Name: "message", Description: "Send a message to a colleague."},
		{Name: "read_file", Description: "Read a file of your folder."},
		{Name: "write_file", Description: "Write a file in your folder."},
		{Name: "list_files", Description: "List your folder."},
		{Name: "schedule", Description: "Schedule a reminder (text) or a task (prompt), recurring (cron) or once (at)."},
		{Name: "list_schedules", Description: "List scheduled jobs."},
		{Name: "remove_schedule", Description: "Remove a scheduled job."},
		{Name: "web_search", Description: "Search the web and get titles, links and snippets."},
		{Name: "web_fetch", Description: "Fetch a web page and read its text."},
		{Name: "trim_video", Description: "Cut a video to the part from start to end."},
		{Name: "read_document", Description: "Read a PDF, Word, Excel or PowerPoint document."},
		{Name: "search_memory", Description: "Search what you remember about the user."},
		{Name: "self_check", Description: "Check the assistant's own health.", Owner: true},
		{Name: "diagnose", Description: "Explain what went wrong in a session.", Owner: true},
		{Name: "reload_mcp", Description: "Reload the MCP servers.", Owner: true, When: func() bool { return false }},
		{Name: "device_only", Description: "Turn the lights on.", Profiles: []string{"hardware"}},
	} {
		tl.Handler = h
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	for _, tl := range extra {
		tl.Handler = h
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	sel := New(Config{Registry: reg, IsOwner: func(ch, u string) bool { return ch == "wecom" && u == "boss" }})
	if s != nil {
		s(sel)
	}
	if err := reg.Register(sel.Tool()); err != nil {
		t.Fatal(err)
	}
	return reg, sel
}

func names(ts []tools.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func TestOfferByMessage(t *testing.T) {
	_, sel := builtins(t, nil)
	ctx := context.Background()
	for _, c := range []struct{ text, want string }{
		{"remind me every Monday at 9 to send the report", "schedule"},
		{"search the web for the latest news on the port strike", "web_search"},
		{"明天下午三点提醒我开会", "schedule"},
		{"帮我搜索一下最新的新闻", "web_search"},
		{"please cut the video from 0:10 to 0:45", "trim_video"},
		{"summarise the attached PDF report", "read_document"},
		{"compute 17% of 2380 with python", "exec"},
	} {
		got := names(sel.Offer(ctx, tools.Query{User: "alice", Channel: "wecom", Profile: "wecom", Text: c.text}))
		if !slices.Contains(got, c.want) || !slices.Contains(got, FindTools) || len(got) > DefaultTopK+1 {
			t.Errorf("%q offers %v; want %s and find_tools, at most %d", c.text, got, c.want, DefaultTopK+1)
		}
	}
	// A greeting costs only find_tools.
	if got := names(sel.Offer(ctx, tools.Query{User: "alice", Channel: "wecom", Profile: "wecom", Text: "hello!"})); !slices.Equal(got, []string{FindTools}) {
		t.Errorf("hello offers %v", got)
	}
}

// Who asks decides what exists: owner-only tools are neither offered to,
// found by nor run for anyone else, whatever the message says.
func TestOwnerOnlyToolsAttack(t *testing.T) {
	_, sel := builtins(t, nil)
	ctx := context.Background()
	bob := tools.Query{User: "bob", Channel: "wecom", Profile: "wecom",
		Text: "self_check diagnose reload_mcp: run a self check of your health and diagnose why it failed"}
	if got := names(sel.Offer(ctx, bob)); slices.Contains(got, "self_check") || slices.Contains(got, "diagnose") {
		t.Errorf("a non-owner is offered owner tools: %v", got)
	}
	bob.Keep = []string{"self_check", "diagnose"} // as if pulled or used
	if got := names(sel.Offer(ctx, bob)); slices.Contains(got, "self_check") || slices.Contains(got, "diagnose") {
		t.Errorf("kept owner tools offered to a non-owner: %v", got)
	}
	if sel.Allowed(bob, "self_check") || sel.Allowed(bob, "diagnose") {
		t.Error("a non-owner may run owner tools")
	}
	pulls := &tools.Pulls{}
	out := sel.find(tools.WithPulls(ctx, pulls), bob, "self_check diagnose health")
	_, listed, _ := strings.Cut(out, "by name:") // the query itself is quoted before
	if strings.Contains(listed, "self_check") || strings.Contains(listed, "diagnose") || len(pulls.Names()) != 0 {
		t.Errorf("find_tools gives a non-owner owner tools: %q %v", out, pulls.Names())
	}
	boss := tools.Query{User: "boss", Channel: "wecom", Profile: "wecom", Text: "run a self check of your health"}
	if got := names(sel.Offer(ctx, boss)); !slices.Contains(got, "self_check") || !sel.Allowed(boss, "self_check") {
		t.Errorf("the owner is not offered self_check: %v", got)
	}
	op := tools.Query{Channel: AdminChannel, User: "ops", Profile: "admin", Text: "diagnose the last session"}
	if !slices.Contains(names(sel.Offer(ctx, op)), "diagnose") {
		t.Error("the operator is not offered diagnose")
	}
	// What can do nothing now is not offered; asked for by name, the
	// owner may still run it (it may know better: a server just added).
	if slices.Contains(names(sel.Offer(ctx, tools.Query{User: "boss", Channel: "wecom", Profile: "wecom", Text: "reload the mcp servers"})), "reload_mcp") {
		t.Error("reload_mcp offered without MCP servers")
	}
	if !sel.Allowed(boss, "reload_mcp") || sel.Allowed(bob, "reload_mcp") {
		t.Error("reload_mcp by name: the owner may run it, nobody else")
	}
	// Profiles: a hardware-only tool is not a WeCom user's.
	if sel.Allowed(boss, "device_only") {
		t.Error("a hardware tool is allowed on wecom")
	}
}

// A message crafted to pull every tool in still gets a handful; find_tools
// called over and over pulls at most DefaultMaxPulled into a turn.
func TestCraftedMessagesAreBounded(t *testing.T) {
	var extra []tools.Tool
	for i := range 60 {
		extra = append(extra, tools.Tool{Name: fmt.Sprintf("srv__tool_%d", i), Description: fmt.Sprintf("Tool number %d of the server: search files web video schedule.", i)})
	}
	reg, sel := builtins(t, nil, extra...)
	ctx := context.Background()
	var all []string
	for _, tl := range reg.List("wecom") {
		all = append(all, tl.Name)
	}
	q := tools.Query{User: "alice", Channel: "wecom", Profile: "wecom", Text: strings.Repeat(strings.Join(all, " ")+" search web video schedule file ", 50)}
	if got := sel.Offer(ctx, q); len(got) > DefaultTopK+1 {
		t.Errorf("a crafted message is offered %d tools", len(got))
	}
	pulls := &tools.Pulls{}
	pctx := tools.WithPulls(ctx, pulls)
	for i := range 40 {
		sel.find(pctx, q, fmt.Sprintf("srv__tool_%d srv__tool_%d srv__tool_%d", i, i+20, i+40))
	}
	if n := len(pulls.Names()); n != DefaultMaxPulled {
		t.Errorf("%d tools pulled into one turn, want the cap %d", n, DefaultMaxPulled)
	}
	q.Keep = pulls.Names()
	if got := sel.Offer(ctx, q); len(got) > DefaultTopK+DefaultMaxPulled+1 {
		t.Errorf("%d tools offered with a full pull", len(got))
	}
	// Junk: a clear answer that lists what may be asked for, nothing pulled.
	fresh := &tools.Pulls{}
	for _, junk := range []string{"", "\x00\xff\xfe", strings.Repeat("zzqx ", 5000), "'; DROP TABLE tools; --"} {
		out := sel.find(tools.WithPulls(ctx, fresh), q, junk)
		if !strings.HasPrefix(out, "No tool matches") || !strings.Contains(out, "web_search") || strings.Contains(out, "self_check") || len(out) > 4000 {
			t.Errorf("find_tools(%.20q) = %.200q", junk, out)
		}
	}
	if len(fresh.Names()) != 0 {
		t.Errorf("junk pulled %v", fresh.Names())
	}
}

func TestFindToolsPullsByNeedAndName(t *testing.T) {
	_, sel := builtins(t, nil)
	pulls := &tools.Pulls{}
	ctx := tools.WithPulls(context.Background(), pulls)
	q := tools.Query{User: "alice", Channel: "wecom", Profile: "wecom"}
	out := sel.find(ctx, q, "cut a video")
	if !strings.Contains(out, "- trim_video: Cut a video") || !slices.Contains(pulls.Names(), "trim_video") {
		t.Errorf("find_tools(cut a video) = %q, pulled %v", out, pulls.Names())
	}
	sel.find(ctx, q, "list_schedules")
	if !slices.Contains(pulls.Names(), "list_schedules") {
		t.Errorf("by name: pulled %v", pulls.Names())
	}
	q.Keep = pulls.Names()
	q.Text = "hello"
	if got := names(sel.Offer(context.Background(), q)); !slices.Contains(got, "trim_video") || !slices.Contains(got, "list_schedules") {
		t.Errorf("pulled tools not offered: %v", got)
	}
}

func TestFastTurnsGetFewer(t *testing.T) {
	emb := &wordEmbedder{}
	_, sel := builtins(t, func(s *Selector) { s.cfg.Embedder = func() Embedder { return emb } })
	q := tools.Query{User: "panel", Channel: "voice", Profile: "voice", Fast: true, Text: "search the web for today's weather and remind me later"}
	got := sel.Offer(context.Background(), q)
	if len(got) > DefaultFastK+1 {
		t.Errorf("a voice turn is offered %d tools: %v", len(got), names(got))
	}
	if emb.calls.Load() != 0 {
		t.Error("a fast turn waited for the embedding model")
	}
}

// With an embedding model: it adds at most two tools without a word in
// common, each tool's description is embedded once, and a turn's steps
// embed the message once.
func TestSemanticRanking(t *testing.T) {
	emb := &wordEmbedder{}
	_, sel := builtins(t, func(s *Selector) { s.cfg.Embedder = func() Embedder { return emb } })
	ctx := context.Background()
	q := tools.Query{User: "alice", Channel: "wecom", Profile: "wecom", Text: "good morning"}
	got := sel.Offer(ctx, q)
	if len(got) > maxSemantic+1 {
		t.Errorf("a greeting with the model is offered %v", names(got))
	}
	first := emb.texts.Load()
	sel.Offer(ctx, q)
	if emb.texts.Load() != first {
		t.Errorf("the second step embedded %d more texts", emb.texts.Load()-first)
	}
	q.Text = "good evening"
	sel.Offer(ctx, q)
	if d := emb.texts.Load() - first; d != 1 {
		t.Errorf("a new message embedded %d texts, want 1 (tool vectors cached)", d)
	}
	// A failing model: keywords still choose.
	emb.fail.Store(true)
	q.Text = "search the web"
	if got := names(sel.Offer(ctx, q)); !slices.Contains(got, "web_search") {
		t.Errorf("with a failing model: %v", got)
	}
}

// wordEmbedder is a deterministic stand-in for the embedding model: a
// normalised bag of hashed words (the real model's test weights are
// random, which would make the ranking assertions meaningless).
type wordEmbedder struct {
	calls, texts atomic.Int64
	fail         atomic.Bool
}

func (w *wordEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	w.calls.Add(1)
	w.texts.Add(int64(len(texts)))
	if w.fail.Load() {
		return nil, fmt.Errorf("model failed")
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 64)
		for _, f := range words(t) {
			h := fnv.New32a()
			h.Write([]byte(f))
			v[h.Sum32()%64]++
		}
		var n float64
		for _, x := range v {
			n += float64(x * x)
		}
		if n > 0 {
			for j := range v {
				v[j] /= float32(math.Sqrt(n))
			}
		}
		out[i] = v
	}
	return out, nil
}
