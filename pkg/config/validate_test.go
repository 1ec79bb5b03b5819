package config

import (
	"strings"
	"testing"
)

// TestValidationRules has one row per rule: the input breaks exactly that
// rule, and the parse must fail with exactly one problem at that key.
func TestValidationRules(t *testing.T) {
	long := "/" + strings.Repeat("s", 120) + "/agent.sock"
	tests := []struct {
		name   string
		toml   string
		key    string
		reason string // substring
	}{
		// [agent]
		{"name empty", "[agent]\nname = \" \"", "agent.name", "must not be empty"},
		{"workspace empty", "[agent]\nworkspace = \"\"", "agent.workspace", "must not be empty"},
		{"state_dir empty", "[agent]\nstate_dir = \"\"", "agent.state_dir", "must not be empty"},
		{"timezone unknown", "[agent]\ntimezone = \"Mars/Olympus\"", "agent.timezone", `unknown time zone "Mars/Olympus"`},
		{"timezone empty", "[agent]\ntimezone = \"\"", "agent.timezone", "must not be empty"},
		{"max_tool_iterations 0", "[agent]\nmax_tool_iterations = 0", "agent.max_tool_iterations", "between 1 and 100"},
		{"max_tool_iterations 101", "[agent]\nmax_tool_iterations = 101", "agent.max_tool_iterations", "not 101"},
		{"disk_reserve_mb negative", "[agent]\ndisk_reserve_mb = -1", "agent.disk_reserve_mb", "not -1"},
		{"disk_reserve_mb past any disk", "[agent]\ndisk_reserve_mb = 9007199254740992", "agent.disk_reserve_mb", "up to 16777216"},
		{"workspace_quota_mb past any disk", "[agent]\nworkspace_quota_mb = 8796093022208", "agent.workspace_quota_mb", "up to 16777216"},
		{"owner without channel", "[agent]\nowners = [\"wecom:a\", \"zhangsan\"]", "agent.owners[1]", `invalid entry "zhangsan"`},
		{"owner without id", "[agent]\nowners = [\"wecom:\"]", "agent.owners[0]", "channel:id"},
		{"owner upper-case channel", "[agent]\nowners = [\"WeCom:a\"]", "agent.owners[0]", "channel:id"},
		{"owner id with space", "[agent]\nowners = [\"wecom:a b\"]", "agent.owners[0]", "channel:id"},
		// [server]
		{"listen without port", "[server]\nlisten = \"localhost\"", "server.listen", "want host:port"},
		{"listen port too big", "[server]\nlisten = \"127.0.0.1:99999\"", "server.listen", "0 to 65535"},
		{"listen named port", "[server]\nlisten = \"127.0.0.1:http\"", "server.listen", "invalid port"},
		{"listen bad host", "[server]\nlisten = \"bad host!:80\"", "server.listen", "invalid address"},
		{"admin_socket too long", "[server]\nadmin_socket = \"" + long + "\"", "server.admin_socket", "longer than a unix socket allows"},
		// [llm]
		{"provider unknown", "[llm]\nprovider = \"gpt\"", "llm.provider", `unknown provider "gpt" (want openai, deepseek, dashscope, ollama, vllm or custom)`},
		{"custom needs base_url", "[llm]\nprovider = \"custom\"\nmodel = \"m\"", "llm.base_url", `required when provider is "custom"`},
		{"base_url not http", "[llm]\nbase_url = \"ftp://example.com/v1\"", "llm.base_url", "invalid URL"},
		{"base_url no host", "[llm]\nbase_url = \"https:///v1\"", "llm.base_url", "invalid URL"},
		{"base_url relative", "[llm]\nbase_url = \"api.openai.com/v1\"", "llm.base_url", "invalid URL"},
		{"base_url fragment", "[llm]\nbase_url = \"https://x.example/v1#frag\"", "llm.base_url", "fragment"},
		{"model required", "[llm]\nprovider = \"deepseek\"", "llm.model", `required when provider is "deepseek"`},
		{"max_tokens 0", "[llm]\nmax_tokens = 0", "llm.max_tokens", "greater than 0"},
		{"timeout 0", "[llm]\ntimeout = \"0s\"", "llm.timeout", "greater than 0"},
		{"timeout negative", "[llm]\ntimeout = \"-1s\"", "llm.timeout", "greater than 0"},
		{"timeout malformed", "[llm]\ntimeout = \"abc\"", "llm.timeout", `invalid duration "abc"`},
		{"timeout integer", "[llm]\ntimeout = 60", "llm.timeout", `must be a duration string such as "60s", not an integer`},
		// [embedding]
		{"model_dir empty", "[embedding]\nmodel_dir = \"\"", "embedding.model_dir", "must not be empty"},
		{"pooling unknown", "[embedding]\npooling = \"max\"", "embedding.pooling", `unknown pooling "max" (want cls or mean)`},
		{"provider unknown", "[embedding]\nprovider = \"npu\"", "embedding.provider", `unknown execution provider "npu" (want cpu, cuda or tensorrt)`},
		{"embedding threads 0", "[embedding]\nthreads = 0", "embedding.threads", "between 1 and 64"},
		{"embedding threads 65", "[embedding]\nthreads = 65", "embedding.threads", "between 1 and 64"},
		// [asr]
		{"asr model empty", "[asr]\nmodel = \"\"", "asr.model", "must not be empty"},
		{"language word", "[asr]\nlanguage = \"english\"", "asr.language", `invalid language "english"`},
		{"language upper-case", "[asr]\nlanguage = \"EN\"", "asr.language", "two-letter"},
		{"language three letters", "[asr]\nlanguage = \"zho\"", "asr.language", "two-letter"},
		{"asr threads 0", "[asr]\nthreads = 0", "asr.threads", "between 1 and 64"},
		{"asr threads 65", "[asr]\nthreads = 65", "asr.threads", "between 1 and 64"},
		{"asr workers -1", "[asr]\nworkers = -1", "asr.workers", "between 0 (automatic) and 16"},
		{"asr workers 17", "[asr]\nworkers = 17", "asr.workers", "not 17"},
		{"asr memory_mb -1", "[asr]\nmemory_mb = -1", "asr.memory_mb", "must not be negative"},
		// [memory]
		{"session_max_messages 0", "[memory]\nsession_max_messages = 0", "memory.session_max_messages", "greater than 0"},
		{"compression_overlap 0", "[memory]\ncompression_overlap = 0", "memory.compression_overlap", "greater than 0"},
		{"overlap not below max", "[memory]\nsession_max_messages = 10\ncompression_overlap = 10", "memory.compression_overlap", "less than memory.session_max_messages (10)"},
		{"dedup 0", "[memory]\ndedup_threshold = 0", "memory.dedup_threshold", "greater than 0 and at most 1"},
		{"dedup above 1", "[memory]\ndedup_threshold = 1.5", "memory.dedup_threshold", "at most 1"},
		{"dedup nan", "[memory]\ndedup_threshold = nan", "memory.dedup_threshold", "at most 1"},
		{"top_k 0", "[memory]\nretrieval_top_k = 0", "memory.retrieval_top_k", "between 1 and 50"},
		{"top_k 51", "[memory]\nretrieval_top_k = 51", "memory.retrieval_top_k", "between 1 and 50"},
		// [security]
		{"dm_policy unknown", "[security]\ndm_policy = \"everyone\"", "security.dm_policy", `unknown policy "everyone" (want pairing, allowlist, open or closed)`},
		{"allow_from entry", "[security]\nallow_from = [\"*\", \"bob\"]", "security.allow_from[1]", `invalid entry "bob"`},
		// [wecom], enabled
		{"wecom corp_id", strings.Replace(validWeCom, `corp_id = "wx5823bf96d3bd56c7"`, "", 1), "wecom.corp_id", "required when wecom.enabled is true"},
		{"wecom corp_secret", strings.Replace(validWeCom, `corp_secret = "s3cr3t-corp"`, `corp_secret = ""`, 1), "wecom.corp_secret", "required"},
		{"wecom agent_id", strings.Replace(validWeCom, `agent_id = 1000002`, `agent_id = 0`, 1), "wecom.agent_id", "greater than 0"},
		{"wecom token", strings.Replace(validWeCom, `token = "QDG6eK"`, ``, 1), "wecom.token", "required"},
		{"wecom aes key missing", strings.Replace(validWeCom, `encoding_aes_key = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"`, ``, 1), "wecom.encoding_aes_key", "required"},
		{"wecom aes key short", strings.Replace(validWeCom, `B2C"`, `B2"`, 1), "wecom.encoding_aes_key", "exactly 43 characters, not 42"},
		{"wecom aes key not base64", strings.Replace(validWeCom, `B2C"`, `B2!"`, 1), "wecom.encoding_aes_key", "not base64"},
		{"wecom api_base", validWeCom + "api_base = \"qyapi.weixin.qq.com\"", "wecom.api_base", "invalid URL"},
		{"wecom debounce negative", validWeCom + "debounce = \"-3s\"", "wecom.debounce", "must not be negative"},
		// [voice]
		{"voice token off loopback", "[server]\nlisten = \"0.0.0.0:8080\"\n[voice]\nenabled = true", "voice.token", `server.listen ("0.0.0.0:8080") is not a loopback address`},
		{"voice token all interfaces", "[server]\nlisten = \":8080\"", "voice.token", "not a loopback address"},
		{"voice vad unknown", "[voice]\nvad = \"webrtc\"", "voice.vad", `unknown detector "webrtc" (want auto, silero or energy)`},
		{"voice vad_model empty", "[voice]\nvad = \"silero\"\nvad_model = \"\"", "voice.vad_model", "must not be empty"},
		{"voice tts_voice option", "[voice]\ntts_voice = \"--path=/etc\"", "voice.tts_voice", "not an espeak-ng voice name"},
		{"voice tts_voice traversal", "[voice]\ntts_voice = \"../../x\"", "voice.tts_voice", "not an espeak-ng voice name"},
		{"sandbox network", "[sandbox]\nnetwork = \"lan\"", "sandbox.network", `must be "off" or "on"`},
		{"sandbox timeout", "[sandbox]\ntimeout = \"0s\"", "sandbox.timeout", "between 1s and 1h"},
		{"sandbox memory", "[sandbox]\nmemory_mb = 8", "sandbox.memory_mb", "between 64 and 16384"},
		{"sandbox processes", "[sandbox]\nmax_processes = 0", "sandbox.max_processes", "between 4 and 4096"},
		{"sandbox output", "[sandbox]\nmax_output_kb = -1", "sandbox.max_output_kb", "between 1 and 1024"},
		{"sandbox runs", "[sandbox]\nmax_runs = 64", "sandbox.max_runs", "between 1 and 16"},
		{"sandbox python outside usr", "[sandbox]\npython = \"/opt/venv/bin/python\"", "sandbox.python", "under /usr"},
		{"sandbox python escape", "[sandbox]\npython = \"/usr/../etc/x\"", "sandbox.python", "under /usr"},
		{"sandbox python shell", "[sandbox]\npython = \"python3; rm -rf /\"", "sandbox.python", "program name"},
		// [mcp_servers]
		{"mcp name", "[mcp_servers.\"bad name\"]\ncommand = \"x\"", `mcp_servers."bad name"`, "invalid server name"},
		{"mcp name double underscore", "[mcp_servers.a__b]\ncommand = \"x\"", "mcp_servers.a__b", `must not contain "__"`},
		{"mcp transport unknown", "[mcp_servers.a]\ntransport = \"grpc\"\ncommand = \"x\"", "mcp_servers.a.transport", `unknown transport "grpc" (want stdio or http)`},
		{"mcp transport ambiguous", "[mcp_servers.a]\nargs = [\"x\"]", "mcp_servers.a.transport", "required (want stdio or http)"},
		{"mcp stdio needs command", "[mcp_servers.a]\ntransport = \"stdio\"", "mcp_servers.a.command", `required when transport is "stdio"`},
		{"mcp http needs url", "[mcp_servers.a]\ntransport = \"http\"", "mcp_servers.a.url", `required when transport is "http"`},
		{"mcp http url", "[mcp_servers.a]\ntransport = \"http\"\nurl = \"ws://x\"", "mcp_servers.a.url", "invalid URL"},
		{"mcp env name", "[mcp_servers.a]\ncommand = \"x\"\nenv = { \"A=B\" = \"1\" }", "mcp_servers.a.env", `invalid variable name "A=B"`},
		{"mcp header name", "[mcp_servers.a]\nurl = \"http://x\"\nheaders = { \"Bad Header\" = \"1\" }", "mcp_servers.a.headers", `invalid header name "Bad Header"`},
		{"mcp header value", "[mcp_servers.a]\nurl = \"http://x\"\nheaders = { X = \"a\\nb\" }", "mcp_servers.a.headers.X", "CR, LF or NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := problems(t, tt.toml, nil)
			if len(ps) != 1 {
				t.Fatalf("got %d problems, want 1: %+v", len(ps), ps)
			}
			if ps[0].Key != tt.key || !strings.Contains(ps[0].Reason, tt.reason) {
				t.Errorf("problem = %s: %s\nwant      %s: ...%s...", ps[0].Key, ps[0].Reason, tt.key, tt.reason)
			}
			if ps[0].Line == 0 {
				t.Errorf("problem %s has no line", ps[0].Key)
			}
		})
	}
}

