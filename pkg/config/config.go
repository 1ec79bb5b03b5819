// Package config loads, checks and describes the daemon's config.toml.
//
// The file is decoded once, checked key by key and across keys, and either
// accepted whole or rejected with every problem found, each naming the file,
// the line (where the TOML library can tell), the key and the reason:
//
//	config.toml:12: llm.timeout: invalid duration "abc"
//
// Nothing here is global, nothing is ever written, and the environment is
// injected (Env). Find picks the file, Load reads it, Parse does the rest:
//
//  1. Decode the TOML. A syntax error stops here, with its line.
//  2. Move deprecated keys to their new names, with a warning (renamedKeys;
//     none yet).
//  3. Copy every known key onto Default(), checking its TOML type. Unknown
//     keys are warnings, with "did you mean ...?" for near misses. String
//     values, including those inside arrays and maps, get ${VAR}
//     interpolation.
//  4. Apply $STATE_DIRECTORY (systemd StateDirectory=), read secret files,
//     fill values derived from others (llm.base_url and llm.model from
//     llm.provider, server.admin_socket from agent.state_dir) and make
//     paths absolute against the config file's directory.
//  5. Validate every value and the rules that tie keys together.
//
// # Interpolation
//
// After decoding, "${NAME}" inside any string value is replaced with the
// environment variable NAME (NAME is [A-Za-z_][A-Za-z0-9_]*). "$${" is a
// literal "${"; any other "$" is kept as it is. Substituted text is never
// interpolated again and never parsed as TOML, so a variable cannot inject
// keys. An unclosed "${" or a bad name is a Problem. An unset variable becomes
// "" and yields a Warning only where the key matters: keys of [wecom] only when
// wecom.enabled is true, keys of [voice] only when voice.enabled is true, every
// other key always.
//
// # Secrets
//
// A struct tag on the fields below says which values are secrets; it is
// the only list of them. The secret keys are the strings tagged
// secret:"true". Each may instead be given as KEY_file = "path" (relative
// to the config file's directory): the file is read and trailing
// whitespace trimmed. Setting both KEY and KEY_file is a Problem. For these
// keys only, a value that is exactly "${VAR}" also honours the container
// convention VAR_FILE: when VAR_FILE is set (and not empty) the secret is
// read from the file it names; setting both VAR and VAR_FILE is a Problem.
// Files of a disabled [wecom] or [voice] are not read. Redacted and Secrets
// let dumps and logs hide secret values: those of the secret keys, every
// value of a map tagged secret:"values", and the password of a URL tagged
// secret:"url".
//
// # Paths
//
// agent.workspace, agent.state_dir, server.admin_socket, embedding.model_dir,
// embedding.onnxruntime_lib and asr.model are made absolute against the
// config file's directory. $STATE_DIRECTORY, when set, replaces
// agent.state_dir (the first path if it lists several); an admin_socket
// inside the configured state_dir moves with it.
package config

import (
	"slices"
	"time"
)

// ExitConfig is the exit status for an invalid configuration (sysexits.h
// EX_CONFIG). The systemd unit lists it in RestartPreventExitStatus=.
const ExitConfig = 78

// DefaultPath is where the daemon looks for its config when ./config.toml does
// not exist and no path is given.
const DefaultPath = "/etc/agent/config.toml"

// Config is the whole configuration. Load and Parse return it with defaults
// filled in, relative paths made absolute and secrets read.
type Config struct {
	// Path is the absolute path of the file it was loaded from ("" for
	// Default() and Parse).
	Path string `toml:"-"`

	Agent      Agent                `toml:"agent"`
	Server     Server               `toml:"server"`
	LLM        LLM                  `toml:"llm"`
	Embedding  Embedding            `toml:"embedding"`
	ASR        ASR                  `toml:"asr"`
	Memory     Memory               `toml:"memory"`
	Security   Security             `toml:"security"`
	WeCom      WeCom                `toml:"wecom"`
	Voice      Voice                `toml:"voice"`
	Sandbox    Sandbox              `toml:"sandbox"`
	WeComBot   WeComBot             `toml:"wecom_bot"`
	Web        Web                  `toml:"web"`
	Skills     Skills               `toml:"skills"`
	Privacy    Privacy              `toml:"privacy"`
	Fleet      Fleet                `toml:"fleet"`
	MCPServers map[string]MCPServer `toml:"mcp_servers"`
	// Channels are the out-of-process channels ([channels.NAME]):
	// executables speaking agent.channel.v1 (pkg/channel/plugin).
	Channels map[string]ChannelPlugin `toml:"channels"`

	loc *time.Location // agent.timezone, loaded during validation
}

