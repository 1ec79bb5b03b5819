package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestInterpolate(t *testing.T) {
	env := mapEnv(map[string]string{"A": "alpha", "B_2": "beta", "EMPTY": "", "DOLLAR": "${A}", "_x": "u"})
	tests := []struct {
		in, want  string
		wantUnset []string
		wantErr   string
	}{
		{in: "", want: ""},
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha"},
		{in: "x${A}y${B_2}z", want: "xalphaybetaz"},
		{in: "${_x}", want: "u"},
		{in: "${EMPTY}", want: ""},
		{in: "${MISSING}", want: "", wantUnset: []string{"MISSING"}},
		{in: "a${M1}b${M2}", want: "ab", wantUnset: []string{"M1", "M2"}},
		{in: "$${A}", want: "${A}"},
		{in: "$${", want: "${"},
		{in: "cost: $5", want: "cost: $5"},
		{in: "$A", want: "$A"},
		{in: "$$", want: "$$"},
		{in: "trailing $", want: "trailing $"},
		{in: "${DOLLAR}", want: "${A}"}, // substituted text is not expanded again
		{in: "${A}}", want: "alpha}"},
		{in: "${", wantErr: `"${" without a closing "}"`},
		{in: "x ${A", wantErr: `without a closing`},
		{in: "${}", wantErr: "empty variable name"},
		{in: "${1A}", wantErr: `invalid variable name "1A"`},
		{in: "${A-B}", wantErr: `invalid variable name "A-B"`},
		{in: "${A B}", wantErr: "invalid variable name"},
		{in: "${A:-default}", wantErr: "invalid variable name"},
		{in: "${ÄÖ}", wantErr: "invalid variable name"},
	}
	for _, tt := range tests {
		got, unset, err := interpolate(tt.in, env)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("interpolate(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || !reflect.DeepEqual(unset, tt.wantUnset) {
			t.Errorf("interpolate(%q) = %q, %v, %v; want %q, %v", tt.in, got, unset, err, tt.want, tt.wantUnset)
		}
	}
}

