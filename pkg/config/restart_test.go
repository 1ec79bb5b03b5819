package config

import (
	"strings"
	"testing"
	"time"
)

func TestRestartKeys(t *testing.T) {
	a := Default()
	b := Default()
	b.Voice.VAD = VADEnergy
	b.Voice.TTS = true // applied live: not a restart key
	b.WeCom.Debounce.Duration = time.Second
	b.LLM.Model = "other"
	got := strings.Join(RestartKeys(a, b), ",")
	if got != "llm,wecom,voice.vad" {
		t.Errorf("RestartKeys = %s", got)
	}
	if k := RestartKeys(a, Default()); len(k) != 0 {
		t.Errorf("no change: %v", k)
	}
}
