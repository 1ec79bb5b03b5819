package doctor

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"agent/pkg/admin"
	"agent/pkg/asr"
	"agent/pkg/config"
	"agent/pkg/diskfree"
	"agent/pkg/embed"
	"agent/pkg/localmodels"
	"agent/pkg/memory/factcount"
	"agent/pkg/onnxrt"
	"agent/pkg/statedir"
	"agent/pkg/store"
	"agent/pkg/vad"
)

// Env is what the checks look at. Everything is injectable for tests.
type Env struct {
	ConfigPath string
	Config     *config.Config // nil when the file is invalid
	ConfigErr  error
	Warnings   []config.Warning
	ExeDir     string
	HTTP       *http.Client
	// MemInfo is the path of /proc/meminfo (tests point it at a fixture).
	MemInfo string
	// CgroupMemMax is the path of the service's cgroup v2 memory.max file.
	CgroupMemMax string
	// SkipModels skips loading models (they may take seconds on a Jetson).
	SkipModels bool
	// Bwrap is the bubblewrap binary the sandbox check uses; "" finds
	// bwrap in PATH.
	Bwrap string
}

func (e Env) withDefaults() Env {
	if e.HTTP == nil {
		e.HTTP = &http.Client{Timeout: 5 * time.Second}
	}
	if e.MemInfo == "" {
		e.MemInfo = "/proc/meminfo"
	}
	if e.CgroupMemMax == "" {
		// The service's own cgroup (MemoryMax= of agent.service), not ours.
		e.CgroupMemMax = "/sys/fs/cgroup/system.slice/agent.service/memory.max"
	}
	return e
}

// Budget is the daemon's memory budget on the appliance.
const Budget = 2 << 30

// Checks lists the diagnoses in the order they print.
func Checks(e Env) []Check {
	e = e.withDefaults()
	cs := []Check{{"config", e.checkConfig}}
	if e.Config == nil {
		return cs // everything else depends on a valid configuration
	}
	cs = append(cs,
		Check{"state_dir", e.checkStateDir},
		Check{"permissions", e.checkPermissions}, // perms.go
		Check{"database", e.checkDatabase},
		Check{"long_term_memory", e.checkFacts},
		Check{"onnxruntime", e.checkRuntime},
		Check{"embedding_model", e.checkEmbedding},
		Check{"asr_model", e.checkASR},
		Check{"voice_vad", e.checkVAD},
		Check{"llm", e.checkLLM},
		Check{"wecom", e.checkWeCom},
		Check{"wecom_bot", e.checkWeComBot}, // wecombot.go
		Check{"fleet", e.checkFleet},        // fleet.go
		Check{"http_access", e.checkAccess}, // access.go
		Check{"mcp", e.checkMCP},
		Check{"web", e.checkWeb},                  // web.go
		Check{"sandbox", e.checkSandbox},          // sandbox.go
		Check{"sandbox_limits", e.checkCgroups},   // cgroups.go
		Check{"skills", e.checkSkills},            // skills.go
		Check{"custom_tools", e.checkCustomTools}, // skills.go
		Check{"daemon", e.checkDaemon},
		Check{"self_check", e.checkSelfCheck}, // selfcheck.go
		Check{"disk", e.checkDisk},
		Check{"memory", e.checkMemory},
	)
	return cs
}

func (e Env) checkConfig(context.Context) Result {
	if e.ConfigErr != nil {
		return Result{Level: Fail, Detail: e.ConfigErr.Error(), Fix: "edit " + e.ConfigPath + " (agent -check-config validates it)"}
	}
	if len(e.Warnings) > 0 {
		ws := make([]string, len(e.Warnings))
		for i, w := range e.Warnings {
			ws[i] = w.String()
		}
		return Result{Level: Warn, Detail: e.Config.Path + " valid with warnings: " + strings.Join(ws, "; ")}
	}
	return Result{Level: OK, Detail: e.Config.Path + " valid"}
}