// Interpolation happens on decoded values, everywhere strings are, and can
// never inject TOML.
func TestInterpolationInConfig(t *testing.T) {
	env := map[string]string{
		"NAME":    "Xiao Wang",
		"TZ_NAME": "Asia/Shanghai",
		"OWNER":   "zhangsan",
		"TOKEN":   "tok-123",
		"INJECT":  "x\"\n[llm]\nprovider = \"evil",
		"TIMEOUT": "90s",
		"PORT":    "9090",
	}
	cfg, warns, _ := mustParse(t, `
[agent]
name = "${NAME}"
timezone = "${TZ_NAME}"
owners = ["wecom:${OWNER}", "voice:$${literal}"]
[server]
listen = "127.0.0.1:${PORT}"
[llm]
voice_model = "${INJECT}"
timeout = "${TIMEOUT}"
[mcp_servers.s]
command = "srv"
args = ["--token", "${TOKEN}"]
env = { T = "${TOKEN}", LIT = "$${TOKEN}" }
[mcp_servers.h]
url = "http://127.0.0.1:${PORT}/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }
`, env)
	checks := []struct {
		name      string
		got, want any
	}{
		{"name", cfg.Agent.Name, "Xiao Wang"},
		{"timezone", cfg.Location().String(), "Asia/Shanghai"},
		{"owners", cfg.Agent.Owners, []string{"wecom:zhangsan", "voice:${literal}"}},
		{"listen", cfg.Server.Listen, "127.0.0.1:9090"},
		{"voice_model", cfg.LLM.VoiceModel, env["INJECT"]},
		{"provider untouched", cfg.LLM.Provider, "openai"},
		{"timeout", cfg.LLM.Timeout.String(), "1m30s"},
		{"args", cfg.MCPServers["s"].Args, []string{"--token", "tok-123"}},
		{"env", cfg.MCPServers["s"].Env, map[string]string{"T": "tok-123", "LIT": "${TOKEN}"}},
		{"url", cfg.MCPServers["h"].URL, "http://127.0.0.1:9090/mcp"},
		{"headers", cfg.MCPServers["h"].Headers, map[string]string{"Authorization": "Bearer tok-123"}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	for _, w := range warns {
		if w.Key != "llm.api_key" {
			t.Errorf("unexpected warning %v", w)
		}
	}
}

func TestInterpolationMalformed(t *testing.T) {
	tests := []struct{ toml, key string }{
		{"[agent]\nname = \"${NAME\"", "agent.name"},
		{"[agent]\nowners = [\"wecom:a\", \"wecom:${1X}\"]", "agent.owners[1]"},
		{"[mcp_servers.a]\ncommand = \"x\"\nenv = { K = \"${}\" }", "mcp_servers.a.env.K"},
		{"[mcp_servers.a]\ncommand = \"x\"\nargs = [\"${A-B}\"]", "mcp_servers.a.args[0]"},
		{"[llm]\ntimeout = \"${T\"", "llm.timeout"},
		{"[llm]\napi_key = \"sk-${\"", "llm.api_key"},
	}
	for _, tt := range tests {
		ps := problems(t, tt.toml, nil)
		if len(ps) != 1 || ps[0].Key != tt.key || ps[0].Line == 0 {
			t.Errorf("%q: problems %+v, want one at %s with a line", tt.toml, ps, tt.key)
		}
		if strings.Contains(ps[0].Reason, "sk-") {
			t.Errorf("problem quotes a secret value: %q", ps[0].Reason)
		}
	}
}

func TestUnsetVariableWarnings(t *testing.T) {
	tests := []struct {
		name     string
		toml     string
		wantKeys []string
	}{
		{"llm always matters", "[llm]\napi_key = \"${K}\"", []string{"llm.api_key"}},
		{"disabled wecom is quiet", "[wecom]\nenabled = false\ncorp_id = \"${C}\"\ntoken = \"${T}\"", []string{"llm.api_key"}},
		{"enabled wecom warns", validWeCom + "api_base = \"https://qyapi.weixin.qq.com${SUFFIX}\"", []string{"llm.api_key", "wecom.api_base"}},
		{"disabled voice is quiet", "[voice]\nenabled = false\ntoken = \"${V}\"", []string{"llm.api_key"}},
		{"loopback voice token may be unset", "[voice]\ntoken = \"${V}\"", []string{"llm.api_key"}},
		{"arrays and maps", "[agent]\nowners = [\"wecom:x${O}\"]\n[mcp_servers.a]\ncommand = \"x\"\nenv = { K = \"${E}\" }",
			[]string{"agent.owners[0]", "llm.api_key", "mcp_servers.a.env.K"}},
		{"set but empty is no warning", "[llm]\nvoice_model = \"${EMPTY}\"", []string{"llm.api_key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, warns, _ := mustParse(t, tt.toml, map[string]string{"EMPTY": ""})
			var keys []string
			for _, w := range warns {
				keys = append(keys, w.Key)
			}
			slices.Sort(keys)
			if strings.Join(keys, " ") != strings.Join(tt.wantKeys, " ") {
				t.Errorf("warnings at %v, want %v:\n%s", keys, tt.wantKeys, warningsString(warns))
			}
		})
	}
	_, warns, _ := mustParse(t, "[llm]\napi_key = \"${OPENAI_API_KEY}\"", nil)
	if w, _ := findWarning(warns, "llm.api_key"); !strings.Contains(w.Message, "OPENAI_API_KEY is not set") || w.Line != 2 {
		t.Errorf("warning = %+v", w)
	}
}

func TestInterpolateLongBadName(t *testing.T) {
	name := strings.Repeat("é", 30) // 60 bytes, cut on a rune boundary
	_, _, err := interpolate("${"+name+"}", nil)
	if err == nil || !strings.Contains(err.Error(), "...") || strings.Contains(err.Error(), name) {
		t.Errorf("error = %v, want the name truncated", err)
	}
	if !utf8.ValidString(err.Error()) {
		t.Errorf("truncation split a rune: %q", err.Error())
	}
}

func TestOSEnv(t *testing.T) {
	t.Setenv("AGENT_CONFIG_TEST_VAR", "v")
	if v, ok := OSEnv("AGENT_CONFIG_TEST_VAR"); !ok || v != "v" {
		t.Errorf("OSEnv = %q, %v", v, ok)
	}
	cfg, _, err := Parse("c.toml", []byte("[agent]\nname = \"${AGENT_CONFIG_TEST_VAR}\""), t.TempDir(), OSEnv)
	if err != nil || cfg.Agent.Name != "v" {
		t.Errorf("Parse with OSEnv: %v, %v", cfg, err)
	}
}