// Agent is the [agent] section.
type Agent struct {
	Name              string   `toml:"name"`
	Workspace         string   `toml:"workspace"`
	StateDir          string   `toml:"state_dir"`
	Timezone          string   `toml:"timezone"`
	MaxToolIterations int      `toml:"max_tool_iterations"`
	Owners            []string `toml:"owners"`
	// WorkspaceQuotaMB bounds each user's private workspace (their files
	// and uploads); 0 = no limit.
	WorkspaceQuotaMB int `toml:"workspace_quota_mb"`
	// DiskReserveMB is the free disk no user's run or upload may take on
	// the filesystems they write to (the workspace's, the sandbox's
	// /tmp): the box keeps it for its database and logs.
	DiskReserveMB int `toml:"disk_reserve_mb"`
}

// Server is the [server] section.
type Server struct {
	Listen      string `toml:"listen"`
	AdminSocket string `toml:"admin_socket"`
	// AllowedHosts are the Host header values (names or addresses, an
	// optional :port ignored) every HTTP path accepts; loopback names and
	// addresses are always allowed. A request with another Host is
	// refused (DNS rebinding). Empty: loopback only, plus the host of
	// server.listen when it is not a wildcard.
	AllowedHosts []string `toml:"allowed_hosts"`
	// MaxConns caps concurrent HTTP connections (a share is kept free for
	// /healthz); MaxConnsPerClient caps them per client address.
	MaxConns          int `toml:"max_conns"`
	MaxConnsPerClient int `toml:"max_conns_per_client"`
}

// LLM is the [llm] section.
type LLM struct {
	Provider   string   `toml:"provider"`
	BaseURL    string   `toml:"base_url" secret:"url"`
	APIKey     string   `toml:"api_key" secret:"true"`
	Model      string   `toml:"model"`
	VoiceModel string   `toml:"voice_model"`
	Vision     bool     `toml:"vision"`
	MaxTokens  int      `toml:"max_tokens"`
	Timeout    Duration `toml:"timeout"`
}

// Embedding is the [embedding] section.
type Embedding struct {
	ModelDir       string `toml:"model_dir"`
	OnnxruntimeLib string `toml:"onnxruntime_lib"`
	Pooling        string `toml:"pooling"`
	Threads        int    `toml:"threads"`
	// Provider is where the model runs: "cpu" (default), "cuda" or
	// "tensorrt" (these need a GPU build of ONNX Runtime in
	// onnxruntime_lib; the daemon falls back to the CPU and says why).
	Provider string `toml:"provider"`
}

// ASR is the [asr] section.
type ASR struct {
	Model    string `toml:"model"`
	Language string `toml:"language"`
	Threads  int    `toml:"threads"`
	// Workers is the number of utterances recognised at once (0: as many
	// as the CPU and MemoryMB allow).
	Workers int `toml:"workers"`
	// MemoryMB bounds the automatic Workers: the decoding states' memory
	// in MiB (0: 400).
	MemoryMB int `toml:"memory_mb"`
	// GPU runs whisper on the GPU when whisper.cpp was built with CUDA
	// (`make build-cuda`); otherwise the CPU, with a warning.
	GPU bool `toml:"gpu"`
}

// Memory is the [memory] section.
type Memory struct {
	SessionMaxMessages int     `toml:"session_max_messages"`
	CompressionOverlap int     `toml:"compression_overlap"`
	DedupThreshold     float64 `toml:"dedup_threshold"`
	RetrievalTopK      int     `toml:"retrieval_top_k"`
}