func (e Env) checkStateDir(context.Context) Result {
	dir := e.Config.Agent.StateDir
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		parent := filepath.Dir(dir)
		if canWrite(parent) != nil {
			return Result{Level: Fail, Detail: dir + " does not exist and " + parent + " is not writable", Fix: "mkdir -p " + dir + " && chown <service user> " + dir}
		}
		return Result{Level: OK, Detail: dir + " will be created at start"}
	case err != nil:
		return Result{Level: Fail, Detail: err.Error()}
	case !st.IsDir():
		return Result{Level: Fail, Detail: dir + " is not a directory", Fix: "set agent.state_dir to a directory"}
	}
	if err := canWrite(dir); err != nil {
		return Result{Level: Fail, Detail: dir + " is not writable: " + err.Error(), Fix: "chown -R <service user> " + dir}
	}
	return Result{Level: OK, Detail: dir + " writable"}
}

func (e Env) checkDatabase(ctx context.Context) Result {
	path := filepath.Join(e.Config.Agent.StateDir, store.FileName)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		// Prove the extensions on a scratch database instead.
		tmp, err := os.MkdirTemp("", "agent-doctor-")
		if err != nil {
			return Result{Level: Fail, Detail: err.Error()}
		}
		defer os.RemoveAll(tmp)
		s, err := store.Open(ctx, filepath.Join(tmp, store.FileName), nil, store.Options{})
		if err != nil {
			return Result{Level: Fail, Detail: err.Error()}
		}
		defer s.Close()
		v, _ := s.VecVersion(ctx)
		return Result{Level: OK, Detail: "not created yet; sqlite-vec " + v + " and FTS5 trigram available"}
	}
	s, err := store.Open(ctx, path, nil, store.Options{ReadOnly: true})
	if err != nil {
		return Result{Level: Fail, Detail: err.Error(), Fix: dbFix(err, path)}
	}
	defer s.Close()
	if err := s.Check(ctx, true); err != nil {
		return Result{Level: Fail, Detail: err.Error(), Fix: dbFix(err, path)}
	}
	ver, _ := s.Version(ctx)
	vec, _ := s.VecVersion(ctx)
	lite, _ := s.SQLiteVersion(ctx)
	detail := fmt.Sprintf("%s integrity ok, schema v%d, SQLite %s, sqlite-vec %s, FTS5 trigram ok", path, ver, lite, vec)
	if ver < store.SchemaVersion() {
		return Result{Level: OK, Detail: detail + fmt.Sprintf(" (migrates to v%d at next start)", store.SchemaVersion())}
	}
	return Result{Level: OK, Detail: detail}
}

// checkFacts reports the long-term memory: how many facts, how many wait
// for a vector, and whether retrieval can be semantic (the embedding model
// is installed) or is keyword-only.
func (e Env) checkFacts(ctx context.Context) Result {
	semantic := true
	for _, f := range []string{embed.ModelFile, embed.TokenizerFile} {
		if _, err := os.Stat(filepath.Join(e.Config.Embedding.ModelDir, f)); err != nil {
			semantic = false
		}
	}
	mode := "semantic + keyword retrieval"
	if !semantic {
		mode = "keyword-only retrieval (FTS5): the embedding model is not installed"
	}
	path := filepath.Join(e.Config.Agent.StateDir, store.FileName)
	if _, err := os.Stat(path); err != nil {
		return degraded(semantic, "no facts yet; "+mode)
	}
	s, err := store.Open(ctx, path, nil, store.Options{ReadOnly: true})
	if err != nil {
		return Result{Level: Warn, Detail: "not checked: " + err.Error()}
	}
	defer s.Close()
	if ver, _ := s.Version(ctx); ver < store.SchemaVersion() {
		return degraded(semantic, "created at the next start; "+mode)
	}
	st, err := factcount.Count(ctx, s.DB(), "")
	if err != nil {
		return Result{Level: Fail, Detail: err.Error()}
	}
	detail := fmt.Sprintf("%d facts (%d older versions kept)", st.Facts, st.Superseded)
	if st.Unembedded > 0 && semantic {
		detail += fmt.Sprintf(", %d embedded at the next start", st.Unembedded)
	}
	if semantic {
		if r, ok := e.languageMismatch(ctx, s.DB()); ok {
			r.Detail = detail + "; " + r.Detail
			return r
		}
	}
	return degraded(semantic, detail+"; "+mode)
}

