package llm

import "agent/pkg/config"

// Provider names are config's (config.ProviderOpenAI ...); so are their
// default base URLs (config.DefaultBaseURL).

// preset is what differs between OpenAI-compatible providers.
type preset struct {
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
	config.ProviderOpenAI: {
		toolChoice:          true,
		streamUsage:         true,
		maxCompletionTokens: true,
	},
	config.ProviderDeepSeek: {
		toolChoice:    true,
		streamUsage:   true,
		sendReasoning: true,
	},
	config.ProviderDashScope: {
		toolChoice:  true,
		streamUsage: true,
	},
	config.ProviderOllama: {},
	config.ProviderVLLM: {
		toolChoice:  true,
		streamUsage: true,
	},
	// custom: an unknown server; send only the core fields.
	config.ProviderCustom: {
		toolChoice: true,
	},
}