// TestTypeErrors: a value of the wrong TOML type is a problem at its key
// and line, and every one of them is reported, not only the first.
func TestTypeErrors(t *testing.T) {
	text := `[agent]
max_tool_iterations = "20"
owners = "wecom:a"

[llm]
vision = "yes"
max_tokens = 1.5

[memory]
dedup_threshold = "high"

[wecom]
agent_id = 10.5

[mcp_servers.a]
env = "X=1"
args = [1]
command = "x"
`
	want := []Problem{
		{Key: "agent.max_tool_iterations", Reason: "must be an integer, not a string", Line: 2},
		{Key: "agent.owners", Reason: "must be an array of strings, not a string", Line: 3},
		{Key: "llm.vision", Reason: "must be a boolean (true or false), not a string", Line: 6},
		{Key: "llm.max_tokens", Reason: "must be an integer, not a float", Line: 7},
		{Key: "memory.dedup_threshold", Reason: "must be a number, not a string", Line: 10},
		{Key: "wecom.agent_id", Reason: "must be an integer, not a float", Line: 13},
		{Key: "mcp_servers.a.env", Reason: "must be a table, not a string", Line: 16},
		{Key: "mcp_servers.a.args[0]", Reason: "must be a string, not an integer", Line: 17},
	}
	got := problems(t, text, nil)
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%+v", len(got), len(want), got)
	}
	// args and env sort alphabetically within the table, lines put them in
	// file order.
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("problem %d = %+v\nwant        %+v", i, got[i], want[i])
		}
	}
}