// languageMismatch warns when most recent facts are Chinese and the
// embedding model's vocabulary is not (bge-small-en: Chinese facts are
// then found by keywords, barely by meaning).
func (e Env) languageMismatch(ctx context.Context, db *sql.DB) (Result, bool) {
	vocab, err := embed.VocabHanShare(filepath.Join(e.Config.Embedding.ModelDir, embed.TokenizerFile))
	if err != nil || vocab >= 0.2 {
		return Result{}, false
	}
	rows, err := db.QueryContext(ctx, `SELECT fact FROM memory_facts WHERE superseded_by IS NULL ORDER BY id DESC LIMIT 500`)
	if err != nil {
		return Result{}, false
	}
	defer rows.Close()
	n, zh := 0, 0
	for rows.Next() {
		var f string
		if rows.Scan(&f) == nil {
			n++
			if embed.HanShare(f) > 0.3 {
				zh++
			}
		}
	}
	if n < 20 || zh*2 <= n {
		return Result{}, false
	}
	models := filepath.Dir(e.Config.Embedding.ModelDir)
	return Result{Level: Warn,
		Detail: fmt.Sprintf("%d of the last %d facts are Chinese but the embedding model %s is English-only: they are matched by keywords, barely by meaning", zh, n, e.Config.Embedding.ModelDir),
		Fix: fmt.Sprintf("MODELS_DIR=%s scripts/fetch-models.sh bge-zh, set embedding.model_dir = %q and restart (facts are re-embedded in the background: agentctl status)",
			models, filepath.Join(models, "bge-small-zh-v1.5"))}, true
}

func degraded(semantic bool, detail string) Result {
	if semantic {
		return Result{Level: OK, Detail: detail}
	}
	return Result{Level: Warn, Detail: detail, Fix: "scripts/fetch-models.sh (or make models)"}
}

// dbFix names the remedy for a database error; moving the file aside is
// offered only for real corruption, never for a permission or version
// problem on a healthy database.
func dbFix(err error, path string) string {
	switch {
	case errors.Is(err, store.ErrCorrupt):
		return "systemctl stop agent; mv " + path + " " + path + ".corrupt  (or restore a backup)"
	case errors.Is(err, store.ErrTooNew):
		return "install the newer agent release that wrote it"
	case errors.Is(err, os.ErrPermission):
		return "run as root or as the service user (sudo -u agent agentctl doctor)"
	case errors.Is(err, store.ErrExtension):
		return "rebuild with make build (tags sqlite_fts5)"
	}
	return ""
}

func (e Env) checkRuntime(context.Context) Result {
	cands := onnxrt.Candidates(e.Config.Embedding.OnnxruntimeLib, e.ExeDir)
	ver, path, err := onnxrt.Load(cands)
	if err != nil {
		return Result{Level: Fail, Detail: err.Error(), Fix: "make deps (developers) or scripts/install.sh (appliances); or set embedding.onnxruntime_lib"}
	}
	return Result{Level: OK, Detail: "ONNX Runtime " + ver + " from " + path}
}

func (e Env) checkEmbedding(ctx context.Context) Result {
	dir := e.Config.Embedding.ModelDir
	for _, f := range []string{"model.onnx", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return Result{Level: Fail, Detail: filepath.Join(dir, f) + " missing; memory retrieval falls back to keyword search (FTS5)", Fix: "scripts/fetch-models.sh (or make models)"}
		}
	}
	if e.SkipModels {
		return Result{Level: OK, Detail: dir + " present (not loaded)"}
	}
	start := time.Now()
	em, err := embed.New(localmodels.EmbedConfig(e.Config), nil)
	if err != nil {
		return Result{Level: Fail, Detail: err.Error(), Fix: "scripts/fetch-models.sh (re-fetch a damaged model)"}
	}
	defer em.Close()
	if _, err := em.Embed(ctx, []string{"doctor check"}); err != nil {
		return Result{Level: Fail, Detail: "loads but cannot embed: " + err.Error()}
	}
	provider, fallback := em.Provider()
	took := time.Since(start).Round(time.Millisecond)
	if fallback != nil {
		return Result{Level: Warn, Detail: fmt.Sprintf("%s embeds on the CPU, not %s: %v (%s)", dir, e.Config.Embedding.Provider, fallback, took),
			Fix: "a GPU build of ONNX Runtime (JetPack 6: onnxruntime-gpu) with its provider libraries in embedding.onnxruntime_lib's folder, or embedding.provider = \"cpu\""}
	}
	return Result{Level: OK, Detail: fmt.Sprintf("%s loads, %d-d, embeds on %s (%s)", dir, em.Dim(), provider, took)}
}

