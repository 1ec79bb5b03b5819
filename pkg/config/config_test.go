package config

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestDefault(t *testing.T) {
	d := Default()
	tests := []struct {
		name      string
		got, want any
	}{
		{"Path", d.Path, ""},
		{"agent.name", d.Agent.Name, "agent"},
		{"agent.workspace", d.Agent.Workspace, "workspace"},
		{"agent.state_dir", d.Agent.StateDir, "var"},
		{"agent.timezone", d.Agent.Timezone, "UTC"},
		{"agent.max_tool_iterations", d.Agent.MaxToolIterations, 20},
		{"agent.owners", d.Agent.Owners, []string{}},
		{"server.listen", d.Server.Listen, "127.0.0.1:8080"},
		{"server.admin_socket", d.Server.AdminSocket, "var/agent.sock"},
		{"llm.provider", d.LLM.Provider, "openai"},
		{"llm.base_url", d.LLM.BaseURL, "https://api.openai.com/v1"},
		{"llm.api_key", d.LLM.APIKey, ""},
		{"llm.model", d.LLM.Model, "gpt-4o"},
		{"llm.voice_model", d.LLM.VoiceModel, ""},
		{"llm.vision", d.LLM.Vision, false},
		{"llm.max_tokens", d.LLM.MaxTokens, 4096},
		{"llm.timeout", d.LLM.Timeout.Duration, 60 * time.Second},
		{"embedding.model_dir", d.Embedding.ModelDir, "models/bge-small-en-v1.5"},
		{"embedding.onnxruntime_lib", d.Embedding.OnnxruntimeLib, ""},
		{"embedding.pooling", d.Embedding.Pooling, "cls"},
		{"embedding.threads", d.Embedding.Threads, 2},
		{"asr.model", d.ASR.Model, "models/ggml-base.bin"},
		{"asr.language", d.ASR.Language, "auto"},
		{"asr.threads", d.ASR.Threads, 2},
		{"memory.session_max_messages", d.Memory.SessionMaxMessages, 40},
		{"memory.compression_overlap", d.Memory.CompressionOverlap, 5},
		{"memory.dedup_threshold", d.Memory.DedupThreshold, 0.92},
		{"memory.retrieval_top_k", d.Memory.RetrievalTopK, 5},
		{"security.dm_policy", d.Security.DMPolicy, "pairing"},
		{"security.allow_from", d.Security.AllowFrom, []string{}},
		{"wecom.enabled", d.WeCom.Enabled, false},
		{"wecom.agent_id", d.WeCom.AgentID, 0},
		{"wecom.api_base", d.WeCom.APIBase, "https://qyapi.weixin.qq.com"},
		{"wecom.debounce", d.WeCom.Debounce.Duration, 3 * time.Second},
		{"voice.enabled", d.Voice.Enabled, true},
		{"voice.token", d.Voice.Token, ""},
		{"mcp_servers", len(d.MCPServers), 0},
		{"Location", d.Location(), time.UTC},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("Default() %s = %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
}

// An empty file is Default() with paths made absolute.
func TestEmptyFileIsDefault(t *testing.T) {
	cfg, warns, dir := mustParse(t, "", nil)
	want := Default()
	want.Agent.Workspace = filepath.Join(dir, "workspace")
	want.Agent.StateDir = filepath.Join(dir, "var")
	want.Server.AdminSocket = filepath.Join(dir, "var", "agent.sock")
	want.Embedding.ModelDir = filepath.Join(dir, "models", "bge-small-en-v1.5")
	want.ASR.Model = filepath.Join(dir, "models", "ggml-base.bin")
	want.Voice.VADModel = filepath.Join(dir, "models", "silero_vad_v5.onnx")
	want.Skills.InstalledDir = filepath.Join(dir, "var", "skills")
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Parse(\"\") =\n%+v\nwant\n%+v", cfg, want)
	}
	// The one warning: openai without a key.
	if len(warns) != 1 || warns[0].Key != "llm.api_key" {
		t.Errorf("warnings = %q, want one about llm.api_key", warningsString(warns))
	}
}

func TestParseNilEnvAndEmptyBaseDir(t *testing.T) {
	cfg, _, err := Parse("x.toml", []byte(`[agent]
workspace = "${HOME}/ws"`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if cfg.Agent.StateDir != filepath.Join(wd, "var") {
		t.Errorf("state_dir = %q, want it under the working directory %q", cfg.Agent.StateDir, wd)
	}
	if cfg.Agent.Workspace != "/ws" {
		t.Errorf("workspace = %q, want /ws (nil env is empty)", cfg.Agent.Workspace)
	}
}

func TestRepositoryConfig(t *testing.T) {
	cfg, warns, err := Load("../../config.toml", mapEnv(nil))
	if err != nil {
		t.Fatalf("Load(../../config.toml) with an empty environment: %v", err)
	}
	for _, w := range warns {
		if !strings.Contains(w.Message, "is not set") {
			t.Errorf("unexpected warning: %v", w)
		}
	}
	root, _ := filepath.Abs("../..")
	if cfg.Path != filepath.Join(root, "config.toml") {
		t.Errorf("Path = %q", cfg.Path)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"wecom.enabled", cfg.WeCom.Enabled, false},
		{"voice.enabled", cfg.Voice.Enabled, true},
		{"loopback", cfg.ListenIsLoopback(), true},
		{"embedding.model_dir", cfg.Embedding.ModelDir, filepath.Join(root, "models/bge-small-en-v1.5")},
		{"asr.model", cfg.ASR.Model, filepath.Join(root, "models/ggml-tiny.bin")},
		{"admin_socket", cfg.Server.AdminSocket, filepath.Join(root, "var/agent.sock")},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}

	// With the environment filled in, the key arrives and nothing warns.
	cfg, warns, err = Load("../../config.toml", mapEnv(map[string]string{
		"OPENAI_API_KEY": "sk-repo-test", "VOICE_TOKEN": "0123456789abcdef0123",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings with a full environment: %s", warningsString(warns))
	}
	if cfg.LLM.APIKey != "sk-repo-test" {
		t.Errorf("api_key = %q", cfg.LLM.APIKey)
	}
}

// TestRedactedGolden pins the effective form of the repository's config.
// Run with -update to rewrite testdata/config.redacted.toml.
func TestRedactedGolden(t *testing.T) {
	cfg, _, err := Load("../../config.toml", mapEnv(map[string]string{"OPENAI_API_KEY": "sk-golden"}))
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(cfg.Path)
	got := strings.ReplaceAll(cfg.Redacted(), root, "$ROOT")
	golden := filepath.Join("testdata", "config.redacted.toml")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("Redacted() differs from %s (run with -update if intended):\n%s", golden, got)
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.toml")
	_, _, err := Load(missing, nil)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("missing file: error %T %v, want *Error", err, err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: errors.Is(err, fs.ErrNotExist) = false")
	}
	msg := err.Error()
	for _, want := range []string{missing, "does not exist", "copy config.toml", "agentctl doctor"} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing file message %q lacks %q", msg, want)
		}
	}

	_, _, err = Load(dir, nil)
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: got %v", err)
	}

	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, make([]byte, maxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load(big, nil)
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: got %v", err)
	}

	if os.Geteuid() != 0 { // root reads anything
		locked := filepath.Join(dir, "locked.toml")
		if err := os.WriteFile(locked, nil, 0o000); err != nil {
			t.Fatal(err)
		}
		_, _, err = Load(locked, nil)
		if !errors.As(err, &ce) || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), locked+": cannot read") {
			t.Errorf("unreadable file: got %v", err)
		}
	}
}

