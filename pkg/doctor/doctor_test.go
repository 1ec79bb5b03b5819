package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"agent/pkg/config"
	"agent/pkg/llm/llmtest"
	"agent/pkg/memory"
	"agent/pkg/sandbox"
	"agent/pkg/store"
	"agent/pkg/store/storetest"
	"agent/pkg/vad/vadtest"
)

func noEnv(string) (string, bool) { return "", false }

func loadConfig(t *testing.T, dir, body string) (*config.Config, []config.Warning, error) {
	t.Helper()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return config.Load(path, noEnv)
}

func find(t *testing.T, rs []Result, name string) Result {
	t.Helper()
	for _, r := range rs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no %s check in %+v", name, rs)
	return Result{}
}

func TestBrokenConfigFailsAndStops(t *testing.T) {
	dir := t.TempDir()
	_, _, err := loadConfig(t, dir, "[llm]\ntimeout = \"soon\"\n")
	if err == nil {
		t.Fatal("config accepted")
	}
	e := Env{ConfigPath: filepath.Join(dir, "config.toml"), ConfigErr: err}
	rs := Run(context.Background(), Checks(e), time.Minute)
	if len(rs) != 1 || rs[0].Level != Fail || !strings.Contains(rs[0].Detail, "llm.timeout") || rs[0].Fix == "" {
		t.Fatalf("results = %+v", rs)
	}
	if !Failed(rs) {
		t.Fatal("Failed() = false")
	}
}

func baseEnv(t *testing.T, extra string, llm *llmtest.Server) Env {
	t.Helper()
	dir := t.TempDir()
	url := "http://127.0.0.1:1/v1"
	if llm != nil {
		url = llm.BaseURL()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	body := `[agent]
state_dir = "var"
[server]
listen = "` + addr + `"
admin_socket = "var/agent.sock"
[llm]
provider = "custom"
base_url = "` + url + `"
model = "m"
api_key = "sk-test-secret"
[web]
engines = [] # doctor tests never reach the real search engines
[embedding]
model_dir = "nope"
[asr]
model = "nope.bin"
` + extra
	cfg, warns, err := loadConfig(t, dir, body)
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox check makes the daemon's temp dir under /var/tmp when
	// the state dir is private (t.TempDir's parent is 0700).
	t.Cleanup(func() { os.Remove(sandbox.FallbackTempDir(cfg.Agent.StateDir)) })
	meminfo := filepath.Join(dir, "meminfo")
	os.WriteFile(meminfo, []byte("MemTotal: 8000000 kB\nMemAvailable: 4000000 kB\n"), 0o600)
	return Env{ConfigPath: cfg.Path, Config: cfg, Warnings: warns, MemInfo: meminfo, CgroupMemMax: filepath.Join(dir, "none")}.withDefaults()
}

func TestHealthyishInstall(t *testing.T) {
	llm := llmtest.New(t)
	llm.RequireKey("sk-test-secret")
	llm.Models("m")
	e := baseEnv(t, "", llm)
	rs := Run(context.Background(), Checks(e), time.Minute)
	want := map[string]Level{
		"config": OK, "state_dir": OK, "database": OK, "llm": OK, "wecom": OK,
		"daemon": Warn, "disk": OK, "memory": OK,
		"embedding_model": Fail, "asr_model": Fail, "voice_vad": Warn,
	}
	for name, lvl := range want {
		if r := find(t, rs, name); r.Level != lvl {
			t.Errorf("%s = %s (%s); want %s", name, r.Level, r.Detail, lvl)
		}
	}
	if reqs := llm.ModelsRequests(); len(reqs) != 1 || reqs[0].Path != "/v1/models" {
		t.Errorf("model list requests: %+v", reqs)
	}
	if r := find(t, rs, "embedding_model"); !strings.Contains(r.Fix, "fetch-models") {
		t.Errorf("embedding fix = %q", r.Fix)
	}
	var b bytes.Buffer
	WriteText(&b, rs)
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		lvl := strings.Fields(line)[0]
		if lvl != "ok" && lvl != "warn" && lvl != "fail" {
			t.Errorf("bad line %q", line)
		}
	}
	if strings.Contains(b.String(), "sk-test-secret") {
		t.Fatal("secret printed")
	}
	b.Reset()
	WriteJSON(&b, rs)
	var parsed struct {
		OK     bool
		Checks []Result
	}
	if err := json.Unmarshal(b.Bytes(), &parsed); err != nil || parsed.OK || len(parsed.Checks) != len(rs) {
		t.Fatalf("json: %v %+v", err, parsed)
	}
}

func TestLLMAnswers(t *testing.T) {
	cases := []struct {
		name  string
		setup func(*llmtest.Server)
		want  Level
	}{
		{"ok", func(*llmtest.Server) {}, OK},
		{"bad key", func(s *llmtest.Server) { s.RequireKey("sk-another") }, Fail},
		{"no models route", func(s *llmtest.Server) {
			s.ModelsReply(llmtest.Error(http.StatusNotFound, "invalid_request_error", "unknown_url", "Unknown request URL: GET /v1/models"))
		}, Warn},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			c.setup(srv)
			e := baseEnv(t, "", srv)
			if r := e.checkLLM(context.Background()); r.Level != c.want {
				t.Fatalf("level %s (%s); want %s", r.Level, r.Detail, c.want)
			}
		})
	}
	e := baseEnv(t, "", nil) // nothing listens on port 1
	if r := e.checkLLM(context.Background()); r.Level != Fail || !strings.Contains(r.Detail, "unreachable") || strings.Contains(r.Detail, "sk-test") {
		t.Fatalf("unreachable: %+v", r)
	}
	e.Config.LLM.APIKey = ""
	e.Config.LLM.Provider = config.ProviderOpenAI
	if r := e.checkLLM(context.Background()); r.Level != Fail || !strings.Contains(r.Fix, "OPENAI_API_KEY") {
		t.Fatalf("empty key: %+v", r)
	}
}