func (e Env) checkASR(context.Context) Result {
	path := e.Config.ASR.Model
	if _, err := os.Stat(path); err != nil {
		lvl := Fail
		if !e.Config.Voice.Enabled {
			lvl = Warn
		}
		return Result{Level: lvl, Detail: path + " missing; speech recognition is disabled", Fix: "scripts/fetch-models.sh (or make models)"}
	}
	if e.SkipModels {
		return Result{Level: OK, Detail: path + " present (not loaded)"}
	}
	start := time.Now()
	r, err := asr.New(localmodels.ASRConfig(e.Config), nil)
	if err != nil {
		fix := "scripts/fetch-models.sh (re-fetch a damaged model)"
		if errors.Is(err, asr.ErrNotBuilt) {
			fix = "make build"
		}
		return Result{Level: Fail, Detail: err.Error(), Fix: fix}
	}
	defer r.Close()
	kind := "English-only"
	if r.Multilingual() {
		kind = "multilingual"
	}
	device, noGPU := r.Device()
	took := time.Since(start).Round(time.Millisecond)
	if noGPU != nil {
		return Result{Level: Warn, Detail: fmt.Sprintf("%s loads (%s) but runs on the CPU, not the GPU asr.gpu asks for: %v (%s)", path, kind, noGPU, took),
			Fix: "make build-cuda on the Jetson (needs the CUDA toolkit), or asr.gpu = false"}
	}
	return Result{Level: OK, Detail: fmt.Sprintf("%s loads (%s, on %s, %s)", path, kind, device, took)}
}

// checkVAD reports how utterances end: the Silero model (loaded and run
// on a window of silence) or the energy detector.
func (e Env) checkVAD(context.Context) Result {
	v := e.Config.Voice
	switch {
	case !v.Enabled:
		return Result{Level: OK, Detail: "voice channel disabled"}
	case v.VAD == config.VADEnergy:
		return Result{Level: OK, Detail: "energy detector (voice.vad = \"energy\"): loud noise counts as speech"}
	}
	if _, err := os.Stat(v.VADModel); err != nil {
		lvl := Warn
		if v.VAD == config.VADSilero {
			lvl = Fail
		}
		return Result{Level: lvl, Detail: v.VADModel + " missing; utterances end by the energy detector (loud noise counts as speech)",
			Fix: "scripts/fetch-models.sh vad"}
	}
	if e.SkipModels {
		return Result{Level: OK, Detail: v.VADModel + " present (not loaded)"}
	}
	start := time.Now()
	m, err := vad.Load(v.VADModel, onnxrt.Candidates(e.Config.Embedding.OnnxruntimeLib, onnxrt.ExeDir()), 1)
	if err != nil {
		return Result{Level: Fail, Detail: err.Error(), Fix: "scripts/fetch-models.sh vad (re-fetch a damaged model), or voice.vad = \"energy\""}
	}
	defer m.Close()
	return Result{Level: OK, Detail: fmt.Sprintf("silero %s loads (%s)", v.VADModel, time.Since(start).Round(time.Millisecond))}
}

