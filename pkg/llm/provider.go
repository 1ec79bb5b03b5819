package llm

// Provider names are the [llm] provider values. pkg/config knows them too
// (it checks them and gives each its default base_url); pkg/assistant, which
// maps the one onto the other, checks that the two lists agree
// (TestLLMConfigKnowsEveryConfigProvider).

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
	"openai": {
		toolChoice:          true,
		streamUsage:         true,
		maxCompletionTokens: true,
	},
	"deepseek": {
		toolChoice:    true,
		streamUsage:   true,
		sendReasoning: true,
	},
	"dashscope": {
		toolChoice:  true,
		streamUsage: true,
	},
	"ollama": {},
	"vllm": {
		toolChoice:  true,
		streamUsage: true,
	},
	// custom: an unknown server; send only the core fields.
	"custom": {
		toolChoice: true,
	},
}
