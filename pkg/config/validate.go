package config

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"agent/pkg/egress"
	"agent/pkg/netguard"
)

// Enumerations, in the order messages list them.
var (
	providers     = []string{ProviderOpenAI, ProviderDeepSeek, ProviderDashScope, ProviderOllama, ProviderVLLM, ProviderCustom}
	poolings      = []string{PoolingCLS, PoolingMean}
	execProviders = []string{"cpu", "cuda", "tensorrt"} // onnxrt's; config imports no model package
	dmPolicies    = []string{DMPairing, DMAllowlist, DMOpen, DMClosed}
	vadKinds      = []string{VADAuto, VADSilero, VADEnergy}
	mcpTransports = []string{TransportStdio, TransportHTTP}
	webEngines    = []string{EngineSearXNG, EngineTavily, EngineBrave, EngineGitHub, EngineHuggingFace}
)

// Limits.
const (
	maxToolIterations = 100
	maxThreads        = 64
	maxTopK           = 50
	// maxSocketPath is the longest unix socket path Linux accepts
	// (sizeof(sockaddr_un.sun_path) less the terminating NUL).
	maxSocketPath = 107
	// aesKeyLen is the length of a WeCom EncodingAESKey: 32 bytes, base64
	// without its trailing "=".
	aesKeyLen = 43
	// shortToken is the length under which a voice token draws a warning.
	shortToken = 16
)

// validate checks every value that decoded and the rules across keys. Keys
// that failed to decode are skipped: they already have a problem.
func (p *parser) validate(c *Config) {
	p.validateAgent(c)
	p.validateServer(c)
	p.validateLLM(c)
	p.validateEmbedding(c)
	p.validateASR(c)
	p.validateMemory(c)
	p.validateSecurity(c)
	p.validateWeCom(c)
	p.validateVoice(c)
	p.validateSandbox(c)
	p.validateWeb(c)
	p.validateSkills(c)
	p.validateWeComBot(c)
	p.validatePrivacy(c)
	p.validateFleet(c)
	p.validateMCP(c)
	p.validateChannels(c) // channels.go
}

// fleetName is a box's name: a NATS subject token and consumer name.
var fleetName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

func (p *parser) validateFleet(c *Config) {
	f := &c.Fleet
	if !f.Enabled {
		return
	}
	const when = "required when fleet.enabled is true"
	if strings.TrimSpace(f.NATSURL) == "" {
		p.check("fleet.nats_url", false, when)
	}
	// The URLs are never quoted back: they may carry a password.
	for i, u := range strings.Split(f.NATSURL, ",") {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		pu, err := url.Parse(u)
		switch {
		case err != nil || pu.Host == "":
			p.check("fleet.nats_url", false, "URL %d is not a URL (want nats://HOST:PORT, several comma-separated)", i+1)
		case pu.Scheme != "nats" && pu.Scheme != "tls" && pu.Scheme != "ws" && pu.Scheme != "wss":
			p.check("fleet.nats_url", false, "URL %d: the scheme must be nats, tls, ws or wss, not %q", i+1, pu.Scheme)
		}
	}
	p.check("fleet.enabled", c.WeCom.Enabled, "needs wecom.enabled: the fleet carries the WeCom app's messages (each box answers its users through the app's API)")
	p.check("fleet.box", fleetName.MatchString(f.Box), "%s: 1 to 32 letters, digits, _ or -, not %q", when, f.Box)
	p.check("fleet.default_home", f.DefaultHome == "" || fleetName.MatchString(f.DefaultHome), "must be a box name (1 to 32 letters, digits, _ or -), not %q", f.DefaultHome)
	p.check("fleet.replicas", f.Replicas >= 1 && f.Replicas <= 5, "must be between 1 and 5 (3 on a three-node NATS cluster), not %d", f.Replicas)
	p.check("fleet.tls_key_file", (f.TLSCertFile == "") == (f.TLSKeyFile == ""), "tls_cert_file and tls_key_file go together")
	for _, k := range []struct{ key, path string }{{"fleet.credentials_file", f.CredentialsFile}, {"fleet.tls_ca_file", f.TLSCAFile},
		{"fleet.tls_cert_file", f.TLSCertFile}, {"fleet.tls_key_file", f.TLSKeyFile}} {
		if k.path != "" {
			_, err := os.Stat(k.path)
			p.check(k.key, err == nil, "cannot read %s: %v", k.path, err)
		}
	}
	p.check("fleet.token", f.Token == "" || f.CredentialsFile == "", "token and credentials_file are two ways to log in: set one")
	if f.Enabled && c.WeComBot.Enabled && !f.Ingress {
		p.warn([]string{"fleet", "ingress"}, "", "is false: this box does not hold the WeCom AI Bot connection (only the ingress box does: WeCom keeps one), so [wecom_bot] is not used here (the bot's messages of users homed here come through the ingress, and their replies go back through it)")
	}
}