// Security is the [security] section.
type Security struct {
	DMPolicy  string   `toml:"dm_policy"`
	AllowFrom []string `toml:"allow_from"`
	// OwnerBroadcast lets agent.owners address many people at once
	// through a tool (WeCom "@all", "a|b" lists, tag and department
	// targets). Nobody else ever can. Default false.
	OwnerBroadcast bool `toml:"owner_broadcast"`
}

// WeCom is the [wecom] section.
type WeCom struct {
	Enabled        bool     `toml:"enabled"`
	CorpID         string   `toml:"corp_id"`
	CorpSecret     string   `toml:"corp_secret" secret:"true"`
	AgentID        int      `toml:"agent_id"`
	Token          string   `toml:"token" secret:"true"`
	EncodingAESKey string   `toml:"encoding_aes_key" secret:"true"`
	APIBase        string   `toml:"api_base" secret:"url"`
	Debounce       Duration `toml:"debounce"`
	// ProgressAfter: a turn still running this long after it started
	// sends the user one short "working on it" (0: never). Applies on
	// reload.
	ProgressAfter Duration `toml:"progress_after"`
}

// WeComBot is the [wecom_bot] section: WeCom's AI Bot over the long
// connection the box dials itself (no public address needed).
type WeComBot struct {
	Enabled bool   `toml:"enabled"`
	BotID   string `toml:"bot_id"`
	Secret  string `toml:"secret" secret:"true"`
	// URL is the long-connection endpoint (tests point it at a local
	// server).
	URL string `toml:"url"`
	// Welcome answers a user opening the bot's chat ("": none).
	Welcome string `toml:"welcome"`
}

// DefaultWeComBotURL is WeCom's long-connection endpoint.
const DefaultWeComBotURL = "wss://openws.work.weixin.qq.com"

// Sandbox is the [sandbox] section: the bounds of every sandboxed run
// (exec, read_document's PDF converter, the video tools).
type Sandbox struct {
	// Network is "off" (default: runs have no network at all) or "on"
	// (a run that asks for it shares the box's network).
	Network string `toml:"network"`
	// Timeout is an exec run's wall time, and the most timeout_s may ask.
	Timeout Duration `toml:"timeout"`
	// MemoryMB bounds each process's address space.
	MemoryMB     int `toml:"memory_mb"`
	CPUSeconds   int `toml:"cpu_seconds"`
	MaxProcesses int `toml:"max_processes"`
	// MaxOutputKB is how much of stdout and of stderr a run keeps; a run
	// printing more is stopped.
	MaxOutputKB int `toml:"max_output_kb"`
	// MaxFileMB is the largest file a run may write.
	MaxFileMB int `toml:"max_file_mb"`
	// MaxRuns bounds the runs at once; more wait.
	MaxRuns int `toml:"max_runs"`
	// Python is what python3 names inside: a program name found in
	// /usr/local/bin or /usr/bin, or an absolute path under /usr.
	Python string `toml:"python"`
}

// Skills is the [skills] section: where skills come from besides the
// workspace's skills/ folder (precedence bundled < installed <
// workspace), the prompt index's budget and each skill's own settings.
type Skills struct {
	// BundledDir holds the skills shipped with the package (missing:
	// none).
	BundledDir string `toml:"bundled_dir"`
	// InstalledDir is where `agentctl skills install` puts skills
	// (default <state_dir>/skills).
	InstalledDir string `toml:"installed_dir"`
	// IndexBytes bounds the skills index in every system prompt.
	IndexBytes int `toml:"index_bytes"`
	// Entries are per-skill settings, by skill name.
	Entries map[string]SkillEntry `toml:"entries"`
}

// SkillEntry is one skill's settings: what its exec runs get (never the
// daemon's own secrets: only what is listed here) and who may use it.
type SkillEntry struct {
	// Env are variables its exec runs see (and its requirements count).
	Env map[string]string `toml:"env" secret:"values"`
	// Files are host files bound read-only into its exec runs: the path
	// inside -> the host file.
	Files map[string]string `toml:"files"`
	// Users may use the skill ("wecom:alice"); empty: everyone.
	Users []string `toml:"users"`
}

