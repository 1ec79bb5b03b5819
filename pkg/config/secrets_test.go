package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// parseIn writes nothing itself: it parses text with dir as the base.
func parseIn(dir, text string, env map[string]string) (*Config, []Warning, error) {
	return Parse("config.toml", []byte(text), dir, mapEnv(env))
}

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "secrets", "openai"), "sk-from-file\n")
	writeFile(t, filepath.Join(dir, "secrets", "corp"), "corp-secret-from-file \r\n\t")
	writeFile(t, filepath.Join(dir, "secrets", "wtoken"), "wecom-token-file")
	writeFile(t, filepath.Join(dir, "secrets", "aes"), "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C\n")
	abs := filepath.Join(dir, "secrets", "voice")
	writeFile(t, abs, "voice-token-from-file-0123\n")

	cfg, warns, err := parseIn(dir, `
[llm]
api_key_file = "secrets/openai"
[wecom]
enabled = true
corp_id = "wx1"
corp_secret_file = "./secrets/corp"
agent_id = 5
token_file = "${SECRETS}/wtoken"
encoding_aes_key_file = "secrets/aes"
[voice]
token_file = "`+abs+`"
`, map[string]string{"SECRETS": filepath.Join(dir, "secrets")})
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %s", warningsString(warns))
	}
	for _, c := range []struct{ key, got, want string }{
		{"llm.api_key", cfg.LLM.APIKey, "sk-from-file"},
		{"wecom.corp_secret", cfg.WeCom.CorpSecret, "corp-secret-from-file"},
		{"wecom.token", cfg.WeCom.Token, "wecom-token-file"},
		{"wecom.encoding_aes_key", cfg.WeCom.EncodingAESKey, "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"},
		{"voice.token", cfg.Voice.Token, "voice-token-from-file-0123"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.key, c.got, c.want)
		}
	}
}

func TestSecretFileProblems(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "key"), "sk-x")
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "huge"), strings.Repeat("x", maxSecretSize+1))
	tests := []struct {
		name   string
		toml   string
		key    string
		reason []string
	}{
		{"both set", "[llm]\napi_key = \"sk-inline\"\napi_key_file = \"key\"", "llm.api_key", []string{"set either api_key or api_key_file, not both"}},
		{"both set, voice", "[voice]\ntoken = \"\"\ntoken_file = \"key\"", "voice.token", []string{"not both"}},
		{"missing file", "[llm]\napi_key_file = \"nope\"", "llm.api_key_file",
			[]string{"cannot read secret file", filepath.Join(dir, "nope"), "no such file or directory"}},
		{"directory", "[llm]\napi_key_file = \"adir\"", "llm.api_key_file", []string{"is a directory"}},
		{"too large", "[llm]\napi_key_file = \"huge\"", "llm.api_key_file", []string{"larger than 64 KiB"}},
		{"empty name", "[llm]\napi_key_file = \"\"", "llm.api_key_file", []string{"empty file name"}},
		{"not a string", "[llm]\napi_key_file = 5", "llm.api_key_file", []string{"must be a string"}},
		{"enabled wecom reads", strings.Replace(validWeCom, `token = "QDG6eK"`, `token_file = "nope"`, 1), "wecom.token_file", []string{"cannot read secret file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseIn(dir, tt.toml, nil)
			ce, ok := err.(*Error)
			if !ok || len(ce.Problems) != 1 {
				t.Fatalf("error = %v, want one problem", err)
			}
			p := ce.Problems[0]
			if p.Key != tt.key || p.Line == 0 {
				t.Errorf("problem at %q line %d, want %q with a line", p.Key, p.Line, tt.key)
			}
			for _, r := range tt.reason {
				if !strings.Contains(p.Reason, r) {
					t.Errorf("reason %q lacks %q", p.Reason, r)
				}
			}
		})
	}

	// A disabled section's secret files are not read.
	if _, _, err := parseIn(dir, "[wecom]\nenabled = false\ntoken_file = \"nope\"\n[voice]\nenabled = false\ntoken_file = \"nope\"", nil); err != nil {
		t.Errorf("disabled sections: %v", err)
	}
	// An empty file is a warning, not a problem.
	writeFile(t, filepath.Join(dir, "empty"), "\n")
	_, warns, err := parseIn(dir, "[llm]\napi_key_file = \"empty\"", nil)
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := findWarning(warns, "llm.api_key_file"); !ok || !strings.Contains(w.Message, "is empty") {
		t.Errorf("empty secret file: warnings %s", warningsString(warns))
	}
}

// "${VAR}" as a whole secret value honours VAR_FILE (docker/systemd style).
func TestSecretEnvFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "creds", "openai"), "sk-env-file\n")
	tests := []struct {
		name    string
		toml    string
		env     map[string]string
		want    string
		problem string
	}{
		{"VAR_FILE absolute", `api_key = "${OPENAI_API_KEY}"`,
			map[string]string{"OPENAI_API_KEY_FILE": filepath.Join(dir, "creds", "openai")}, "sk-env-file", ""},
		{"VAR_FILE relative to the config", `api_key = "${OPENAI_API_KEY}"`,
			map[string]string{"OPENAI_API_KEY_FILE": "creds/openai"}, "sk-env-file", ""},
		{"VAR wins when no VAR_FILE", `api_key = "${OPENAI_API_KEY}"`,
			map[string]string{"OPENAI_API_KEY": "sk-env"}, "sk-env", ""},
		{"empty VAR_FILE is ignored", `api_key = "${OPENAI_API_KEY}"`,
			map[string]string{"OPENAI_API_KEY": "sk-env", "OPENAI_API_KEY_FILE": ""}, "sk-env", ""},
		{"both set", `api_key = "${OPENAI_API_KEY}"`,
			map[string]string{"OPENAI_API_KEY": "sk-env", "OPENAI_API_KEY_FILE": "creds/openai"}, "", "both OPENAI_API_KEY and OPENAI_API_KEY_FILE"},
		{"VAR_FILE missing", `api_key = "${OPENAI_API_KEY}"`,
			map[string]string{"OPENAI_API_KEY_FILE": "creds/none"}, "", "$OPENAI_API_KEY_FILE"},
		{"only for a whole value", `api_key = "sk-${OPENAI_API_KEY}"`,
			map[string]string{"OPENAI_API_KEY_FILE": "creds/openai"}, "sk-", ""},
		{"only for secrets", "voice_model = \"${MODEL}\"\napi_key = \"k\"",
			map[string]string{"MODEL_FILE": "creds/openai"}, "k", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := parseIn(dir, "[llm]\n"+tt.toml, tt.env)
			if tt.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tt.problem) || !strings.Contains(err.Error(), "llm.api_key") {
					t.Errorf("error = %v, want %q at llm.api_key", err, tt.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.LLM.APIKey != tt.want {
				t.Errorf("api_key = %q, want %q", cfg.LLM.APIKey, tt.want)
			}
			if cfg.LLM.VoiceModel != "" {
				t.Errorf("voice_model = %q, want \"\" (MODEL_FILE must not be read)", cfg.LLM.VoiceModel)
			}
		})
	}
}

func TestSecretFileFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	_, _, err := parseIn(dir, "[llm]\napi_key_file = \"fifo\"", nil)
	if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("FIFO secret: %v", err)
	}
}
