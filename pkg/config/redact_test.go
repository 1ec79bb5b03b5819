package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// Distinctive secret values: none may appear in Redacted().
var testSecrets = map[string]string{
	"OPENAI":   "sk-SECRET-openai-4f1d",
	"CORP":     "SECRET-corp-secret-9a8b",
	"WTOKEN":   "SECRET-wecom-token",
	"AES":      "SECRETaeskey0123456789abcdefghijklmnopqrstu", // 43 characters
	"VOICE":    "SECRET-voice-token-77c1",
	"MCPENV":   "SECRET-mcp-env-value",
	"MCPHDR":   "Bearer SECRET-mcp-header",
	"URLPASS":  "SECRET-url-password",
	"PROXYPWD": "SECRET-proxy-pwd",
}

const fullConfig = `
[agent]
name = "Xiao Wang"
timezone = "Asia/Shanghai"
owners = ["wecom:zhangsan"]
[server]
listen = "0.0.0.0:8080"
[llm]
provider = "custom"
base_url = "https://user:${PROXYPWD}@llm.example.com/v1"
api_key = "${OPENAI}"
model = "m"
vision = true
[wecom]
enabled = true
corp_id = "wx5823bf96d3bd56c7"
corp_secret = "${CORP}"
agent_id = 1000002
token = "${WTOKEN}"
encoding_aes_key = "${AES}"
debounce = "2500ms"
[voice]
token = "${VOICE}"
[mcp_servers.files]
command = "npx"
args = ["-y", "server-filesystem"]
env = { API_TOKEN = "${MCPENV}", EMPTY = "" }
[mcp_servers.search]
url = "https://bot:${URLPASS}@mcp.example.com/mcp"
headers = { Authorization = "${MCPHDR}" }
`

func TestRedactedHidesSecrets(t *testing.T) {
	cfg, _, _ := mustParse(t, fullConfig, testSecrets)
	out := cfg.Redacted()
	for name, secret := range testSecrets {
		if strings.Contains(out, secret) {
			t.Errorf("Redacted() contains secret %s %q:\n%s", name, secret, out)
		}
	}
	if strings.Contains(out, "SECRET") {
		t.Errorf("Redacted() contains part of a secret:\n%s", out)
	}
	for _, want := range []string{`api_key = "***"`, `token = "***"`, `EMPTY = ""`, `API_TOKEN = "***"`, `Authorization = "***"`, `name = "Xiao Wang"`, "user:***@llm.example.com"} {
		if !strings.Contains(out, want) {
			t.Errorf("Redacted() lacks %q:\n%s", want, out)
		}
	}
	// The config itself is untouched.
	if cfg.LLM.APIKey != testSecrets["OPENAI"] || cfg.MCPServers["files"].Env["API_TOKEN"] != testSecrets["MCPENV"] {
		t.Error("Redacted() modified the config")
	}

	// Secrets() lists exactly the secret values, longest first.
	got := cfg.Secrets()
	want := slices.Collect(func(yield func(string) bool) {
		for _, v := range testSecrets {
			if !yield(v) {
				return
			}
		}
	})
	if !reflect.DeepEqual(sortedCopy(got), sortedCopy(want)) {
		t.Errorf("Secrets() = %q\nwant %q", got, want)
	}
	for i := 1; i < len(got); i++ {
		if len(got[i]) > len(got[i-1]) {
			t.Errorf("Secrets() not longest first: %q", got)
		}
	}
	if s := Default().Secrets(); len(s) != 0 {
		t.Errorf("Default().Secrets() = %q, want none", s)
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// Redacted() is TOML that decodes back to the same configuration, with the
// secrets masked.
func TestRedactedRoundTrip(t *testing.T) {
	inputs := map[string]string{
		"default": "",
		"full":    fullConfig,
	}
	for name, text := range inputs {
		t.Run(name, func(t *testing.T) {
			cfg, _, _ := mustParse(t, text, testSecrets)
			cfg.Path = "/etc/agent/config.toml"
			out := cfg.Redacted()

			// Plain TOML decode into the struct.
			var back Config
			md, err := toml.Decode(out, &back)
			if err != nil {
				t.Fatalf("Redacted() is not valid TOML: %v\n%s", err, out)
			}
			if u := md.Undecoded(); len(u) != 0 {
				t.Errorf("Redacted() has keys the struct lacks: %v", u)
			}
			want := cfg.redactedCopy()
			want.Path = ""
			want.loc = nil
			if !reflect.DeepEqual(&back, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", back, *want)
			}

			// And through Parse, when masked values stay valid.
			if name == "default" {
				again, warns, err := Parse("redacted.toml", []byte(out), "/", nil)
				if err != nil {
					t.Fatalf("Parse(Redacted()): %v", err)
				}
				for _, w := range warns {
					if w.Key != "llm.api_key" {
						t.Errorf("Parse(Redacted()) warning: %v", w)
					}
				}
				cfg.Path = ""
				if !reflect.DeepEqual(again, cfg) {
					t.Errorf("Parse(Redacted()):\n got %+v\nwant %+v", again, cfg)
				}
			}
		})
	}
}

func TestRedactedPathComment(t *testing.T) {
	c := Default()
	c.Path = "/tmp/evil\n[llm]\napi_key = \"x\"/config.toml"
	var back map[string]any
	if _, err := toml.Decode(c.Redacted(), &back); err != nil {
		t.Fatalf("a path with newlines broke the output: %v", err)
	}
	if llm := back["llm"].(map[string]any); llm["api_key"] != "" {
		t.Errorf("a path injected a key: %v", llm["api_key"])
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"https://user:pw@host/v1", "https://user:***@host/v1"},
		{"https://user@host/v1", "https://user@host/v1"},
		{"http://:pw@host", "http://:***@host"},
		{"not a url", "not a url"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// A bad URL that carries a password is not quoted in a problem.
	ps := problems(t, "[llm]\nbase_url = \"ftp://u:topsecret@host\"", nil)
	if strings.Contains(ps[0].Reason, "topsecret") {
		t.Errorf("problem quotes a URL password: %q", ps[0].Reason)
	}
}

// Values from the environment may hold bytes TOML cannot: the output stays
// valid TOML.
func TestRedactedInvalidUTF8(t *testing.T) {
	v := "a\xff\x00\x1b\u2028\"'\\z"
	cfg, _, _ := mustParse(t, "[llm]\nvoice_model = \"${V}\"\n[mcp_servers.x]\ncommand = \"c\"\nargs = [\"${V}\"]\nenv = { \"a b\" = \"${V}\" }", map[string]string{"V": v})
	var back Config
	if _, err := toml.Decode(cfg.Redacted(), &back); err != nil {
		t.Fatalf("Redacted() is not TOML: %v", err)
	}
	if want := "a\uFFFD\x00\x1b\u2028\"'\\z"; back.LLM.VoiceModel != want || back.MCPServers["x"].Args[0] != want {
		t.Errorf("voice_model = %q, args = %q, want %q", back.LLM.VoiceModel, back.MCPServers["x"].Args, want)
	}
	if cfg.LLM.VoiceModel != v {
		t.Error("Redacted() modified the config")
	}
}
