// Tests of the shell scripts that are small enough to run here.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// voiceToken runs voice-token.sh on a file holding content and returns the
// file afterwards and the script's output.
func voiceToken(t *testing.T, content string) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(path, []byte(content), 0o640); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sh", "voice-token.sh", path).CombinedOutput()
	if err != nil {
		t.Fatalf("voice-token.sh: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(path)
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode changed to %v", st.Mode().Perm())
	}
	return string(b), string(out)
}

var tokenLine = regexp.MustCompile(`(?m)^VOICE_TOKEN=([0-9a-f]{48})$`)

func TestVoiceTokenGenerated(t *testing.T) {
	head := "# Secrets\nOPENAI_API_KEY=sk-x"
	got, out := voiceToken(t, head) // no final newline
	m := tokenLine.FindStringSubmatch(got)
	if m == nil || !strings.HasPrefix(got, head+"\n#") {
		t.Fatalf("file after the script:\n%s", got)
	}
	if strings.Contains(out, m[1]) {
		t.Error("the token was printed")
	}
	// A second install keeps it.
	path := filepath.Join(t.TempDir(), "agent.env")
	os.WriteFile(path, []byte(got), 0o640)
	if out, err := exec.Command("sh", "voice-token.sh", path).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if again, _ := os.ReadFile(path); string(again) != got {
		t.Errorf("second run changed the file:\n%s", again)
	}
	// Two installs get different tokens.
	other, _ := voiceToken(t, "")
	if n := tokenLine.FindStringSubmatch(other); n == nil || n[1] == m[1] {
		t.Errorf("tokens %v and %v", m, n)
	}
}

func TestVoiceTokenNeverOverwritten(t *testing.T) {
	for _, content := range []string{
		"VOICE_TOKEN=chosen-by-the-operator\n",
		"export VOICE_TOKEN=chosen\n",
		"  VOICE_TOKEN=\"quoted\"\n",
	} {
		if got, _ := voiceToken(t, content); got != content {
			t.Errorf("%q became %q", content, got)
		}
	}
	got, out := voiceToken(t, "VOICE_TOKEN=\n")
	if got != "VOICE_TOKEN=\n" || !strings.Contains(out, "empty") {
		t.Errorf("empty token: file %q, output %q; want it kept and reported", got, out)
	}
}

func TestInstallCallsVoiceToken(t *testing.T) {
	b, err := os.ReadFile("install.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"$root/scripts/voice-token.sh" "$etc/agent.env"`) {
		t.Error("install.sh does not give agent.env a voice token")
	}
}