// Sandbox network settings.
const (
	NetworkOff = "off"
	NetworkOn  = "on"
)

// Web is the [web] section: the web_search engines and web_fetch's
// limits. Engine base URLs are the operator's and trusted; every URL a
// user or the model supplies goes through web_fetch's SSRF guard.
type Web struct {
	// Engines lists the web_search engines in the order they are tried.
	// One is offered when it is configured: searxng needs
	// searxng_base_url, tavily and brave need their API key; github and
	// huggingface work without a key (with lower rate limits).
	Engines            []string `toml:"engines"`
	SearXNGBaseURL     string   `toml:"searxng_base_url" secret:"url"`
	TavilyAPIKey       string   `toml:"tavily_api_key" secret:"true"`
	TavilyBaseURL      string   `toml:"tavily_base_url" secret:"url"`
	BraveAPIKey        string   `toml:"brave_api_key" secret:"true"`
	BraveBaseURL       string   `toml:"brave_base_url" secret:"url"`
	GitHubAPIKey       string   `toml:"github_api_key" secret:"true"`
	GitHubBaseURL      string   `toml:"github_base_url" secret:"url"`
	HuggingFaceAPIKey  string   `toml:"huggingface_api_key" secret:"true"`
	HuggingFaceBaseURL string   `toml:"huggingface_base_url" secret:"url"`
	// Timeout bounds one search request and one whole fetch.
	Timeout Duration `toml:"timeout"`
	// MaxResults is how many results a search returns unless the call
	// asks for fewer (at most 20).
	MaxResults int `toml:"max_results"`
	// FetchAllow lets web_fetch reach what the SSRF guard refuses
	// otherwise: "wiki.corp.lan", "*.corp.lan", "10.1.0.0/16",
	// "192.168.1.20", "[fd00::1]", each optionally with ":PORT" to allow
	// that port too; ":8080" allows a port on public addresses.
	FetchAllow []string `toml:"fetch_allow"`
	// FetchMaxMB is the largest body web_fetch reads.
	FetchMaxMB int `toml:"fetch_max_mb"`
}

// Fleet is the [fleet] section: several boxes of one office sharing one
// WeCom app over NATS JetStream (pkg/fleet). Off by default: a single box
// needs no NATS.
type Fleet struct {
	Enabled bool `toml:"enabled"`
	// NATSURL is the NATS server(s), comma-separated as nats.go takes
	// them ("nats://10.0.0.5:4222,nats://10.0.0.6:4222"; tls:// for TLS).
	// A secret as a whole (a URL may carry a password or a token, and
	// there may be several): nats_url_file works too.
	NATSURL string `toml:"nats_url" secret:"true"`
	// Box is this box's name in the fleet (letters, digits, _ and -).
	Box string `toml:"box"`
	// Ingress: this box takes WeCom's callbacks for the whole fleet
	// (WeCom's one callback URL points at it). A box that is not the
	// ingress refuses them.
	Ingress bool `toml:"ingress"`
	// DefaultHome is the box of a conversation seen for the first time
	// ("": the ingress box).
	DefaultHome string `toml:"default_home"`
	// Replicas of the fleet's stream and buckets: 1 on a single NATS
	// server, 3 on a three-node cluster.
	Replicas int `toml:"replicas"`
	// CredentialsFile is a NATS .creds file (user JWT and NKey seed);
	// Token a NATS token (or token_file). TLSCAFile, TLSCertFile and
	// TLSKeyFile are PEM files for tls:// servers (the CA to trust, and a
	// client certificate when the server asks for one).
	CredentialsFile string `toml:"credentials_file"`
	Token           string `toml:"token" secret:"true"`
	TLSCAFile       string `toml:"tls_ca_file"`
	TLSCertFile     string `toml:"tls_cert_file"`
	TLSKeyFile      string `toml:"tls_key_file"`
}

