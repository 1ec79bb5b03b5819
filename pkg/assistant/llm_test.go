package assistant

import (
	"fmt"
	"testing"
	"time"

	"agent/pkg/config"
	"agent/pkg/llm"
)

func TestLLMConfigCopiesTheSection(t *testing.T) {
	got := llmConfig(config.LLM{
		Provider: "deepseek", BaseURL: "https://api.deepseek.com/v1", APIKey: "k", Model: "deepseek-chat",
		VoiceModel: "v", Vision: true, MaxTokens: 4096, Timeout: config.Duration{Duration: time.Minute},
	})
	want := llm.Config{Provider: "deepseek", BaseURL: "https://api.deepseek.com/v1", APIKey: "k", Model: "deepseek-chat",
		VoiceModel: "v", Vision: true, MaxTokens: 4096, Timeout: time.Minute}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("llmConfig = %+v, want %+v", got, want)
	}
	c, err := llm.New(got)
	if err != nil || c.Provider() != "deepseek" {
		t.Errorf("llm.New(llmConfig) = %v, %v", c, err)
	}
}

// Every provider config accepts is one the client knows, and each but
// custom gets its default base_url when the section has none.
func TestLLMConfigKnowsEveryConfigProvider(t *testing.T) {
	for _, p := range []string{config.ProviderOpenAI, config.ProviderDeepSeek, config.ProviderDashScope,
		config.ProviderOllama, config.ProviderVLLM, config.ProviderCustom} {
		lc := llmConfig(config.LLM{Provider: p, Model: "m"})
		want, _ := config.DefaultBaseURL(p)
		if lc.BaseURL != want {
			t.Errorf("%s: base_url = %q, want %q", p, lc.BaseURL, want)
		}
		if p == config.ProviderCustom {
			lc.BaseURL = "http://127.0.0.1:1/v1"
		}
		if _, err := llm.New(lc); err != nil {
			t.Errorf("%s: llm.New: %v", p, err)
		}
	}
}
