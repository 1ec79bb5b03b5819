package assistant

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"agent/pkg/config"
	"agent/pkg/conversation"
	"agent/pkg/llm/llmtest"
	"agent/pkg/tools"
)

// [privacy] redact through the whole loop, attacked: a tool outside the
// policy (here a lookup tool standing for exec, web_* or an MCP tool) is
// given the placeholder and its result, holding the number glued to
// letters and in another form, reaches the model as the placeholder;
// write_file gets the real number; the user reads it; and another user
// writing the literal placeholder gets no one's number.
func TestRedactionKeepsPlaceholdersInToolsAcrossTheTurn(t *testing.T) {
	srv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		switch {
		case last.Role == "tool":
			return llmtest.Text("Done, [PHONE_1] is saved.")
		case strings.Contains(last.Content, "look me up"):
			return llmtest.Calls(
				llmtest.Call("lookup", `{"q":"[PHONE_1]"}`),
				llmtest.Call("write_file", `{"path":"me.txt","content":"phone [PHONE_1]"}`))
		}
		return llmtest.Text("[PHONE_1] is what you wrote.")
	})
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Agent.StateDir = filepath.Join(dir, "var")
	cfg.Agent.Workspace = filepath.Join(dir, "ws")
	cfg.LLM.Provider, cfg.LLM.BaseURL, cfg.LLM.Model = "custom", srv.BaseURL(), "main"
	cfg.Security.DMPolicy = "open"
	cfg.Privacy.Redact = []string{"phone", "id_card", "email", "bank_card", "plate"}
	a, err := New(cfg, Deps{Store: testStore(t, cfg), SysRoot: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	var mu sync.Mutex
	var lookedUp []string
	if err := a.Register(tools.Tool{Name: "lookup", Description: "look a number up", Schema: []byte(`{"type":"object"}`),
		Handler: func(_ context.Context, c tools.Call) (string, error) {
			mu.Lock()
			lookedUp = append(lookedUp, string(c.Args))
			mu.Unlock()
			return `{"page":"owner of abc13800138000xyz, also 138-0013-8000; you asked for ` + string(c.Args) + `"}`, nil
		}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ask := func(user, text string) string {
		t.Helper()
		r, err := a.Ask(context.Background(), conversation.Inbound{Channel: "wecom", Sender: user, Text: text})
		if err != nil || len(r) == 0 {
			t.Fatalf("%q: %v %v", text, r, err)
		}
		return r[len(r)-1]
	}
	if got := ask("alice", "my number is 13800138000, look me up"); got != "Done, 13800138000 is saved." {
		t.Errorf("alice read %q", got)
	}
	if len(lookedUp) != 1 || lookedUp[0] != `{"q":"[PHONE_1]"}` {
		t.Errorf("the lookup tool was given %q, want the placeholder", lookedUp)
	}
	var saved string
	filepath.WalkDir(cfg.Agent.Workspace, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "me.txt" {
			b, _ := os.ReadFile(p)
			saved = string(b)
		}
		return nil
	})
	if saved != "phone 13800138000" {
		t.Errorf("write_file wrote %q, want the real number", saved)
	}
	if got := ask("mallory", "what is [PHONE_1]?"); got != "[PHONE_1] is what you wrote." {
		t.Errorf("mallory read %q", got)
	}
	for i, r := range srv.Requests() {
		body := string(r.Body)
		for _, v := range []string{"13800138000", "138-0013-8000"} {
			if strings.Contains(body, v) {
				t.Errorf("request %d sent %q to the model: %s", i, v, body)
			}
		}
	}
	if res := srv.Request(1).Last(); res.Role != "tool" {
		t.Fatalf("second request ends with %+v", res)
	}
}

// The real values go only to the built-in tools that deliver or keep what
// the user asked for; a custom or MCP tool named like one gets nothing.
func TestRedactionRestoresOnlyIntoDeliveringBuiltins(t *testing.T) {
	for tool, want := range map[string]bool{
		"message": true, "send_image": true, "send_file": true, "send_video": true, "send_link": true,
		"schedule": true, "write_file": true,
		"exec": false, "web_fetch": false, "web_search": false, "read_document": false, "read_file": false,
		"edit_file": false, "send_leak": false, "mail__send_mail": false, "send_x__y": false, "": false,
	} {
		if got := restoresValues(tool); got != want {
			t.Errorf("restoresValues(%q) = %v, want %v", tool, got, want)
		}
	}
}