// Privacy is the [privacy] section.
type Privacy struct {
	// Redact lists the kinds of personal data replaced by placeholders
	// before a request goes to the model and put back in its answer
	// (pkg/redact): phone, id_card, email, bank_card, plate. Empty: none.
	Redact []string `toml:"redact"`
	// EgressAllow is where the daemon may connect (pkg/egress): host
	// names, "*.domain", addresses, CIDRs or "*", each optionally as
	// "PURPOSE=ENTRY" (llm, wecom, wecom_bot, mcp, web, models, doctor, fleet).
	// Empty: what the configuration names (the model, WeCom, the AI Bot,
	// HTTP MCP servers; any host for the web tools and the bot's media).
	EgressAllow []string `toml:"egress_allow"`
}

// RedactKinds are the kinds privacy.redact may name (pkg/redact.Kinds).
var RedactKinds = []string{"phone", "id_card", "email", "bank_card", "plate"}

// Web search engines, in the default order.
const (
	EngineSearXNG     = "searxng"
	EngineTavily      = "tavily"
	EngineBrave       = "brave"
	EngineGitHub      = "github"
	EngineHuggingFace = "huggingface"
)

// Voice is the [voice] section.
type Voice struct {
	Enabled bool   `toml:"enabled"`
	Token   string `toml:"token" secret:"true"`
	// VAD picks the end-of-utterance detector: "auto" (Silero when
	// VADModel loads, else energy), "silero" or "energy".
	VAD      string `toml:"vad"`
	VADModel string `toml:"vad_model"` // Silero VAD ONNX model
	// PartialTranscripts sends transcripts of an utterance while it is
	// spoken (final:false), when a speech worker is idle.
	PartialTranscripts bool `toml:"partial_transcripts"`
	// TTS speaks final replies (espeak-ng) to clients whose hello does
	// not say "tts":false; TTSVoice is the espeak-ng voice.
	TTS      bool   `toml:"tts"`
	TTSVoice string `toml:"tts_voice"`
	// CommandCache answers repeated voice and hardware commands from
	// the box (pkg/cmdcache): an utterance at least
	// CommandCacheThreshold close (cosine) to one answered before by one
	// repeatable tool call runs that call again without the model.
	// Entries live CommandCacheTTL.
	CommandCache          bool     `toml:"command_cache"`
	CommandCacheThreshold float64  `toml:"command_cache_threshold"`
	CommandCacheTTL       Duration `toml:"command_cache_ttl"`
}

// MCPServer is one [mcp_servers.NAME] table.
type MCPServer struct {
	Transport string            `toml:"transport"`               // "stdio" or "http"
	Command   string            `toml:"command"`                 // stdio
	Args      []string          `toml:"args"`                    // stdio
	Env       map[string]string `toml:"env" secret:"values"`     // stdio
	URL       string            `toml:"url" secret:"url"`        // http
	Headers   map[string]string `toml:"headers" secret:"values"` // http
}

// ChannelPlugin is one [channels.NAME] table: a channel run as a process
// of its own that speaks agent.channel.v1 on its stdin and stdout
// (pkg/channel/plugin). Its users are "NAME:sender".
type ChannelPlugin struct {
	// Command is the executable: an absolute path, a path relative to the
	// config file's directory (with a '/'), or a name looked up on PATH.
	// Parse makes it the absolute path of an existing executable file.
	Command string   `toml:"command"`
	Args    []string `toml:"args"`
	// Env is the plugin's whole environment besides PATH (the daemon's,
	// unless Env sets it); its values are secrets.
	Env map[string]string `toml:"env" secret:"values"`
}

// Env looks up an environment variable. Pass OSEnv (os.LookupEnv) in
// production; tests inject a map. A nil Env is an empty environment.
type Env func(key string) (string, bool)

// LLM providers, DM policies, pooling modes and MCP transports.
const (
	ProviderOpenAI    = "openai"
	ProviderDeepSeek  = "deepseek"
	ProviderDashScope = "dashscope"
	ProviderOllama    = "ollama"
	ProviderVLLM      = "vllm"
	ProviderCustom    = "custom"

	DMPairing   = "pairing"
	DMAllowlist = "allowlist"
	DMOpen      = "open"
	DMClosed    = "closed"

	PoolingCLS  = "cls"
	PoolingMean = "mean"

	TransportStdio = "stdio"
	TransportHTTP  = "http"

	VADAuto   = "auto"
	VADSilero = "silero"
	VADEnergy = "energy"
)

