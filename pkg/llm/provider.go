package llm

// Providers, matching the values of llm.provider in config.toml.
const (
	ProviderOpenAI    = "openai"
	ProviderDeepSeek  = "deepseek"
	ProviderDashScope = "dashscope"
	ProviderOllama    = "ollama"
	ProviderVLLM      = "vllm"
	ProviderCustom    = "custom"
)

// preset is what differs between OpenAI-compatible providers.
type preset struct {
	baseURL string
	// toolChoice: tool_choice may be sent (Ollama rejects or ignores it).
	toolChoice bool
	// streamUsage: stream_options.include_usage is understood.
	streamUsage bool
	// sendReasoning: assistant messages carry reasoning_content back
	// (DeepSeek thinking mode with tools answers 400 without it).
	sendReasoning bool
	// maxCompletionTokens: the limit goes in max_completion_tokens (OpenAI
	// deprecated max_tokens, and its reasoning models reject it).
	maxCompletionTokens bool
}

var presets = map[string]preset{
	ProviderOpenAI: {
		baseURL:             "https://api.openai.com/v1",
		toolChoice:          true,
		streamUsage:         true,
		maxCompletionTokens: true,
	},
	ProviderDeepSeek: {
		baseURL:       "https://api.deepseek.com/v1",
		toolChoice:    true,
		streamUsage:   true,
		sendReasoning: true,
	},
	ProviderDashScope: {
		baseURL:     "https://dashscope.aliyuncs.com/compatible-mode/v1",
		toolChoice:  true,
		streamUsage: true,
	},
	ProviderOllama: {
		baseURL: "http://127.0.0.1:11434/v1",
	},
	ProviderVLLM: {
		baseURL:     "http://127.0.0.1:8000/v1",
		toolChoice:  true,
		streamUsage: true,
	},
	// custom: an unknown server; send only the core fields.
	ProviderCustom: {
		toolChoice: true,
	},
}
