package daemon

// Skills restricted to some users ([skills.entries.NAME] users):
// what a user who is not among them still gets, through the real daemon.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agent/pkg/sandbox/sandboxtest"
)

// A skill limited to wecom:boss is still in every user's system prompt
// (the index is not filtered by users), and a workspace skill's
// instructions are read with read_file skills/NAME/SKILL.md by anyone,
// past get_skill's users check. The credentials themselves stay out of
// reach (exec with the skill is refused: guarded here too).
func TestAttackRestrictedSkillVisibleToOthers(t *testing.T) {
	sandboxtest.New(t, nil) // bwrap required
	llmSrv := skillLLM(t)
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

	say := voiceUser(t, addr, "alice")
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