// providerBaseURLs holds the base_url each provider gets when none is set.
// ProviderCustom has none: its base_url is required.
var providerBaseURLs = map[string]string{
	ProviderOpenAI:    "https://api.openai.com/v1",
	ProviderDeepSeek:  "https://api.deepseek.com/v1",
	ProviderDashScope: "https://dashscope.aliyuncs.com/compatible-mode/v1",
	ProviderOllama:    "http://127.0.0.1:11434/v1",
	ProviderVLLM:      "http://127.0.0.1:8000/v1",
	ProviderCustom:    "",
}

// NeedsAPIKey reports whether provider is a hosted service that refuses
// requests without an API key (local servers and custom endpoints may not).
func NeedsAPIKey(provider string) bool { return hostedProviders[provider] }

// hostedProviders need an API key to answer at all.
var hostedProviders = map[string]bool{
	ProviderOpenAI:    true,
	ProviderDeepSeek:  true,
	ProviderDashScope: true,
}

// DefaultBaseURL returns the base_url used for provider when none is set, and
// whether provider is known. It is "" for "custom", whose base_url is required.
func DefaultBaseURL(provider string) (string, bool) {
	u, ok := providerBaseURLs[provider]
	return u, ok
}

// DefaultBundledSkills is where the package puts its skills.
const DefaultBundledSkills = "/usr/share/agent/skills"

// defaultSkillsIndexBytes bounds the skills index in the prompt.
const defaultSkillsIndexBytes = 4096

// Default values. Paths are relative to the config file's directory.
const (
	defaultName              = "agent"
	defaultWorkspace         = "workspace"
	defaultStateDir          = "var"
	defaultTimezone          = "UTC"
	defaultMaxToolIterations = 20
	defaultWorkspaceQuotaMB  = 200
	defaultDiskReserveMB     = 500
	defaultMaxConns          = 1024
	defaultMaxConnsPerClient = 64
	defaultListen            = "127.0.0.1:8080"
	adminSocketName          = "agent.sock"
	defaultProvider          = ProviderOpenAI
	defaultOpenAIModel       = "gpt-4o"
	defaultMaxTokens         = 4096
	defaultLLMTimeout        = 60 * time.Second
	defaultEmbeddingModelDir = "models/bge-small-en-v1.5"
	// defaultEmbeddingModelDirZH is the default when asr.language is "zh".
	defaultEmbeddingModelDirZH = "models/bge-small-zh-v1.5"
	defaultPooling             = PoolingCLS
	defaultThreads             = 2
	defaultASRModel            = "models/ggml-base.bin"
	defaultASRLanguage         = "auto"
	defaultVADModel            = "models/silero_vad_v5.onnx"
	defaultTTSVoice            = "en"
	defaultSessionMax          = 40
	defaultOverlap             = 5
	defaultDedupThreshold      = 0.92
	defaultTopK                = 5
	defaultDMPolicy            = DMPairing
	defaultWeComAPIBase        = "https://qyapi.weixin.qq.com"
	defaultDebounce            = 3 * time.Second
	defaultProgressAfter       = 8 * time.Second
	defaultSandboxTimeout      = 60 * time.Second
	defaultSandboxMemoryMB     = 512
	defaultSandboxCPUSeconds   = 60
	defaultSandboxProcesses    = 64
	defaultSandboxOutputKB     = 64
	defaultSandboxFileMB       = 100
	defaultSandboxRuns         = 4
	defaultSandboxPython       = "python3"
	defaultTavilyBaseURL       = "https://api.tavily.com"
	defaultBraveBaseURL        = "https://api.search.brave.com"
	defaultGitHubBaseURL       = "https://api.github.com"
	defaultHuggingFaceURL      = "https://huggingface.co"
	defaultWebTimeout          = 15 * time.Second
	defaultWebMaxResults       = 5
	defaultFetchMaxMB          = 10
)