func TestSectionTypeErrors(t *testing.T) {
	tests := []struct{ toml, key, reason string }{
		{"agent = 5", "agent", "must be a table, not an integer"},
		{"[[mcp_servers]]\ncommand = \"x\"", "mcp_servers", "must be a table, not an array of tables"},
		{"[mcp_servers]\nfiles = \"npx\"", "mcp_servers.files", "must be a table, not a string"},
		{"[agent]\nname = 1979-05-27", "agent.name", "must be a string, not a date-time"},
		{"[llm]\napi_key = [\"a\"]", "llm.api_key", "must be a string, not an array"},
		{"[agent]\nmax_tool_iterations = 9223372036854775807", "agent.max_tool_iterations", "between 1 and 100"},
	}
	for _, tt := range tests {
		ps := problems(t, tt.toml, nil)
		if len(ps) != 1 || ps[0].Key != tt.key || !strings.Contains(ps[0].Reason, tt.reason) || ps[0].Line == 0 {
			t.Errorf("%q: problems %+v, want one %s: %s with a line", tt.toml, ps, tt.key, tt.reason)
		}
	}
}

// TestAllProblemsCollected: independent mistakes are all reported.
func TestAllProblemsCollected(t *testing.T) {
	ps := problems(t, `
[agent]
max_tool_iterations = 0
[llm]
provider = "nope"
[embedding]
pooling = "max"
[security]
dm_policy = "x"
`, nil)
	keys := map[string]bool{}
	for _, p := range ps {
		keys[p.Key] = true
	}
	for _, k := range []string{"agent.max_tool_iterations", "llm.provider", "embedding.pooling", "security.dm_policy"} {
		if !keys[k] {
			t.Errorf("no problem for %s in %+v", k, ps)
		}
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].Line < ps[i-1].Line {
			t.Errorf("problems not in file order: %+v", ps)
		}
	}
}

