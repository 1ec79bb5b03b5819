package daemon

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"agent/pkg/admin"
	"agent/pkg/channel/builtin"
	"agent/pkg/config"
	"agent/pkg/embed/embedtest"
	"agent/pkg/llm/llmtest"
	"agent/pkg/localmodels"
)

// cacheRig is a daemon with the embedding model loaded (the generated
// random-weight one, mean pooled so texts differ), a voice token, and an
// MCP server whose lights_on tool says it is idempotent.
type cacheRig struct {
	addr, sock string
	llm        *llmtest.Server
	lightsRuns atomic.Int32
	stop       func()
}

func newCacheRig(t testing.TB) *cacheRig {
	r := &cacheRig{}
	ms := mcp.NewServer(&mcp.Implementation{Name: "home", Version: "1"}, nil)
	mcp.AddTool(ms, &mcp.Tool{Name: "lights_on", Description: "Turns the lights on in a room.", Annotations: &mcp.ToolAnnotations{IdempotentHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct {
			Room string `json:"room"`
		}) (*mcp.CallToolResult, any, error) {
			r.lightsRuns.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil))
	t.Cleanup(hs.Close)
	r.llm = llmtest.NewFunc(t, func(req *llmtest.Request) llmtest.Reply {
		if last := req.Last(); last.Role == "tool" {
			return llmtest.Text("Lights on in the office.")
		}
		return llmtest.Calls(llmtest.Call("home__lights_on", `{"room":"office"}`))
	})
	lib := embedtest.ORTLibrary(t)
	model := filepath.Join(t.TempDir(), "model")
	if err := embedtest.Ensure(model, embedtest.Tiny(), 7); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r.sock = filepath.Join(dir, "var", "agent.sock")
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte(fmt.Sprintf(`[server]
listen = "127.0.0.1:0"
[agent]
state_dir = "var"
workspace = "ws"
[llm]
provider = "custom"
model = "fake"
base_url = %q
[embedding]
model_dir = %q
onnxruntime_lib = %q
pooling = "mean"
threads = 1
[asr]
model = "/nonexistent.bin"
[voice]
token = "cache-token-0123456789"
command_cache_threshold = 0.98
[security]
dm_policy = "open"
[mcp_servers.home]
transport = "http"
url = %q
`, r.llm.BaseURL(), model, lib, hs.URL+"/mcp")), 0o600)
	cfg, _, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNotifier(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	models := &localmodels.Set{}
	go func() {
		done <- Run(ctx, Options{Config: cfg, Notifier: n, Channels: builtin.Channels(), Models: models})
	}()
	r.stop = func() { cancel(); <-done }
	t.Cleanup(r.stop)
	waitNotify(t, n, "local models ready")
	if models.Embedder() == nil {
		t.Fatal("the embedding model did not load")
	}
	n.mu.Lock()
	ready := n.msgs[0]
	n.mu.Unlock()
	r.addr = strings.TrimSpace(ready[strings.Index(ready, "serving on ")+len("serving on "):])
	// The MCP server's tools are offered once it is connected.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ts, err := admin.NewClient(r.sock).Tools(context.Background())
		if err == nil && strings.Contains(fmt.Sprint(ts), "home__lights_on") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MCP tool never came: %v %v", ts, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// device opens a hardware connection for device.
func (r *cacheRig) device(t testing.TB, device string) *websocket.Conn {
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+r.addr+"/voice", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	ws.WriteJSON(map[string]any{"type": "hello", "token": "cache-token-0123456789", "user": "office", "device": device, "profile": "hardware",
		"sample_rate": 16000, "protocol": "agent.voice.v1", "tts": false})
	if m := benchFrame(t, ws); m["type"] != "ready" {
		t.Fatalf("hello answered %v", m)
	}
	return ws
}

// say sends a text command and returns the final reply.
func say(t testing.TB, ws *websocket.Conn, text string) string {
	if err := ws.WriteJSON(map[string]string{"type": "text", "text": text}); err != nil {
		t.Fatal(err)
	}
	for {
		m := benchFrame(t, ws)
		if m["type"] == "error" {
			return "error: " + fmt.Sprint(m["message"])
		}
		if m["type"] == "reply" && m["final"] == true {
			s, _ := m["text"].(string)
			return s
		}
	}
}

// Through the daemon: a hardware command answered by one idempotent MCP
// call is remembered; a near repeat from the same device runs the tool
// again and is answered without the model, also with the model
// unreachable; another device asks the model; agentctl cache lists and
// clears the entry.
func TestCommandCacheThroughDaemon(t *testing.T) {
	r := newCacheRig(t)
	lamp := r.device(t, "lamp-1")
	if got := say(t, lamp, "turn on the lights"); got != "Lights on in the office." {
		t.Fatalf("first command: %q", got)
	}
	calls := r.llm.Count()
	if got := say(t, lamp, "turn on the light"); got != "Lights on in the office." {
		t.Fatalf("near repeat: %q", got)
	}
	if r.llm.Count() != calls || r.lightsRuns.Load() != 2 {
		t.Fatalf("model calls %d (want %d), tool runs %d (want 2)", r.llm.Count(), calls, r.lightsRuns.Load())
	}
	r.llm.Refuse()
	if got := say(t, lamp, "turn on the lights"); got != "Lights on in the office." || r.lightsRuns.Load() != 3 {
		t.Fatalf("with the model down: %q (tool runs %d)", got, r.lightsRuns.Load())
	}
	desk := r.device(t, "desk-2")
	if got := say(t, desk, "turn on the lights"); got == "Lights on in the office." {
		t.Fatal("another device was answered from lamp-1's cache")
	}
	r.llm.Accept()
	c := admin.NewClient(r.sock)
	list, err := c.Cache(context.Background())
	if err != nil || len(list) != 1 || list[0].Device != "lamp-1" || list[0].Tool != "home__lights_on" || list[0].Hits != 2 {
		t.Fatalf("cache list: %+v %v", list, err)
	}
	if n, err := c.ClearCache(context.Background(), 0); err != nil || n != 1 {
		t.Fatalf("clear: %d %v", n, err)
	}
	calls = r.llm.Count()
	say(t, lamp, "turn on the light")
	if r.llm.Count() == calls {
		t.Fatal("answered from a cleared cache")
	}
}
