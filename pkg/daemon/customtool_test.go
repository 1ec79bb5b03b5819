package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"agent/pkg/admin"
	"agent/pkg/llm/llmtest"
	"agent/pkg/sandbox/sandboxtest"
)

// creatorLLM is a scripted model: "MAKE NAME CODE" creates a Python tool
// NAME whose code is CODE; right after create_tool answers, it calls the
// new tool if the request offers it (the next loop step); "CALL NAME TEXT"
// calls NAME with {"text": TEXT}; a tool's answer is repeated as the reply.
func creatorLLM(t *testing.T) *llmtest.Server {
	t.Helper()
	offered := func(r *llmtest.Request, name string) bool {
		return slices.ContainsFunc(r.Tools, func(tl llmtest.Tool) bool { return tl.Name == name })
	}
	return llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		if last.Role == "user" {
			f := strings.SplitN(last.Content, " ", 3)
			switch {
			case len(f) == 3 && (f[0] == "MAKE" || f[0] == "MAKESH"):
				lang := "python"
				if f[0] == "MAKESH" {
					lang = "sh"
				}
				def, _ := json.Marshal(map[string]any{"name": f[1], "description": "Test tool " + f[1] + ".",
					"parameters": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}},
					"code":       f[2], "language": lang})
				return llmtest.Calls(llmtest.Call("create_tool", string(def)))
			case len(f) == 3 && f[0] == "CALL":
				if !offered(r, f[1]) {
					return llmtest.Text("NOT OFFERED " + f[1])
				}
				b, _ := json.Marshal(map[string]string{"text": f[2]})
				return llmtest.Calls(llmtest.Call(f[1], string(b)))
			}
			return llmtest.Text("?")
		}
		if last.Role == "tool" && strings.HasPrefix(last.Content, "Tool ") && strings.Contains(last.Content, "it is live") {
			name := strings.Fields(last.Content)[1]
			if !offered(r, name) {
				return llmtest.Text("NOT OFFERED AFTER CREATE " + name)
			}
			return llmtest.Calls(llmtest.Call(name, `{"text":"one two three"}`))
		}
		return llmtest.Text("RESULT: " + last.Content)
	})
}

// The whole loop through the real daemon: an owner's tool is created and
// called in the next step of the same turn, survives a restart; a
// non-owner's tool stays pending (not offered, not run) until the
// operator approves it with the admin API agentctl uses.
func TestCustomToolThroughDaemon(t *testing.T) {
	sandboxtest.New(t, nil) // bwrap required
	llmSrv := creatorLLM(t)
	dir := sandboxtest.Dir(t)
	extra := fmt.Sprintf("[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = %q\n[voice]\ntoken = \"device-secret-0123456789\"\n[security]\ndm_policy = \"open\"\n[sandbox]\ntimeout = \"20s\"\n", llmSrv.BaseURL())
	addr, stop := startDaemonIn(t, dir, extra)
	waitSandbox(t, addr)
	ctx := context.Background()
	c := admin.NewClient(filepath.Join(dir, "var", "agent.sock"))

	ask := func(text string) string {
		t.Helper()
		res, err := c.Send(ctx, admin.SendRequest{To: "ops", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(res.Replies, "\n")
	}
	got := ask("MAKE upper def upper(text):\n    return text.upper()\n")
	if got != "RESULT: ONE TWO THREE" {
		t.Fatalf("create then call in the next step: %q", got)
	}
	if got := ask(`MAKESH count printf '%s' "$ARG_text" | wc -w`); got != "RESULT: 3" {
		t.Fatalf("sh tool, created then called: %q", got)
	}
	stop()

	addr, stop = startDaemonIn(t, dir, extra)
	defer stop()
	waitSandbox(t, addr)
	if got := ask("CALL upper after restart"); got != "RESULT: AFTER RESTART" {
		t.Fatalf("after restart: %q", got)
	}
	if got := ask("CALL count four words after restart"); got != "RESULT: 4" {
		t.Fatalf("sh tool after restart: %q", got)
	}

	// A voice user (not an owner) makes a tool: pending.
	say := voiceUser(t, addr, "alice")
	if got := say("MAKE shout import os\ndef shout(text):\n    return text + '!'\n"); !strings.Contains(got, "waits for an owner's approval") {
		t.Fatalf("non-owner's create_tool: %q", got)
	}
	if got := say("CALL shout hello"); got != "NOT OFFERED shout" {
		t.Fatalf("pending tool: %q", got)
	}
	list, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, ct := range list.Custom {
		states = append(states, ct.Name+":"+ct.State+":"+ct.Creator)
	}
	if !slices.Equal(states, []string{"count:live:admin:ops", "shout:pending:voice:alice", "upper:live:admin:ops"}) {
		t.Fatalf("custom tools: %v", states)
	}
	d, err := c.CustomTool(ctx, "shout")
	if err != nil || !strings.Contains(d.Code, "return text + '!'") || d.Version != 1 {
		t.Fatalf("show: %+v, %v", d, err)
	}
	if _, err := c.CustomToolAction(ctx, "upper", "approve", ""); err == nil || !strings.Contains(err.Error(), "no version waiting") {
		t.Fatalf("approving a live tool: %v", err)
	}
	if _, err := c.CustomToolAction(ctx, "shout", "approve", d.Digest); err != nil {
		t.Fatal(err)
	}
	if got := say("CALL shout hello"); got != "RESULT: hello!" {
		t.Fatalf("approved tool: %q", got)
	}
}

// voiceUser connects a voice device (voice.token "device-secret-0123456789")
// as user and returns a function that sends a typed turn and returns the
// final reply.
func voiceUser(t *testing.T, addr, user string) func(text string) string {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	ws.WriteJSON(map[string]any{"type": "hello", "token": "device-secret-0123456789", "device": "desk", "user": user, "profile": "voice"})
	if m := readFrame(t, ws); m["type"] != "ready" {
		t.Fatalf("hello: %v", m)
	}
	return func(text string) string {
		t.Helper()
		ws.WriteJSON(map[string]string{"type": "text", "text": text})
		for {
			m := readFrame(t, ws)
			if m["type"] != "reply" {
				t.Fatalf("got %v", m)
			}
			if m["final"] == true {
				return m["text"].(string)
			}
		}
	}
}