// TestValidBoundaries: values at the edge of each rule are accepted.
func TestValidBoundaries(t *testing.T) {
	tests := []string{
		"[agent]\nmax_tool_iterations = 1",
		"[agent]\nmax_tool_iterations = 100\nowners = [\"*\", \"wecom:zhang.san\", \"voice:kitchen-panel\", \"hardware:dev:01\"]",
		"[agent]\ntimezone = \"Asia/Shanghai\"",
		"[agent]\ntimezone = \"Local\"",
		"[embedding]\nthreads = 64\npooling = \"mean\"",
		"[asr]\nthreads = 1\nlanguage = \"zh\"",
		"[memory]\ndedup_threshold = 1\nretrieval_top_k = 50\nsession_max_messages = 2\ncompression_overlap = 1",
		"[memory]\ndedup_threshold = 1e-9\nretrieval_top_k = 1",
		"[server]\nlisten = \"[::1]:8080\"",
		"[server]\nlisten = \"localhost:65535\"",
		"[server]\nlisten = \"0.0.0.0:8080\"\n[voice]\nenabled = false",
		"[server]\nlisten = \"0.0.0.0:8080\"\n[voice]\ntoken = \"0123456789abcdef0123456789abcdef\"",
		"[server]\nlisten = \"agent.local:8080\"\n[voice]\nenabled = false",
		"[llm]\nprovider = \"custom\"\nbase_url = \"http://10.0.0.2:8000/v1\"\nmodel = \"m\"\ntimeout = \"1ms\"\nmax_tokens = 1",
		"[security]\ndm_policy = \"closed\"",
		"[security]\ndm_policy = \"open\"\nallow_from = [\"*\"]",
		"[wecom]\nenabled = false\nagent_id = 0\nencoding_aes_key = \"short\"\napi_base = \"nonsense\"",
		validWeCom,
		validWeCom + "debounce = \"0s\"\napi_base = \"http://127.0.0.1:9999\"",
		"[mcp_servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"x\"]\nenv = { A = \"1\" }",
		"[mcp_servers.search-1]\nurl = \"https://mcp.example.com/mcp\"\nheaders = { Authorization = \"Bearer x\" }",
		"[mcp_servers.S_2]\ntransport = \"stdio\"\ncommand = \"/usr/bin/srv\"",
	}
	for _, text := range tests {
		mustParse(t, text, nil)
	}
}