func TestHungLLMIsBounded(t *testing.T) {
	srv := llmtest.New(t)
	srv.ModelsReply(llmtest.Hang())
	e := baseEnv(t, "", srv)
	rs := Run(context.Background(), []Check{{"llm", e.checkLLM}}, 200*time.Millisecond)
	if rs[0].Level != Fail {
		t.Fatalf("hung endpoint: %+v", rs[0])
	}
}

func TestDaemonPortTaken(t *testing.T) {
	e := baseEnv(t, "", nil)
	ln, err := net.Listen("tcp", e.Config.Server.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if r := e.checkDaemon(context.Background()); r.Level != Fail || !strings.Contains(r.Detail, "taken") {
		t.Fatalf("%+v", r)
	}
}

func TestWeComKey(t *testing.T) {
	e := baseEnv(t, "", nil)
	e.Config.WeCom = config.WeCom{Enabled: true, CorpID: "wx1", CorpSecret: "s", AgentID: 1, Token: "t", EncodingAESKey: strings.Repeat("!", 43)}
	if r := e.checkWeCom(context.Background()); r.Level != Fail || !strings.Contains(r.Detail, "32-byte") {
		t.Fatalf("%+v", r)
	}
	e.Config.WeCom.EncodingAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	if r := e.checkWeCom(context.Background()); r.Level != OK {
		t.Fatalf("%+v", r)
	}
	e.Config.WeCom.CorpSecret = ""
	if r := e.checkWeCom(context.Background()); r.Level != Fail || !strings.Contains(r.Detail, "wecom.corp_secret") {
		t.Fatalf("%+v", r)
	}
}

func TestCorruptDatabase(t *testing.T) {
	e := baseEnv(t, "", nil)
	os.MkdirAll(e.Config.Agent.StateDir, 0o750)
	db := filepath.Join(e.Config.Agent.StateDir, "agent.db")
	os.WriteFile(db, []byte("garbage garbage garbage garbage"), 0o600)
	r := e.checkDatabase(context.Background())
	if r.Level != Fail || !strings.Contains(r.Fix, "mv "+db) {
		t.Fatalf("%+v", r)
	}
}

func TestLowMemoryWarns(t *testing.T) {
	e := baseEnv(t, "", nil)
	os.WriteFile(e.MemInfo, []byte("MemAvailable: 100000 kB\n"), 0o600)
	if r := e.checkMemory(context.Background()); r.Level != Warn {
		t.Fatalf("%+v", r)
	}
	os.WriteFile(e.MemInfo, []byte("garbage"), 0o600)
	if r := e.checkMemory(context.Background()); r.Level != Warn {
		t.Fatalf("%+v", r)
	}
}

func TestPanickingCheckContained(t *testing.T) {
	rs := Run(context.Background(), []Check{{"boom", func(context.Context) Result { panic(errors.New("x")) }}}, time.Second)
	if rs[0].Level != Fail || rs[0].Name != "boom" {
		t.Fatalf("%+v", rs)
	}
}

func TestLongTermMemoryCheck(t *testing.T) {
	e := baseEnv(t, "", nil)
	ctx := context.Background()
	if r := e.checkFacts(ctx); r.Level != Warn || !strings.Contains(r.Detail, "no facts yet; keyword-only") {
		t.Fatalf("before the database: %+v", r)
	}
	os.MkdirAll(e.Config.Agent.StateDir, 0o750)
	st := storetest.OpenAt(t, filepath.Join(e.Config.Agent.StateDir, store.FileName))
	m := memory.New(st.DB(), memory.Config{}, nil, nil)
	a, _ := m.Add(ctx, "wecom:alice", memory.Input{Text: "one"})
	m.Add(ctx, "wecom:alice", memory.Input{Text: "two", Supersedes: a.ID})
	m.Close()
	st.Close()
	r := e.checkFacts(ctx)
	if r.Level != Warn || !strings.Contains(r.Detail, "1 facts (1 older versions kept); keyword-only retrieval (FTS5)") || !strings.Contains(r.Fix, "fetch-models") {
		t.Fatalf("keyword-only: %+v", r)
	}
	// With the model files present it is semantic and counts the facts
	// still to embed.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("x"), 0o600)
	e.Config.Embedding.ModelDir = dir
	if r := e.checkFacts(ctx); r.Level != OK || !strings.Contains(r.Detail, "1 embedded at the next start; semantic + keyword") {
		t.Fatalf("semantic: %+v", r)
	}
}

func TestVADCheck(t *testing.T) {
	e := baseEnv(t, "", nil)
	e.Config.Embedding.OnnxruntimeLib = vadtest.ORTLibrary(t)
	e.Config.Voice.VADModel = vadtest.ModelPath(t)
	if r := e.checkVAD(context.Background()); r.Level != OK || !strings.Contains(r.Detail, "silero") {
		t.Errorf("with the model: %+v", r)
	}
	e.Config.Voice.VADModel = filepath.Join(t.TempDir(), "absent.onnx")
	e.Config.Voice.VAD = "silero"
	if r := e.checkVAD(context.Background()); r.Level != Fail || !strings.Contains(r.Fix, "fetch-models.sh vad") {
		t.Errorf("silero without the model: %+v", r)
	}
	e.Config.Voice.VAD = "energy"
	if r := e.checkVAD(context.Background()); r.Level != OK || !strings.Contains(r.Detail, "energy") {
		t.Errorf("energy: %+v", r)
	}
}