// checkLLM asks GET {base_url}/models, which every OpenAI-compatible server
// answers; it proves DNS, TLS, reachability and (mostly) the key.
func (e Env) checkLLM(ctx context.Context) Result {
	l := e.Config.LLM
	if l.APIKey == "" && config.NeedsAPIKey(l.Provider) {
		return Result{Level: Fail, Detail: "llm.api_key is empty; the assistant cannot answer", Fix: "export OPENAI_API_KEY=... (or set llm.api_key_file)"}
	}
	url := strings.TrimSuffix(l.BaseURL, "/") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Result{Level: Fail, Detail: err.Error()}
	}
	if l.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.APIKey)
	}
	start := time.Now()
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return Result{Level: Fail, Detail: l.BaseURL + " unreachable: " + scrub(err.Error(), l.APIKey), Fix: "check network/DNS/proxy, or llm.base_url"}
	}
	resp.Body.Close()
	took := time.Since(start).Round(time.Millisecond)
	switch {
	case resp.StatusCode == http.StatusOK:
		return Result{Level: OK, Detail: fmt.Sprintf("%s reachable, key accepted (%s)", l.BaseURL, took)}
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return Result{Level: Fail, Detail: fmt.Sprintf("%s rejected the API key (%s)", l.BaseURL, resp.Status), Fix: "set a valid llm.api_key"}
	default:
		return Result{Level: Warn, Detail: fmt.Sprintf("%s reachable but GET /models answered %s (%s)", l.BaseURL, resp.Status, took)}
	}
}

func (e Env) checkWeCom(context.Context) Result {
	w := e.Config.WeCom
	if !w.Enabled {
		return Result{Level: OK, Detail: "disabled"}
	}
	var missing []string
	for k, v := range map[string]string{"corp_id": w.CorpID, "corp_secret": w.CorpSecret, "token": w.Token, "encoding_aes_key": w.EncodingAESKey} {
		if v == "" {
			missing = append(missing, "wecom."+k)
		}
	}
	if w.AgentID <= 0 {
		missing = append(missing, "wecom.agent_id")
	}
	if len(missing) > 0 {
		return Result{Level: Fail, Detail: "missing " + strings.Join(missing, ", "), Fix: "fill them from the WeCom admin console (app > API receive)"}
	}
	if k, err := base64.StdEncoding.DecodeString(w.EncodingAESKey + "="); err != nil || len(k) != 32 {
		return Result{Level: Fail, Detail: "wecom.encoding_aes_key does not decode to a 32-byte key", Fix: "copy the 43-character EncodingAESKey exactly"}
	}
	return Result{Level: OK, Detail: fmt.Sprintf("enabled for corp %s agent %d", w.CorpID, w.AgentID)}
}

func (e Env) checkDaemon(ctx context.Context) Result {
	st, err := admin.NewClient(e.Config.Server.AdminSocket).Status(ctx)
	if errors.Is(err, admin.ErrPermission) {
		return Result{Level: Warn, Detail: "cannot ask the daemon: " + err.Error(), Fix: "sudo agentctl doctor"}
	}
	if err == nil {
		lvl, health := OK, "healthy"
		if !st.Healthy {
			lvl, health = Fail, "UNHEALTHY"
			for _, c := range st.Checks {
				if c.Status == "failing" {
					health += " (" + c.Name + ": " + c.Detail + ")"
				}
			}
		}
		res := Result{Level: lvl, Detail: fmt.Sprintf("running (pid %d, %s, up %s, RSS %d MiB), %s", st.PID, st.Version, st.Uptime, st.RSSBytes>>20, health)}
		// A channel whose background work keeps failing is restarted with
		// backoff and reported degraded: the daemon is healthy, the
		// channel is not.
		for _, c := range st.Checks {
			if name, ok := strings.CutPrefix(c.Name, "channel_"); ok && c.Status != "ok" && c.Name != connectionCheck {
				if res.Level == OK {
					res.Level = Warn
				}
				res.Detail += "; channel " + name + " is restarting: " + c.Detail
				res.Fix = "journalctl -u agent -g 'channel stopped' (the channel's error and what it retries)"
			}
		}
		return res
	}
	if pid := statedir.Holder(e.Config.Agent.StateDir); pid > 0 {
		return Result{Level: Fail, Detail: fmt.Sprintf("pid %d holds the state dir but its admin socket does not answer: %v", pid, err), Fix: "journalctl -u agent; systemctl restart agent"}
	}
	ln, lerr := net.Listen("tcp", e.Config.Server.Listen)
	if lerr != nil {
		return Result{Level: Fail, Detail: "not running, and " + e.Config.Server.Listen + " is taken by another process: " + lerr.Error(), Fix: "ss -ltnp | grep " + portOf(e.Config.Server.Listen) + "  (or change server.listen)"}
	}
	ln.Close()
	return Result{Level: Warn, Detail: "not running; " + e.Config.Server.Listen + " is free", Fix: "systemctl start agent (or make run)"}
}