func TestMCPTransportInferred(t *testing.T) {
	cfg, _, _ := mustParse(t, `
[mcp_servers.a]
command = "npx"
[mcp_servers.b]
url = "http://127.0.0.1:9000/mcp"
[mcp_servers.c]
transport = "http"
url = "http://127.0.0.1:9001/mcp"
command = "ignored"
`, nil)
	for name, want := range map[string]string{"a": "stdio", "b": "http", "c": "http"} {
		if got := cfg.MCPServers[name].Transport; got != want {
			t.Errorf("mcp_servers.%s.transport = %q, want %q", name, got, want)
		}
	}
}

func TestValidationWarnings(t *testing.T) {
	tests := []struct{ toml, key, msg string }{
		{"[agent]\nowners = [\"*\"]", "agent.owners", "every sender is an owner"},
		{"[security]\ndm_policy = \"allowlist\"", "security.allow_from", "nobody can message"},
		{"[voice]\ntoken = \"short\"", "voice.token", "shorter than 16"},
		{"[mcp_servers.a]\ncommand = \"x\"\nurl = \"http://x\"\ntransport = \"stdio\"", "mcp_servers.a", "ignored"},
		{"[mcp_servers.a]\ncommand = \"x\"\nurl = \"http://x\"\ntransport = \"http\"", "mcp_servers.a", "ignored"},
	}
	for _, tt := range tests {
		_, warns, _ := mustParse(t, tt.toml, nil)
		if w, ok := findWarning(warns, tt.key); !ok || !strings.Contains(w.Message, tt.msg) {
			t.Errorf("%q: warnings\n%s want %s: ...%s...", tt.toml, warningsString(warns), tt.key, tt.msg)
		}
	}
}

// [web]: what fetch_allow rules open is warned about when it is the box
// itself or metadata; engines and ranges are checked.
func TestWebSection(t *testing.T) {
	_, warns, _ := mustParse(t, "[web]\nfetch_allow = [\"0.0.0.0/0\", \"10.0.0.0/8\", \"*.corp.lan:8080\"]\n", nil)
	var got []string
	for _, w := range warns {
		if w.Key == "web.fetch_allow" {
			got = append(got, w.String())
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "0.0.0.0/0 opens this box itself") {
		t.Fatalf("warnings: %q", got)
	}
	for text, want := range map[string]string{
		"[web]\nengines = [\"bing\"]\n":                        `unknown engine "bing"`,
		"[web]\nengines = [\"github\", \"github\"]\n":          `lists "github" twice`,
		"[web]\nmax_results = 0\n":                             "between 1 and 20",
		"[web]\ntimeout = \"0s\"\n":                            "between 1s and 5m",
		"[web]\nfetch_allow = [\"http://wiki\"]\n":             "web.fetch_allow",
		"[web]\nsearxng_base_url = \"ftp://searx.lan\"\n":      "invalid URL",
		"[web]\nbrave_base_url = \"https://b.example/?k=v\"\n": "must not have a ?query",
	} {
		if _, _, _, err := parseText(t, text, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}