func TestLoadSetsPathAndBaseDir(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "etc")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(sub, "config.toml")
	if err := os.WriteFile(p, []byte("[asr]\nmodel = \"../m/ggml.bin\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Path != p {
		t.Errorf("Path = %q, want %q", cfg.Path, p)
	}
	if want := filepath.Join(dir, "m", "ggml.bin"); cfg.ASR.Model != want {
		t.Errorf("asr.model = %q, want %q", cfg.ASR.Model, want)
	}
}

func TestRelativePaths(t *testing.T) {
	cfg, _, dir := mustParse(t, `
[agent]
workspace = "ws"
state_dir = "/srv/agent/state"
[server]
admin_socket = "run/agent.sock"
[embedding]
model_dir = "./models/../models/bge"
onnxruntime_lib = "lib/libonnxruntime.so.1"
[asr]
model = "/opt/models/ggml-base.bin"
`, nil)
	tests := []struct{ key, got, want string }{
		{"agent.workspace", cfg.Agent.Workspace, filepath.Join(dir, "ws")},
		{"agent.state_dir", cfg.Agent.StateDir, "/srv/agent/state"},
		{"server.admin_socket", cfg.Server.AdminSocket, filepath.Join(dir, "run", "agent.sock")},
		{"embedding.model_dir", cfg.Embedding.ModelDir, filepath.Join(dir, "models", "bge")},
		{"embedding.onnxruntime_lib", cfg.Embedding.OnnxruntimeLib, filepath.Join(dir, "lib", "libonnxruntime.so.1")},
		{"asr.model", cfg.ASR.Model, "/opt/models/ggml-base.bin"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.key, tt.got, tt.want)
		}
	}
	// An empty onnxruntime_lib stays empty (it means "search").
	cfg, _, _ = mustParse(t, "", nil)
	if cfg.Embedding.OnnxruntimeLib != "" {
		t.Errorf("empty onnxruntime_lib became %q", cfg.Embedding.OnnxruntimeLib)
	}
}

