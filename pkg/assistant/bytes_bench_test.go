package assistant

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/embed"
	"agent/pkg/embed/embedtest"
	"agent/pkg/llm/llmtest"
	"agent/pkg/sandbox/sandboxtest"
)

// conversation6 is a realistic WeCom exchange: each turn with the tool the
// model wants for it ("" for none).
var conversation6 = []struct{ text, tool, args string }{
	{"hello", "", ""},
	{"what's the weather in Shanghai tomorrow?", "web_search", `{"query":"Shanghai weather tomorrow"}`},
	{"remind me at 8 tomorrow morning to bring an umbrella", "schedule", `{"at":"2026-12-03T08:00","text":"Bring an umbrella"}`},
	{"summarise report.pdf in my folder", "read_document", `{"path":"report.pdf"}`},
	{"what reminders do I have?", "list_schedules", `{}`},
	{"thanks, bye", "", ""},
}

// bytesModel plays the model of conversation6: it calls the turn's tool
// when offered, asks find_tools for it when not, and answers after a tool
// result. finds counts the find_tools calls.
func bytesModel(finds *int) func(*llmtest.Request) llmtest.Reply {
	return func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		if last.Role == "tool" && !strings.HasPrefix(last.Content, "Available now") {
			return llmtest.Text("Done: " + strings.SplitN(last.Content, "\n", 2)[0])
		}
		user := r.LastUser()
		for _, c := range conversation6 {
			if c.text != user || c.tool == "" {
				continue
			}
			if slices.Contains(r.ToolNames(), c.tool) {
				return llmtest.Calls(llmtest.Call(c.tool, c.args))
			}
			*finds++
			b, _ := json.Marshal(map[string]string{"query": c.tool})
			return llmtest.Calls(llmtest.Call("find_tools", string(b)))
		}
		return llmtest.Text("Hello! How can I help?")
	}
}

// BenchmarkRequestBytes measures what a WeCom user's turns send to the
// model with every built-in tool of the day (the sandbox's, web search on
// two engines, web_fetch, memory, schedules, runtime tools, skills) and
// two MCP servers (the reference "everything" and "filesystem"), the
// bundled prompt files and the embedding model (random weights) loaded:
// bytes of the "hello" request, of all requests of conversation6, the
// same with every tool offered (what was sent before tools were chosen),
// and how often the model had to call find_tools.
func BenchmarkRequestBytes(b *testing.B) {
	sandboxtest.New(b, nil)
	root, _ := filepath.Abs("../..")
	everything := filepath.Join(root, ".deps", "mcp", "node_modules", ".bin", "mcp-server-everything")
	files := filepath.Join(root, ".deps", "mcp", "node_modules", ".bin", "mcp-server-filesystem")
	if _, err := os.Stat(everything); err != nil {
		b.Skip("reference MCP servers not installed (scripts/mcp-servers.sh)")
	}
	finds := 0
	srv := llmtest.NewFunc(b, bytesModel(&finds))
	dir := sandboxtest.Dir(b)
	cfg := config.Default()
	cfg.Agent.StateDir = filepath.Join(dir, "var")
	cfg.Agent.Workspace = filepath.Join(dir, "ws")
	if err := os.CopyFS(cfg.Agent.Workspace, os.DirFS(filepath.Join(root, "workspace"))); err != nil {
		b.Fatal(err)
	}
	cfg.LLM.Provider, cfg.LLM.BaseURL, cfg.LLM.Model = "custom", srv.BaseURL(), "main"
	cfg.Security.DMPolicy = "open"
	cfg.Web.Engines = []string{"searxng", "tavily"}
	cfg.Web.SearXNGBaseURL, cfg.Web.TavilyAPIKey = "http://127.0.0.1:9", "tvly-test"
	cfg.MCPServers = map[string]config.MCPServer{
		"everything": {Transport: "stdio", Command: everything},
		"files":      {Transport: "stdio", Command: files, Args: []string{dir}},
	}
	a, err := New(cfg, Deps{Store: testStore(b, cfg), SysRoot: "/nonexistent", Bwrap: ""})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close(context.Background()) })
	ctx := context.Background()
	if err := a.Start(ctx); err != nil {
		b.Fatal(err)
	}
	a.StartSandbox()
	<-a.SandboxReady()
	if m := filepath.Join(root, "testdata", "models", "bge-small-random"); fileExists(filepath.Join(m, "model.onnx")) {
		e, err := embed.New(embed.Config{ModelDir: m, LibraryPath: embedtest.ORTLibrary(b)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		a.SetEmbedder(ctx, e, "bench")
	}
	deadline := time.Now().Add(60 * time.Second)
	for !hasPrefix(a, "everything__") || !hasPrefix(a, "files__") {
		if time.Now().After(deadline) {
			b.Fatal("the MCP servers' tools did not appear")
		}
		time.Sleep(50 * time.Millisecond)
	}
	all, _ := json.Marshal(a.reg.Specs("wecom"))
	var hello, convo, convoAll, requests float64
	finds = 0
	b.ResetTimer()
	for i := range b.N {
		user := fmt.Sprintf("user%d", i)
		for j, c := range conversation6 {
			n0 := srv.Count()
			if _, err := a.Ask(ctx, conversation.Inbound{Channel: "wecom", Sender: user, Text: c.text}); err != nil {
				b.Fatal(err)
			}
			for k := n0; k < srv.Count(); k++ {
				r := srv.Request(k)
				n := float64(len(r.Body))
				sent, _ := json.Marshal(r.JSON["tools"])
				if r.JSON["tools"] == nil {
					sent = nil
				}
				if j == 0 && k == n0 {
					hello += n
				}
				convo += n
				convoAll += n - float64(len(sent)) + float64(len(all))
				requests++
			}
		}
	}
	b.StopTimer()
	nb := float64(b.N)
	b.ReportMetric(hello/nb, "B/hello")
	b.ReportMetric(convo/nb, "B/6-turns")
	b.ReportMetric(convoAll/nb, "B/6-turns-all-tools")
	b.ReportMetric(requests/nb, "requests/6-turns")
	b.ReportMetric(float64(finds)/nb, "find_tools/6-turns")
	b.ReportMetric(float64(len(a.reg.List("wecom"))), "tools")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func hasPrefix(a *Assistant, prefix string) bool {
	for _, t := range a.reg.List("") {
		if strings.HasPrefix(t.Name, prefix) {
			return true
		}
	}
	return false
}
