package assistant

import (
	"agent/pkg/config"
	"agent/pkg/llm"
)

// llmConfig maps the [llm] section onto the client's Config; an empty
// base_url takes the provider's default (Load has filled it in already for
// a loaded file; a Config built by hand may lack it).
func llmConfig(c config.LLM) llm.Config {
	base := c.BaseURL
	if base == "" {
		base, _ = config.DefaultBaseURL(c.Provider)
	}
	return llm.Config{
		Provider:   c.Provider,
		BaseURL:    base,
		APIKey:     c.APIKey,
		Model:      c.Model,
		VoiceModel: c.VoiceModel,
		Vision:     c.Vision,
		MaxTokens:  c.MaxTokens,
		Timeout:    c.Timeout.Duration,
	}
}
