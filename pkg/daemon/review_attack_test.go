package daemon

// Review of skills restricted to some users ([skills.entries.NAME] users):
// what a user who is not among them still gets, through the real daemon.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"agent/pkg/llm/llmtest"
	"agent/pkg/sandbox/sandboxtest"
)

// A skill limited to wecom:boss is still in every user's system prompt
// (the index is not filtered by users), and a workspace skill's
// instructions are read with read_file skills/NAME/SKILL.md by anyone,
// past get_skill's users check. The credentials themselves stay out of
// reach (exec with the skill is refused: guarded here too).
func TestAttackRestrictedSkillVisibleToOthers(t *testing.T) {
	sandboxtest.New(t, nil) // bwrap required
	llmSrv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.Last()
		if last.Role != "user" {
			return llmtest.Text("RESULT: " + last.Content)
		}
		f := strings.SplitN(last.Content, " ", 3)
		switch {
		case f[0] == "INDEX":
			sys := r.Messages[0].Content
			i := strings.Index(sys, "## Skills")
			if i < 0 {
				return llmtest.Text("NO INDEX")
			}
			return llmtest.Text(sys[i:])
		case f[0] == "READ" && len(f) == 2:
			b, _ := json.Marshal(map[string]string{"path": f[1]})
			return llmtest.Calls(llmtest.Call("read_file", string(b)))
		case f[0] == "GET" && len(f) == 2:
			return llmtest.Calls(llmtest.Call("get_skill", `{"name":"`+f[1]+`"}`))
		case f[0] == "RUN" && len(f) == 3:
			b, _ := json.Marshal(map[string]string{"command": f[2], "skill": f[1]})
			return llmtest.Calls(llmtest.Call("exec", string(b)))
		}
		return llmtest.Text("?")
	})
	dir := sandboxtest.Dir(t)
	putSkill(t, filepath.Join(dir, "ws", "skills"), "payroll", "Runs PAYROLL-CONFIDENTIAL salary exports.",
		"# Payroll\nThe HR-ONLY-INSTRUCTIONS: bank endpoint and steps.\n", map[string]string{"scripts/run.sh": "cat /secrets/payroll.key"})
	key := filepath.Join(dir, "payroll.key")
	if err := os.WriteFile(key, []byte("pk-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf("[llm]\nprovider = \"custom\"\nmodel = \"fake\"\nbase_url = %q\n[voice]\ntoken = \"device-secret-0123456789\"\n[security]\ndm_policy = \"open\"\n[sandbox]\ntimeout = \"20s\"\n"+
		"[skills.entries.payroll]\nusers = [\"wecom:boss\"]\nfiles = { \"/secrets/payroll.key\" = %q }\n", llmSrv.BaseURL(), key)
	addr, stop := startDaemonIn(t, dir, extra)
	defer stop()
	waitSandbox(t, addr)

	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/voice", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ws.WriteJSON(map[string]any{"type": "hello", "token": "device-secret-0123456789", "device": "desk", "user": "alice", "profile": "voice"})
	if m := readFrame(t, ws); m["type"] != "ready" {
		t.Fatalf("hello: %v", m)
	}
	say := func(text string) string {
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
	// Guards: the gate itself holds.
	if got := say("GET payroll"); !strings.Contains(got, "not available to you") {
		t.Fatalf("get_skill by alice: %q", got)
	}
	if got := say("RUN payroll cat /secrets/payroll.key"); strings.Contains(got, "pk-SECRET") {
		t.Fatalf("alice read the restricted skill's credential: %q", got)
	}
	// The leaks.
	if got := say("INDEX"); strings.Contains(got, "PAYROLL-CONFIDENTIAL") {
		t.Errorf("alice's system prompt lists the skill limited to wecom:boss: %q", got)
	}
	if got := say("READ skills/payroll/SKILL.md"); strings.Contains(got, "HR-ONLY-INSTRUCTIONS") {
		t.Errorf("alice read the restricted skill's SKILL.md with read_file: %q", got)
	}
}