func TestStateDirectory(t *testing.T) {
	tests := []struct {
		name       string
		toml       string
		env        string // $STATE_DIRECTORY; "-" for unset
		wantState  string // "$D/" is the config's directory
		wantSocket string
	}{
		{"config only", "[agent]\nstate_dir = \"st\"", "-", "$D/st", "$D/st/agent.sock"},
		{"systemd wins", "[agent]\nstate_dir = \"st\"", "/var/lib/agent", "/var/lib/agent", "/var/lib/agent/agent.sock"},
		{"first of several", "", "/var/lib/agent:/var/lib/agent-extra", "/var/lib/agent", "/var/lib/agent/agent.sock"},
		{"empty is ignored", "", "", "$D/var", "$D/var/agent.sock"},
		{"socket inside state_dir follows", "[agent]\nstate_dir = \"var\"\n[server]\nadmin_socket = \"var/run/agent.sock\"",
			"/var/lib/agent", "/var/lib/agent", "/var/lib/agent/run/agent.sock"},
		{"socket elsewhere stays", "[server]\nadmin_socket = \"/run/agent/agent.sock\"",
			"/var/lib/agent", "/var/lib/agent", "/run/agent/agent.sock"},
		{"empty socket is derived", "[server]\nadmin_socket = \"\"", "-", "$D/var", "$D/var/agent.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			if tt.env != "-" {
				env["STATE_DIRECTORY"] = tt.env
			}
			cfg, _, dir := mustParse(t, tt.toml, env)
			expand := func(s string) string { return strings.ReplaceAll(s, "$D", dir) }
			if cfg.Agent.StateDir != expand(tt.wantState) {
				t.Errorf("state_dir = %q, want %q", cfg.Agent.StateDir, expand(tt.wantState))
			}
			if cfg.Server.AdminSocket != expand(tt.wantSocket) {
				t.Errorf("admin_socket = %q, want %q", cfg.Server.AdminSocket, expand(tt.wantSocket))
			}
		})
	}
	// STATE_DIRECTORY rescues an empty state_dir.
	mustParse(t, "[agent]\nstate_dir = \"\"", map[string]string{"STATE_DIRECTORY": "/var/lib/agent"})
}

func TestProviderPresets(t *testing.T) {
	tests := []struct {
		toml, wantURL, wantModel string
	}{
		{`provider = "openai"`, "https://api.openai.com/v1", "gpt-4o"},
		{`provider = "deepseek"` + "\nmodel = \"deepseek-chat\"", "https://api.deepseek.com/v1", "deepseek-chat"},
		{`provider = "dashscope"` + "\nmodel = \"qwen-plus\"", "https://dashscope.aliyuncs.com/compatible-mode/v1", "qwen-plus"},
		{`provider = "ollama"` + "\nmodel = \"qwen2.5:3b\"", "http://127.0.0.1:11434/v1", "qwen2.5:3b"},
		{`provider = "vllm"` + "\nmodel = \"m\"", "http://127.0.0.1:8000/v1", "m"},
		{`provider = "custom"` + "\nmodel = \"m\"\nbase_url = \"https://llm.example.com/v1\"", "https://llm.example.com/v1", "m"},
		{`provider = "deepseek"` + "\nmodel = \"m\"\nbase_url = \"\"", "https://api.deepseek.com/v1", "m"},
		{`provider = "openai"` + "\nmodel = \"\"", "https://api.openai.com/v1", "gpt-4o"},
		{`provider = "openai"` + "\nbase_url = \"http://proxy.lan:3000/v1\"", "http://proxy.lan:3000/v1", "gpt-4o"},
	}
	for _, tt := range tests {
		cfg, _, _ := mustParse(t, "[llm]\n"+tt.toml, nil)
		if cfg.LLM.BaseURL != tt.wantURL || cfg.LLM.Model != tt.wantModel {
			t.Errorf("%q: base_url, model = %q, %q; want %q, %q", tt.toml, cfg.LLM.BaseURL, cfg.LLM.Model, tt.wantURL, tt.wantModel)
		}
		if u, ok := DefaultBaseURL(cfg.LLM.Provider); !ok || (cfg.LLM.Provider != "custom" && u == "") {
			t.Errorf("DefaultBaseURL(%q) = %q, %v", cfg.LLM.Provider, u, ok)
		}
	}
	// Only hosted providers warn about a missing key.
	_, warns, _ := mustParse(t, "[llm]\nprovider = \"ollama\"\nmodel = \"m\"", nil)
	if len(warns) != 0 {
		t.Errorf("ollama without a key warned: %s", warningsString(warns))
	}
	_, warns, _ = mustParse(t, "[llm]\nprovider = \"deepseek\"\nmodel = \"m\"", nil)
	if w, ok := findWarning(warns, "llm.api_key"); !ok || !strings.Contains(w.Message, "deepseek") {
		t.Errorf("deepseek without a key: warnings %s", warningsString(warns))
	}
}