// Default returns the configuration an empty config.toml yields, before
// relative paths are resolved: every path is relative and Path is "".
func Default() *Config {
	return &Config{
		Agent: Agent{
			Name:              defaultName,
			Workspace:         defaultWorkspace,
			StateDir:          defaultStateDir,
			Timezone:          defaultTimezone,
			MaxToolIterations: defaultMaxToolIterations,
			Owners:            []string{},
			WorkspaceQuotaMB:  defaultWorkspaceQuotaMB,
			DiskReserveMB:     defaultDiskReserveMB,
		},
		Server: Server{
			Listen:            defaultListen,
			AdminSocket:       defaultStateDir + "/" + adminSocketName,
			AllowedHosts:      []string{},
			MaxConns:          defaultMaxConns,
			MaxConnsPerClient: defaultMaxConnsPerClient,
		},
		LLM: LLM{
			Provider:  defaultProvider,
			BaseURL:   providerBaseURLs[defaultProvider],
			Model:     defaultOpenAIModel,
			MaxTokens: defaultMaxTokens,
			Timeout:   Duration{defaultLLMTimeout},
		},
		Embedding: Embedding{
			ModelDir: defaultEmbeddingModelDir,
			Pooling:  defaultPooling,
			Threads:  defaultThreads,
			Provider: "cpu",
		},
		ASR: ASR{
			Model:    defaultASRModel,
			Language: defaultASRLanguage,
			Threads:  defaultThreads,
		},
		Memory: Memory{
			SessionMaxMessages: defaultSessionMax,
			CompressionOverlap: defaultOverlap,
			DedupThreshold:     defaultDedupThreshold,
			RetrievalTopK:      defaultTopK,
		},
		Security: Security{
			DMPolicy:  defaultDMPolicy,
			AllowFrom: []string{},
		},
		WeCom: WeCom{
			APIBase:       defaultWeComAPIBase,
			Debounce:      Duration{defaultDebounce},
			ProgressAfter: Duration{defaultProgressAfter},
		},
		Voice: Voice{
			Enabled:            true,
			VAD:                VADAuto,
			VADModel:           defaultVADModel,
			PartialTranscripts: true,
			TTSVoice:           defaultTTSVoice,
			CommandCache:       true,
			// High: random text is far below, a repeated command
			// (the same words, a little noise) above.
			CommandCacheThreshold: 0.95,
			CommandCacheTTL:       Duration{7 * 24 * time.Hour},
		},
		Sandbox: Sandbox{
			Network:      NetworkOff,
			Timeout:      Duration{defaultSandboxTimeout},
			MemoryMB:     defaultSandboxMemoryMB,
			CPUSeconds:   defaultSandboxCPUSeconds,
			MaxProcesses: defaultSandboxProcesses,
			MaxOutputKB:  defaultSandboxOutputKB,
			MaxFileMB:    defaultSandboxFileMB,
			MaxRuns:      defaultSandboxRuns,
			Python:       defaultSandboxPython,
		},
		WeComBot: WeComBot{URL: DefaultWeComBotURL},
		Fleet:    Fleet{Replicas: 1},
		Skills: Skills{
			BundledDir: DefaultBundledSkills,
			IndexBytes: defaultSkillsIndexBytes,
		},
		Web: Web{
			Engines:            slices.Clone(webEngines),
			TavilyBaseURL:      defaultTavilyBaseURL,
			BraveBaseURL:       defaultBraveBaseURL,
			GitHubBaseURL:      defaultGitHubBaseURL,
			HuggingFaceBaseURL: defaultHuggingFaceURL,
			Timeout:            Duration{defaultWebTimeout},
			MaxResults:         defaultWebMaxResults,
			FetchAllow:         []string{},
			FetchMaxMB:         defaultFetchMaxMB,
		},
		Privacy: Privacy{Redact: []string{}, EgressAllow: []string{}},
		loc:     time.UTC,
	}
}

// Location returns agent.timezone as a *time.Location. Load and Parse have
// already checked that it loads; for a Config built by hand an unloadable zone
// gives UTC.
func (c *Config) Location() *time.Location {
	if c.loc != nil {
		return c.loc
	}
	loc, err := time.LoadLocation(c.Agent.Timezone)
	if err != nil || c.Agent.Timezone == "" {
		return time.UTC
	}
	return loc
}