func (e Env) checkDisk(context.Context) Result {
	reserve := uint64(e.Config.Agent.DiskReserveMB) << 20
	var details []string
	worst := Result{Level: OK}
	seen := map[string]bool{}
	for _, d := range []string{e.Config.Agent.StateDir, e.Config.Agent.Workspace} {
		dir := existing(d)
		free, err := diskfree.FreeBytes(dir)
		if err != nil {
			return Result{Level: Fail, Detail: err.Error()}
		}
		if seen[dir] { // the workspace inside the state dir, or the other way round
			continue
		}
		seen[dir] = true
		details = append(details, fmt.Sprintf("%d MiB free on %s", free>>20, dir))
		r := Result{Level: OK}
		switch {
		case free < diskfree.FailBytes:
			r = Result{Level: Fail, Fix: "free space (journalctl --vacuum-size=100M)"}
		case reserve > 0 && free < reserve:
			r = Result{Level: Warn, Fix: "free space: users' runs and uploads are refused below agent.disk_reserve_mb"}
			details[len(details)-1] += fmt.Sprintf(", under the %d MiB reserve (agent.disk_reserve_mb): exec, documents, video and uploads are refused", reserve>>20)
		case reserve > 0 && free < 2*reserve:
			r = Result{Level: Warn, Fix: "free space before users' runs and uploads reach the reserve (agent.disk_reserve_mb)"}
			details[len(details)-1] += fmt.Sprintf(", less than twice the %d MiB reserve (agent.disk_reserve_mb)", reserve>>20)
		case free < diskfree.WarnBytes:
			r = Result{Level: Warn, Fix: "free space (journalctl --vacuum-size=100M)"}
		}
		if rank(r.Level) > rank(worst.Level) {
			worst = r
		}
	}
	worst.Detail = strings.Join(details, "; ")
	return worst
}

func rank(l Level) int { return map[Level]int{OK: 0, Warn: 1, Fail: 2}[l] }

// existing is dir, or its nearest parent that exists (a state dir made
// at the first start).
func existing(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil || dir == filepath.Dir(dir) {
			return dir
		}
		dir = filepath.Dir(dir)
	}
}

// checkMemory compares what the machine (or the cgroup) can give with what
// the daemon needs: ~400 MB with both models loaded, 2 GiB hard budget.
func (e Env) checkMemory(context.Context) Result {
	avail, err := memAvailable(e.MemInfo)
	if err != nil {
		return Result{Level: Warn, Detail: "cannot read " + e.MemInfo + ": " + err.Error()}
	}
	detail := fmt.Sprintf("%d MiB available", avail>>20)
	if b, err := os.ReadFile(e.CgroupMemMax); err == nil {
		if v := strings.TrimSpace(string(b)); v != "max" {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				detail += fmt.Sprintf(", cgroup limit %d MiB", n>>20)
			}
		}
	}
	const need = 512 << 20
	if avail < need {
		return Result{Level: Warn, Detail: detail + fmt.Sprintf("; the daemon needs about %d MiB with both models", need>>20), Fix: "stop other services or use smaller models"}
	}
	return Result{Level: OK, Detail: detail + fmt.Sprintf("; budget %d MiB", int64(Budget)>>20)}
}

func memAvailable(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no MemAvailable line")
}

func portOf(hostport string) string {
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	return ":" + p
}

func scrub(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "***")
}

// canWrite reports whether this process may create files in dir.
func canWrite(dir string) error {
	f, err := os.CreateTemp(dir, ".doctor-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