func TestLocation(t *testing.T) {
	cfg, _, _ := mustParse(t, "[agent]\ntimezone = \"Asia/Shanghai\"", nil)
	if got := cfg.Location().String(); got != "Asia/Shanghai" {
		t.Errorf("Location() = %q", got)
	}
	// A hand-built Config loads its zone lazily, UTC when it cannot.
	c := &Config{Agent: Agent{Timezone: "Europe/Berlin"}}
	if got := c.Location().String(); got != "Europe/Berlin" {
		t.Errorf("hand-built Location() = %q", got)
	}
	c = &Config{Agent: Agent{Timezone: "Nowhere/Special"}}
	if c.Location() != time.UTC {
		t.Errorf("bad zone Location() = %v, want UTC", c.Location())
	}
}

func TestListenIsLoopback(t *testing.T) {
	tests := []struct {
		listen string
		want   bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.53:80", true},
		{"[::1]:8080", true},
		{"localhost:8080", true},
		{"LOCALHOST:8080", true},
		{"[::ffff:127.0.0.1]:8080", true},
		{":8080", false},
		{"0.0.0.0:8080", false},
		{"[::]:8080", false},
		{"192.168.1.5:8080", false},
		{"example.com:80", false},
		{"garbage", false},
	}
	for _, tt := range tests {
		c := &Config{Server: Server{Listen: tt.listen}}
		if got := c.ListenIsLoopback(); got != tt.want {
			t.Errorf("ListenIsLoopback(%q) = %v, want %v", tt.listen, got, tt.want)
		}
	}
}

type fakeInfo struct {
	fs.FileInfo
	dir bool
}

func (f fakeInfo) IsDir() bool { return f.dir }

func TestFind(t *testing.T) {
	tests := []struct {
		name     string
		explicit string
		env      map[string]string
		exists   map[string]bool // path -> is a directory
		want     string
	}{
		{"explicit wins", "/x/agent.toml", nil, map[string]bool{"config.toml": false}, "/x/agent.toml"},
		{"working directory", "", nil, map[string]bool{"config.toml": false, DefaultPath: false}, "config.toml"},
		{"a directory does not count", "", nil, map[string]bool{"config.toml": true}, DefaultPath},
		{"fallback", "", nil, nil, DefaultPath},
		{"systemd configuration directory", "", map[string]string{"CONFIGURATION_DIRECTORY": "/etc/agent/t1:/etc/other"},
			map[string]bool{"/etc/agent/t1/config.toml": false, DefaultPath: false}, "/etc/agent/t1/config.toml"},
		{"working directory before systemd's", "", map[string]string{"CONFIGURATION_DIRECTORY": "/etc/agent/t1"},
			map[string]bool{"/etc/agent/t1/config.toml": false, "config.toml": false}, "config.toml"},
		{"configuration directory without a file", "", map[string]string{"CONFIGURATION_DIRECTORY": "/etc/agent/t1"},
			nil, DefaultPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stat := func(p string) (fs.FileInfo, error) {
				dir, ok := tt.exists[p]
				if !ok {
					return nil, fs.ErrNotExist
				}
				return fakeInfo{dir: dir}, nil
			}
			if got := find(tt.explicit, mapEnv(tt.env), stat); got != tt.want {
				t.Errorf("find = %q, want %q", got, tt.want)
			}
		})
	}
	// The real one, on the real filesystem.
	if got := Find("given.toml", nil); got != "given.toml" {
		t.Errorf("Find(given.toml) = %q", got)
	}
}

func TestDuration(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("1m30s")); err != nil || d.Duration != 90*time.Second {
		t.Errorf("UnmarshalText(1m30s) = %v, %v", d, err)
	}
	if err := d.UnmarshalText([]byte("abc")); err == nil || err.Error() != `invalid duration "abc"` {
		t.Errorf("UnmarshalText(abc) error = %v", err)
	}
	b, err := Duration{90 * time.Second}.MarshalText()
	if err != nil || string(b) != "1m30s" {
		t.Errorf("MarshalText = %q, %v", b, err)
	}
}
