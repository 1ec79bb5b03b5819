package toolselect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"agent/pkg/tools"
)

// toolVec and terms are keyed by tool name: an MCP server that renames
// its tools (tools/list_changed; each refresh unregisters the old names
// and registers new ones) or custom tools coming and going must not grow
// them for the life of the daemon (they once grew without bound; now
// cleared at maxTerms).
func TestToolVectorCacheGrowsWithToolChurn(t *testing.T) {
	emb := &wordEmbedder{}
	reg, sel := builtins(t, func(s *Selector) { s.cfg.Embedder = func() Embedder { return emb } })
	h := func(context.Context, tools.Call) (string, error) { return "ok", nil }
	ctx := context.Background()
	q := tools.Query{User: "alice", Channel: "wecom", Profile: "wecom", Text: "what is new today"}
	base := len(reg.List("wecom"))
	for round := range 150 {
		var names []string
		for i := range 20 {
			n := fmt.Sprintf("srv__r%d_t%d", round, i)
			names = append(names, n)
			if err := reg.Register(tools.Tool{Name: n, Description: strings.Repeat("padding words ", 100), Handler: h}); err != nil {
				t.Fatal(err)
			}
		}
		sel.Offer(ctx, q)
		for _, n := range names {
			reg.Unregister(n)
		}
	}
	sel.mu.Lock()
	n, nt := len(sel.toolVec), len(sel.terms)
	sel.mu.Unlock()
	if n > maxTerms+base+20 || nt > maxTerms+base+20 {
		t.Errorf("the caches hold %d vectors and %d term sets for a registry of at most %d tools", n, nt, base+20)
	}
}

// The keyword score saturates at 6 points (min(1, score/6)) and ties go
// to the alphabetically first name, so an MCP server whose tools'
// descriptions just list common words (its own text, up to 2 KB each)
// ties or beats every built-in on ordinary messages and takes the turn's
// top slots: the built-in the user wants is no longer offered.
func TestDescriptionStuffingCrowdsOutBuiltins(t *testing.T) {
	stuffed := "remind every monday send report search web latest news port strike weather cut video " +
		"reminder schedule tomorrow meeting file folder read write document pdf compute python today price"
	var extra []tools.Tool
	for i := range DefaultTopK {
		extra = append(extra, tools.Tool{Name: fmt.Sprintf("aa__t%d", i), Description: "Helper. " + stuffed})
	}
	_, sel := builtins(t, nil, extra...)
	ctx := context.Background()
	for _, c := range []struct{ text, want string }{
		{"remind me every Monday at 9 to send the report", "schedule"},
		{"search the web for the latest news on the port strike", "web_search"},
		{"please cut the video from 0:10 to 0:45", "trim_video"},
		{"summarise the attached PDF report", "read_document"},
	} {
		got := names(sel.Offer(ctx, tools.Query{User: "alice", Channel: "wecom", Profile: "wecom", Text: c.text}))
		if !slices.Contains(got, c.want) {
			t.Errorf("%q: offered %v, not %s", c.text, got, c.want)
		}
	}
}

// Concurrent Offer/find/Allowed with registry churn and a model that
// appears mid-way (run with -race).
func TestConcurrentOfferFind(t *testing.T) {
	emb := &wordEmbedder{}
	var on atomic.Bool
	reg, sel := builtins(t, func(s *Selector) {
		s.cfg.Embedder = func() Embedder {
			if on.Load() {
				return emb
			}
			return nil
		}
	})
	h := func(context.Context, tools.Call) (string, error) { return "ok", nil }
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pulls := &tools.Pulls{}
			ctx := tools.WithPulls(context.Background(), pulls)
			q := tools.Query{User: "bob", Channel: "wecom", Profile: "wecom", Text: fmt.Sprintf("search web %d 搜索 self_check", w)}
			for i := range 200 {
				if w == 0 {
					n := fmt.Sprintf("m__t%d", i%10)
					reg.Unregister(n)
					reg.Register(tools.Tool{Name: n, Description: fmt.Sprintf("desc %d", i), Handler: h})
					if i == 50 {
						on.Store(true)
					}
				}
				q.Keep = pulls.Names()
				for _, tl := range sel.Offer(ctx, q) {
					if tl.Owner {
						t.Errorf("owner tool %s offered to bob", tl.Name)
					}
				}
				out := sel.find(ctx, q, "self_check diagnose 检查 health status")
				if strings.Contains(out, "- self_check") || strings.Contains(out, "- diagnose") {
					t.Errorf("find gave bob %q", out)
				}
				if sel.Allowed(q, "self_check") {
					t.Error("bob may run self_check")
				}
			}
			if n := len(pulls.Names()); n > DefaultMaxPulled {
				t.Errorf("%d pulled", n)
			}
		}()
	}
	wg.Wait()
}

// Only built-in tools have Chinese aliases, and words() keeps ASCII
// words only: a tool whose own description is Chinese (a custom tool made
// in a Chinese office, an MCP server's) never matches a Chinese message or
// a Chinese find_tools query by keywords, and find_tools drops
// embedding-only matches (r.words > 0). It is reached only through the
// "No tool matches" list of every name.
func TestChineseDescribedToolNotFound(t *testing.T) {
	emb := &wordEmbedder{}
	_, sel := builtins(t, func(s *Selector) { s.cfg.Embedder = func() Embedder { return emb } },
		tools.Tool{Name: "kc_cx", Description: "查询仓库的库存数量和入库记录"})
	pulls := &tools.Pulls{}
	ctx := tools.WithPulls(context.Background(), pulls)
	q := tools.Query{User: "alice", Channel: "wecom", Profile: "wecom", Text: "帮我查询一下仓库库存"}
	out := sel.find(ctx, q, "查询仓库库存")
	if !slices.Contains(pulls.Names(), "kc_cx") {
		t.Errorf("find_tools(查询仓库库存) did not pull kc_cx: %.200q", out)
	}
	if got := names(sel.Offer(context.Background(), q)); !slices.Contains(got, "kc_cx") {
		t.Logf("offered for %q: %v", q.Text, got)
	}
}
