package cmdcache

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"agent/pkg/clock"
	"agent/pkg/embed"
	"agent/pkg/embed/embedtest"
	"agent/pkg/onnxrt"
	"agent/pkg/store/storetest"
)

// testEmbedder is the generated random-weight model of the bge shape, mean
// pooled: with random weights CLS pooling gives every text the same
// vector, mean pooling tells texts apart (a near repeat of a command is
// about 0.99 to it, other commands below 0.96).
func testEmbedder(t *testing.T) *embed.Embedder {
	t.Helper()
	lib := embedtest.ORTLibrary(t)
	if _, _, err := onnxrt.Load([]string{lib}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "model")
	if err := embedtest.Ensure(dir, embedtest.Tiny(), 7); err != nil {
		t.Fatal(err)
	}
	e, err := embed.New(embed.Config{ModelDir: dir, LibraryPath: lib, Threads: 1, Pooling: embed.PoolingMean}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// rig is a cache over a real store and embedder with three tools.
type rig struct {
	c       *Cache
	clk     *clock.Fake
	mu      sync.Mutex
	ran     []string
	results map[string]string
	kinds   map[string]Kind
	toolSet string
	failing bool
}

func newRig(t *testing.T) *rig {
	st := storetest.Open(t)
	emb := testEmbedder(t)
	r := &rig{clk: clock.NewFake(time.Unix(1_800_000_000, 0)), toolSet: "v1",
		results: map[string]string{"lights_on": "ok", "room_temp": "21°C", "wipe": "done"},
		kinds:   map[string]Kind{"lights_on": Idempotent, "room_temp": ReadOnly, "wipe": No}}
	r.c = New(Config{DB: st.DB(), Embedder: func() Embedder { return emb }, Threshold: func() float64 { return 0.98 }, TTL: time.Hour,
		Kind:    func(tool string) Kind { r.mu.Lock(); defer r.mu.Unlock(); return r.kinds[tool] },
		ToolSet: func(string) string { r.mu.Lock(); defer r.mu.Unlock(); return r.toolSet },
		Run: func(_ context.Context, _ Request, tool, args string) (string, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.ran = append(r.ran, tool+" "+args)
			if r.failing {
				return "", errors.New("device offline")
			}
			return r.results[tool], nil
		},
		Clock: r.clk})
	return r
}

func (r *rig) learn(t *testing.T, req Request, tool, args, result, reply string) {
	t.Helper()
	_, p, ok, err := r.c.Lookup(context.Background(), req, false)
	if err != nil || ok {
		t.Fatalf("lookup before learning: ok=%v err=%v", ok, err)
	}
	if err := r.c.Learn(context.Background(), req, p, []Step{{Tool: tool, Args: args, Result: result}}, reply); err != nil {
		t.Fatal(err)
	}
}

func lamp(text string) Request {
	return Request{Channel: "voice", Sender: "office", Device: "lamp-1", Profile: "hardware", Session: "p2p:voice:office", Text: text}
}

// A near repeat of a command answered by one idempotent call runs it
// again and replies as before; another command, another device, a changed
// tool set, an expired entry do not; a failing tool goes to the model.
func TestCommandCache(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.learn(t, lamp("turn on the lights"), "lights_on", `{"room":"office"}`, "ok", "Lights on in the office.")
	ans, _, ok, err := r.c.Lookup(ctx, lamp("turn on the light"), false)
	if err != nil || !ok || ans.Reply != "Lights on in the office." || ans.Similarity < 0.98 {
		t.Fatalf("near repeat: %+v ok=%v err=%v", ans, ok, err)
	}
	if len(r.ran) != 1 || r.ran[0] != `lights_on {"room":"office"}` {
		t.Fatalf("tool runs %q", r.ran)
	}
	if _, _, ok, _ := r.c.Lookup(ctx, lamp("what is the weather in Paris tomorrow"), false); ok {
		t.Fatal("a different command was answered from the cache")
	}
	other := lamp("turn on the lights")
	other.Device = "lamp-2"
	if _, _, ok, _ := r.c.Lookup(ctx, other, false); ok {
		t.Fatal("another device's command was answered")
	}
	r.failing = true
	if _, _, ok, _ := r.c.Lookup(ctx, lamp("turn on the lights"), false); ok {
		t.Fatal("a failing tool's remembered reply was given")
	}
	r.failing = false
	r.clk.Advance(2 * time.Hour)
	if _, _, ok, _ := r.c.Lookup(ctx, lamp("turn on the lights"), false); ok {
		t.Fatal("an expired entry answered")
	}
	r.learn(t, lamp("turn on the lights"), "lights_on", `{"room":"office"}`, "ok", "Lights on.")
	r.toolSet = "v2" // a tool changed
	if _, _, ok, _ := r.c.Lookup(ctx, lamp("turn on the lights"), false); ok {
		t.Fatal("an entry of the old tool set answered")
	}
	// The device's next remembered command drops the stale entry.
	r.learn(t, lamp("how warm is it"), "room_temp", `{}`, "21°C", "21°C.")
	if list, _ := r.c.List(ctx); len(list) != 1 || list[0].Tool != "room_temp" {
		t.Fatalf("stale entries kept: %+v", list)
	}
}

// A read-only tool: an unchanged result gives the remembered reply, a
// changed one quoted in the reply is replaced, one the reply cannot show
// goes to the model — unless the model is down, then the result is the
// reply.
func TestCommandCacheReadOnly(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.learn(t, lamp("how warm is it"), "room_temp", `{}`, "21°C", "It is 21°C in the office.")
	if ans, _, ok, _ := r.c.Lookup(ctx, lamp("how warm is it"), false); !ok || ans.Reply != "It is 21°C in the office." {
		t.Fatalf("unchanged: %+v", ans)
	}
	r.results["room_temp"] = "23°C"
	if ans, _, ok, _ := r.c.Lookup(ctx, lamp("how warm is it"), false); !ok || ans.Reply != "It is 23°C in the office." {
		t.Fatalf("changed: %+v", ans)
	}
	r.learn(t, lamp("is it comfortable in here"), "room_temp", `{}`, "23°C", "Yes, quite comfortable.")
	r.results["room_temp"] = "30°C"
	if _, _, ok, _ := r.c.Lookup(ctx, lamp("is it comfortable in here"), false); ok {
		t.Fatal("a stale judgement was given for a new reading")
	}
	if ans, _, ok, _ := r.c.Lookup(ctx, lamp("is it comfortable in here"), true); !ok || ans.Reply != "30°C" {
		t.Fatalf("model down: %+v", ans)
	}
}

// Only one successful call of a tool safe to repeat with a short reply is
// remembered; owners list and clear entries.
func TestCommandCacheLearnsOnlyWhatIsSafe(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	learn := func(text string, steps []Step, reply string) {
		_, p, _, _ := r.c.Lookup(ctx, lamp(text), false)
		if err := r.c.Learn(ctx, lamp(text), p, steps, reply); err != nil {
			t.Fatal(err)
		}
	}
	learn("wipe the disk", []Step{{Tool: "wipe", Args: `{}`, Result: "done"}}, "Done.")
	learn("lights and heat", []Step{{Tool: "lights_on", Args: `{}`}, {Tool: "room_temp", Args: `{}`}}, "Done.")
	learn("lights please", []Step{{Tool: "lights_on", Args: `{}`, Failed: true}}, "Sorry.")
	learn("lights now", []Step{{Tool: "lights_on", Args: `{}`}}, strings.Repeat("long ", 100))
	learn("chat with me", nil, "Sure.")
	if list, _ := r.c.List(ctx); len(list) != 0 {
		t.Fatalf("remembered %+v", list)
	}
	learn("lights on", []Step{{Tool: "lights_on", Args: `{"room":"a"}`, Result: "ok"}}, "On.")
	learn("temperature", []Step{{Tool: "room_temp", Args: `{}`, Result: "21°C"}}, "21°C.")
	list, err := r.c.List(ctx)
	if err != nil || len(list) != 2 || list[0].Tool != "lights_on" || list[0].Device != "lamp-1" {
		t.Fatalf("list %+v %v", list, err)
	}
	if n, _ := r.c.Clear(ctx, list[0].ID); n != 1 {
		t.Fatal("clear one")
	}
	if n, _ := r.c.Clear(ctx, 0); n != 1 {
		t.Fatal("clear all")
	}
}

// The numbers and on/off words of two utterances must match for one to be
// answered like the other, in English and in Chinese.
func TestSameSlots(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"turn on the lights", "turn on the light", true},
		{"turn on the lights", "turn off the lights", false},
		{"set the thermostat to 21 degrees", "set the thermostat to 21.0 degrees", false},
		{"set the thermostat to 21 degrees", "thermostat to 21 degrees please", true},
		{"打开客厅的灯", "打开客厅灯", true},
		{"打开客厅的灯", "关闭客厅的灯", false},
		{"空调调到二十六度", "空调调到二十五度", false},
		{"volume up", "volume down", false},
		{"don't turn on the fan", "turn on the fan", false},
	} {
		if got := sameSlots(c.a, c.b); got != c.same {
			t.Errorf("sameSlots(%q, %q) = %v (slots %q / %q)", c.a, c.b, got, slots(c.a), slots(c.b))
		}
	}
}