func (p *parser) validatePrivacy(c *Config) {
	seen := map[string]bool{}
	for _, k := range c.Privacy.Redact {
		p.check("privacy.redact", slices.Contains(RedactKinds, k), "unknown kind %q (known: %s)", k, strings.Join(RedactKinds, ", "))
		p.check("privacy.redact", !seen[k], "%q is listed twice", k)
		seen[k] = true
	}
	if _, err := egress.ParseRules(c.Privacy.EgressAllow); err != nil {
		p.check("privacy.egress_allow", false, "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
}

// check reports a problem at key (a dotted path of plain keys) unless ok
// holds or the key failed to decode.
func (p *parser) check(key string, ok bool, format string, args ...any) {
	p.checkPath(strings.Split(key, "."), ok, format, args...)
}

func (p *parser) checkPath(path []string, ok bool, format string, args ...any) {
	if ok || p.isBad(dotted(path)) {
		return
	}
	p.problem(path, "", format, args...)
}

func nonEmpty(s string) bool { return strings.TrimSpace(s) != "" }

func (p *parser) validateAgent(c *Config) {
	a := &c.Agent
	p.check("agent.name", nonEmpty(a.Name), "must not be empty")
	p.check("agent.workspace", a.Workspace != "", "must not be empty")
	p.check("agent.state_dir", a.StateDir != "", "must not be empty")
	p.check("agent.max_tool_iterations", a.MaxToolIterations >= 1 && a.MaxToolIterations <= maxToolIterations,
		"must be between 1 and %d, not %d", maxToolIterations, a.MaxToolIterations)
	if !p.isBad("agent.timezone") {
		if a.Timezone == "" {
			p.check("agent.timezone", false, "must not be empty (use \"UTC\" or a name such as \"Asia/Shanghai\")")
		} else if loc, err := time.LoadLocation(a.Timezone); err != nil {
			p.check("agent.timezone", false, "unknown time zone %q (want an IANA name such as \"Asia/Shanghai\", or \"UTC\")", a.Timezone)
		} else {
			c.loc = loc
		}
	}
	p.checkPrincipals("agent.owners", a.Owners)
	// At most 16 TiB: more than any disk, and far from overflowing bytes.
	const maxMiB = 16 << 20
	p.check("agent.workspace_quota_mb", a.WorkspaceQuotaMB >= 0 && a.WorkspaceQuotaMB <= maxMiB, "must be 0 (no limit) or a number of MiB up to %d, not %d", maxMiB, a.WorkspaceQuotaMB)
	p.check("agent.disk_reserve_mb", a.DiskReserveMB >= 0 && a.DiskReserveMB <= maxMiB, "must be 0 (no reserve) or a number of MiB up to %d, not %d", maxMiB, a.DiskReserveMB)
	if slices.Contains(a.Owners, "*") && !p.isBad("agent.owners") {
		p.warn([]string{"agent", "owners"}, "", "contains \"*\": every sender is an owner and may approve pairings")
	}
}

// checkPrincipals checks "channel:id" or "*" entries.
func (p *parser) checkPrincipals(key string, list []string) {
	if p.isBad(key) {
		return
	}
	path := strings.Split(key, ".")
	for i, s := range list {
		if s == "*" || validPrincipal(s) {
			continue
		}
		p.problem(path, fmt.Sprintf("%s[%d]", key, i), "invalid entry %q (want \"channel:id\", e.g. \"wecom:zhangsan\", or \"*\")", s)
	}
}

// validPrincipal reports whether s is "channel:id": channel is lower-case
// letters, digits, '_' and '-', starting with a letter; id is not empty and
// has no spaces or control characters.
func validPrincipal(s string) bool {
	ch, id, ok := strings.Cut(s, ":")
	if !ok || ch == "" || id == "" {
		return false
	}
	for i := 0; i < len(ch); i++ {
		c := ch[i]
		switch {
		case 'a' <= c && c <= 'z':
		case i > 0 && ('0' <= c && c <= '9' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	for _, r := range id {
		if r <= ' ' || r == 0x7f || r == '\uFFFD' {
			return false
		}
	}
	return true
}

func (p *parser) validateServer(c *Config) {
	if err := checkListen(c.Server.Listen); err != nil {
		p.check("server.listen", false, "%v", err)
	}
	for i, h := range c.Server.AllowedHosts {
		if !validHostName(h) {
			p.problem([]string{"server", "allowed_hosts"}, fmt.Sprintf("server.allowed_hosts[%d]", i),
				"invalid host %q (want a DNS name or an IP address, e.g. \"agent.example.com\" or \"192.168.1.20\")", h)
		}
	}
	p.check("server.max_conns", c.Server.MaxConns >= 16 && c.Server.MaxConns <= 8192, "must be between 16 and 8192, not %d (admitting a connection scans the open ones)", c.Server.MaxConns)
	p.check("server.max_conns_per_client", c.Server.MaxConnsPerClient >= 1 && c.Server.MaxConnsPerClient <= c.Server.MaxConns,
		"must be between 1 and server.max_conns (%d), not %d", c.Server.MaxConns, c.Server.MaxConnsPerClient)
	s := c.Server.AdminSocket
	if s == "" {
		// Only when state_dir is empty too, which has its own problem.
		return
	}
	p.check("server.admin_socket", len(s) <= maxSocketPath,
		"path %q is %d bytes, longer than a unix socket allows (%d); choose a shorter one", s, len(s), maxSocketPath)
}

// checkListen accepts "host:port" with a numeric port 0..65535 (0: any free
// port, which tests and benchmarks use; the daemon reports the port it got)
// and a host that is empty (every interface), an IP address or a DNS name.
func checkListen(addr string) error {
	bad := fmt.Errorf("invalid address %q (want host:port, e.g. \"127.0.0.1:8080\" or \":8080\")", addr)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return bad
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
		return fmt.Errorf("invalid port %q in %q (want 0 to 65535)", port, addr)
	}
	if host == "" || validHost(host) {
		return nil
	}
	return bad
}

func validHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// ListenIsLoopback reports whether server.listen binds only to the loopback
// interface: "localhost" or a loopback IP (127.0.0.0/8, ::1). An empty host
// (every interface) is not loopback.
func (c *Config) ListenIsLoopback() bool {
	host, _, err := net.SplitHostPort(c.Server.Listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// checkHTTPURL accepts an absolute http or https URL with a host.
func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("invalid URL %q (want http:// or https:// and a host)", redactURL(s))
	}
	if u.Port() != "" {
		if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("invalid port in URL %q", redactURL(s))
		}
	}
	if u.Fragment != "" {
		return fmt.Errorf("URL %q must not have a #fragment", redactURL(s))
	}
	return nil
}

func oneOf(v string, list []string) bool { return slices.Contains(list, v) }

// choices formats a list for messages: "a, b or c".
func choices(list []string) string {
	if len(list) == 1 {
		return list[0]
	}
	return strings.Join(list[:len(list)-1], ", ") + " or " + list[len(list)-1]
}

func (p *parser) validateLLM(c *Config) {
	l := &c.LLM
	if !oneOf(l.Provider, providers) {
		p.check("llm.provider", false, "unknown provider %q (want %s)", l.Provider, choices(providers))
	} else if l.BaseURL == "" {
		p.check("llm.base_url", false, "required when provider is %q", l.Provider)
	}
	if l.BaseURL != "" {
		if err := checkHTTPURL(l.BaseURL); err != nil {
			p.check("llm.base_url", false, "%v", err)
		}
	}
	if l.Model == "" && oneOf(l.Provider, providers) {
		p.check("llm.model", false, "required when provider is %q", l.Provider)
	}
	p.check("llm.max_tokens", l.MaxTokens > 0, "must be greater than 0, not %d", l.MaxTokens)
	p.check("llm.timeout", l.Timeout.Duration > 0, "must be greater than 0, not %q", l.Timeout.String())
}

func (p *parser) validateEmbedding(c *Config) {
	e := &c.Embedding
	p.check("embedding.model_dir", e.ModelDir != "", "must not be empty")
	p.check("embedding.pooling", oneOf(e.Pooling, poolings), "unknown pooling %q (want %s)", e.Pooling, choices(poolings))
	p.check("embedding.threads", e.Threads >= 1 && e.Threads <= maxThreads, "must be between 1 and %d, not %d", maxThreads, e.Threads)
	p.check("embedding.provider", oneOf(e.Provider, execProviders), "unknown execution provider %q (want %s)", e.Provider, choices(execProviders))
}

func (p *parser) validateASR(c *Config) {
	a := &c.ASR
	p.check("asr.model", a.Model != "", "must not be empty")
	p.check("asr.language", a.Language == "auto" || isLangCode(a.Language),
		"invalid language %q (want \"auto\" or a two-letter code such as \"en\" or \"zh\")", a.Language)
	p.check("asr.threads", a.Threads >= 1 && a.Threads <= maxThreads, "must be between 1 and %d, not %d", maxThreads, a.Threads)
	p.check("asr.workers", a.Workers >= 0 && a.Workers <= maxASRWorkers, "must be between 0 (automatic) and %d, not %d", maxASRWorkers, a.Workers)
	p.check("asr.memory_mb", a.MemoryMB >= 0, "must not be negative (0: the default 400), not %d", a.MemoryMB)
}

// maxASRWorkers bounds asr.workers.
const maxASRWorkers = 16

// espeakVoiceName accepts what espeak-ng names voices with (and nothing
// that reads as an option or a path outside its data).
func espeakVoiceName(v string) bool {
	if v == "" || len(v) > 40 || v[0] == '-' || strings.Contains(v, "..") {
		return false
	}
	for _, r := range v {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_+-/", r)
		if !ok {
			return false
		}
	}
	return true
}

func isLangCode(s string) bool {
	return len(s) == 2 && 'a' <= s[0] && s[0] <= 'z' && 'a' <= s[1] && s[1] <= 'z'
}

func (p *parser) validateMemory(c *Config) {
	m := &c.Memory
	p.check("memory.session_max_messages", m.SessionMaxMessages > 0, "must be greater than 0, not %d", m.SessionMaxMessages)
	p.check("memory.compression_overlap", m.CompressionOverlap > 0, "must be greater than 0, not %d", m.CompressionOverlap)
	if m.SessionMaxMessages > 0 && m.CompressionOverlap > 0 && !p.isBad("memory.session_max_messages") {
		p.check("memory.compression_overlap", m.CompressionOverlap < m.SessionMaxMessages,
			"must be less than memory.session_max_messages (%d), not %d", m.SessionMaxMessages, m.CompressionOverlap)
	}
	p.check("memory.dedup_threshold", m.DedupThreshold > 0 && m.DedupThreshold <= 1,
		"must be greater than 0 and at most 1, not %v", m.DedupThreshold)
	p.check("memory.retrieval_top_k", m.RetrievalTopK >= 1 && m.RetrievalTopK <= maxTopK,
		"must be between 1 and %d, not %d", maxTopK, m.RetrievalTopK)
}

func (p *parser) validateSandbox(c *Config) {
	s := &c.Sandbox
	p.check("sandbox.network", oneOf(s.Network, []string{NetworkOff, NetworkOn}), "must be \"off\" or \"on\", not %q", s.Network)
	p.check("sandbox.timeout", s.Timeout.Duration >= time.Second && s.Timeout.Duration <= time.Hour, "must be between 1s and 1h, not %q", s.Timeout.String())
	p.check("sandbox.memory_mb", s.MemoryMB >= 64 && s.MemoryMB <= 16384, "must be between 64 and 16384, not %d", s.MemoryMB)
	p.check("sandbox.cpu_seconds", s.CPUSeconds >= 1 && s.CPUSeconds <= 3600, "must be between 1 and 3600, not %d", s.CPUSeconds)
	p.check("sandbox.max_processes", s.MaxProcesses >= 4 && s.MaxProcesses <= 4096, "must be between 4 and 4096, not %d", s.MaxProcesses)
	p.check("sandbox.max_output_kb", s.MaxOutputKB >= 1 && s.MaxOutputKB <= 1024, "must be between 1 and 1024, not %d", s.MaxOutputKB)
	p.check("sandbox.max_file_mb", s.MaxFileMB >= 1 && s.MaxFileMB <= 65536, "must be between 1 and 65536, not %d", s.MaxFileMB)
	p.check("sandbox.max_runs", s.MaxRuns >= 1 && s.MaxRuns <= 16, "must be between 1 and 16, not %d", s.MaxRuns)
	py := s.Python
	ok := py != "" && len(py) <= 200 && !strings.ContainsAny(py, " \t\n\"'$`;|&")
	if strings.HasPrefix(py, "/") {
		ok = ok && strings.HasPrefix(filepath.Clean(py), "/usr/")
	} else {
		ok = ok && !strings.Contains(py, "/")
	}
	p.check("sandbox.python", ok, "must be a program name such as python3 or an absolute path under /usr (only /usr is visible in the sandbox), not %q", py)
}

func (p *parser) validateWeb(c *Config) {
	w := &c.Web
	seen := map[string]bool{}
	for _, e := range w.Engines {
		switch {
		case !oneOf(e, webEngines):
			p.check("web.engines", false, "unknown engine %q (want %s)", e, choices(webEngines))
		case seen[e]:
			p.check("web.engines", false, "lists %q twice", e)
		}
		seen[e] = true
	}
	for _, u := range []struct{ key, val string }{
		{"web.searxng_base_url", w.SearXNGBaseURL}, {"web.tavily_base_url", w.TavilyBaseURL},
		{"web.brave_base_url", w.BraveBaseURL}, {"web.github_base_url", w.GitHubBaseURL},
		{"web.huggingface_base_url", w.HuggingFaceBaseURL},
	} {
		if u.val == "" && u.key == "web.searxng_base_url" {
			continue // searxng is simply not configured
		}
		if err := checkHTTPURL(u.val); err != nil {
			p.check(u.key, false, "%v", err)
		} else if pu, _ := url.Parse(u.val); pu.RawQuery != "" || pu.ForceQuery {
			// Paths are appended to it; a token in the query would also
			// show in config dumps (only a URL's password is masked).
			p.check(u.key, false, "must not have a ?query (put a key in the engine's _api_key)")
		}
	}
	p.check("web.timeout", w.Timeout.Duration >= time.Second && w.Timeout.Duration <= 5*time.Minute, "must be between 1s and 5m, not %q", w.Timeout.String())
	p.check("web.max_results", w.MaxResults >= 1 && w.MaxResults <= 20, "must be between 1 and 20, not %d", w.MaxResults)
	p.check("web.fetch_max_mb", w.FetchMaxMB >= 1 && w.FetchMaxMB <= 100, "must be between 1 and 100, not %d", w.FetchMaxMB)
	if rules, err := netguard.ParseRules(w.FetchAllow); err != nil {
		p.check("web.fetch_allow", false, "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	} else {
		for _, r := range rules {
			if r.OpensTheBox() {
				p.warn([]string{"web", "fetch_allow"}, "", "%s opens this box itself or cloud metadata (loopback, 169.254.169.254) to web_fetch", r)
			}
		}
	}
}

func (p *parser) validateSecurity(c *Config) {
	s := &c.Security
	p.check("security.dm_policy", oneOf(s.DMPolicy, dmPolicies), "unknown policy %q (want %s)", s.DMPolicy, choices(dmPolicies))
	p.checkPrincipals("security.allow_from", s.AllowFrom)
	if s.DMPolicy == DMAllowlist && len(s.AllowFrom) == 0 && !p.isBad("security.allow_from") {
		p.warn([]string{"security", "allow_from"}, "", "is empty and dm_policy is \"allowlist\": nobody can message the agent")
	}
}

// validateWeCom checks [wecom] only when it is enabled; a disabled section
// is type-checked and nothing more.
func (p *parser) validateWeCom(c *Config) {
	w := &c.WeCom
	if !w.Enabled {
		return
	}
	const when = "required when wecom.enabled is true"
	p.check("wecom.corp_id", nonEmpty(w.CorpID), when)
	p.check("wecom.corp_secret", nonEmpty(w.CorpSecret), when)
	p.check("wecom.agent_id", w.AgentID > 0, "must be greater than 0 when wecom.enabled is true (the AgentId of the app), not %d", w.AgentID)
	p.check("wecom.token", nonEmpty(w.Token), when)
	switch {
	case w.EncodingAESKey == "":
		p.check("wecom.encoding_aes_key", false, when)
	case len(w.EncodingAESKey) != aesKeyLen:
		p.check("wecom.encoding_aes_key", false, "must be exactly %d characters, not %d", aesKeyLen, len(w.EncodingAESKey))
	default:
		if b, err := base64.StdEncoding.DecodeString(w.EncodingAESKey + "="); err != nil || len(b) != 32 {
			p.check("wecom.encoding_aes_key", false, "is not base64 (want the 43 characters WeCom shows, A-Z a-z 0-9 + /)")
		}
	}
	if err := checkHTTPURL(w.APIBase); err != nil {
		p.check("wecom.api_base", false, "%v", err)
	}
	p.check("wecom.debounce", w.Debounce.Duration >= 0, "must not be negative, not %q", w.Debounce.String())
	p.check("wecom.progress_after", w.ProgressAfter.Duration >= 0 && w.ProgressAfter.Duration <= 10*time.Minute, "must be between 0 (off) and 10m, not %q", w.ProgressAfter.String())
}

func (p *parser) validateVoice(c *Config) {
	v := &c.Voice
	if !v.Enabled {
		return
	}
	p.check("voice.vad", oneOf(v.VAD, vadKinds), "unknown detector %q (want %s)", v.VAD, choices(vadKinds))
	p.check("voice.vad_model", v.VADModel != "" || v.VAD == VADEnergy, "must not be empty unless voice.vad is \"energy\"")
	p.check("voice.tts_voice", espeakVoiceName(v.TTSVoice), "%q is not an espeak-ng voice name (letters, digits, _ + - /; for example en, cmn, en-us)", v.TTSVoice)
	if p.isBad("voice.token") {
		return
	}
	if v.Token == "" {
		if c.ListenIsLoopback() || p.isBad("server.listen") || checkListen(c.Server.Listen) != nil {
			return
		}
		// Point at [voice] when the file has it, else at server.listen.
		at := []string{"voice", "token"}
		if p.lines.line(at) == 0 {
			at = []string{"server", "listen"}
		}
		p.problem(at, "voice.token", "required when voice.enabled is true and server.listen (%q) is not a loopback address", c.Server.Listen)
		return
	}
	if len(v.Token) < shortToken {
		p.warn([]string{"voice", "token"}, "", "is shorter than %d characters; use a long random one (e.g. openssl rand -hex 24)", shortToken)
	}
	p.check("voice.command_cache_threshold", c.Voice.CommandCacheThreshold >= 0.5 && c.Voice.CommandCacheThreshold <= 1,
		"must be between 0.5 and 1 (cosine similarity), not %g", c.Voice.CommandCacheThreshold)
	p.check("voice.command_cache_ttl", c.Voice.CommandCacheTTL.Duration >= time.Minute && c.Voice.CommandCacheTTL.Duration <= 90*24*time.Hour,
		"must be between 1m and 90 days, not %s", c.Voice.CommandCacheTTL.Duration)
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (p *parser) validateWeComBot(c *Config) {
	b := c.WeComBot
	u, err := url.Parse(b.URL)
	switch {
	case err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || u.Host == "":
		p.check("wecom_bot.url", false, "must be a wss:// URL, not %q", b.URL)
	case u.Scheme == "ws" && !loopbackHost(u.Hostname()):
		p.check("wecom_bot.url", false, "ws:// would send the secret in clear text; use wss:// (ws:// only for a local test server)")
	}
	if !b.Enabled || (c.Fleet.Enabled && !c.Fleet.Ingress) {
		return // in a fleet, only the ingress box connects
	}
	p.check("wecom_bot.bot_id", strings.TrimSpace(b.BotID) != "", "required when wecom_bot.enabled (the bot's ID from the WeCom admin console)")
	p.check("wecom_bot.secret", strings.TrimSpace(b.Secret) != "", "required when wecom_bot.enabled (the bot's Secret for the long connection)")
}

// skillNameRE is what a skill may be called (pkg/skills).
var skillNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$`)

// skillFileForbidden are the places inside a sandbox a skill's file may
// not be bound to: the system, the run's own folders.
var skillFileForbidden = []string{"/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/dev", "/tmp", "/work", "/shared", "/skills", "/opt/agent"}

func (p *parser) validateSkills(c *Config) {
	s := &c.Skills
	p.check("skills.index_bytes", s.IndexBytes >= 256 && s.IndexBytes <= 65536, "must be between 256 and 65536, not %d", s.IndexBytes)
	for _, name := range slices.Sorted(maps.Keys(s.Entries)) {
		e := s.Entries[name]
		path := []string{"skills", "entries", name}
		if !skillNameRE.MatchString(name) {
			p.problem(path, "", "invalid skill name (want letters, digits, '_', '.' and '-')")
			continue
		}
		for _, k := range sortedKeys(e.Env) {
			if !envNameRE.MatchString(k) {
				p.problem(sub(path, "env"), "", "invalid variable name %q (want letters, digits and '_')", k)
			}
		}
		for _, in := range sortedKeys(e.Files) {
			clean := filepath.Clean(in)
			bad := !filepath.IsAbs(in)
			for _, f := range skillFileForbidden {
				if clean == f || (f != "/" && strings.HasPrefix(clean, f+"/")) {
					bad = true
				}
			}
			if bad {
				p.problem(sub(path, "files"), "", "%q: the path inside must be absolute and outside the system directories, /tmp, /work, /shared and /skills (e.g. /secrets/%s.key)", in, name)
			}
			if e.Files[in] == "" {
				p.problem(sub(path, "files"), "", "%q: give the host file", in)
			}
		}
		for _, u := range e.Users {
			ch, id, ok := strings.Cut(u, ":")
			if !ok || ch == "" || id == "" {
				p.problem(sub(path, "users"), "", "%q: give users as channel:id (wecom:alice)", u)
			}
		}
	}
}

// envNameRE is what a variable given to a sandboxed run may be called.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

func (p *parser) validateMCP(c *Config) {
	for _, name := range slices.Sorted(maps.Keys(c.MCPServers)) {
		s := c.MCPServers[name]
		path := []string{"mcp_servers", name}
		key := dotted(path)
		if !validServerName(name) {
			p.problem(path, "", "invalid server name (want letters, digits, '_' and '-')")
		} else if strings.Contains(name, "__") {
			p.problem(path, "", "server name must not contain \"__\" (tool names are SERVER__TOOL)")
		}
		if p.isBad(key) {
			continue
		}
		transport := s.Transport
		if transport == "" {
			if p.isBad(dotted(sub(path, "transport"))) || p.isBad(dotted(sub(path, "command"))) || p.isBad(dotted(sub(path, "url"))) {
				continue
			}
			switch {
			case s.Command != "" && s.URL == "":
				transport = TransportStdio
			case s.URL != "" && s.Command == "":
				transport = TransportHTTP
			default:
				p.problem(sub(path, "transport"), "", "required (want %s)", choices(mcpTransports))
				continue
			}
			s.Transport = transport
			c.MCPServers[name] = s
		}
		switch transport {
		case TransportStdio:
			p.checkPath(sub(path, "command"), s.Command != "", "required when transport is \"stdio\"")
			if s.URL != "" || len(s.Headers) > 0 {
				p.warn(path, "", "url and headers are ignored when transport is \"stdio\"")
			}
			for _, k := range sortedKeys(s.Env) {
				if k == "" || strings.ContainsAny(k, "=\x00") {
					p.problem(sub(path, "env"), "", "invalid variable name %q", k)
				}
			}
		case TransportHTTP:
			if s.URL == "" {
				p.checkPath(sub(path, "url"), false, "required when transport is \"http\"")
			} else if err := checkHTTPURL(s.URL); err != nil {
				p.checkPath(sub(path, "url"), false, "%v", err)
			}
			if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 {
				p.warn(path, "", "command, args and env are ignored when transport is \"http\"")
			}
			for _, k := range sortedKeys(s.Headers) {
				if !validHeaderName(k) {
					p.problem(sub(path, "headers"), "", "invalid header name %q", k)
				} else if strings.ContainsAny(s.Headers[k], "\r\n\x00") {
					p.problem(sub(sub(path, "headers"), k), "", "header value must not contain CR, LF or NUL")
				}
			}
		default:
			p.checkPath(sub(path, "transport"), false, "unknown transport %q (want %s)", transport, choices(mcpTransports))
		}
	}
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func validServerName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validHeaderName reports whether s is an HTTP token (RFC 9110 tchar).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// validHostName accepts a DNS name (letters, digits, '-', '.', '_') or an IP
// address, optionally with ":port"; "*" is not accepted.
func validHostName(h string) bool {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return h != "" && validHost(h)
}
