package assistant

import (
	"agent/pkg/scheduler"
	"context"
	"path/filepath"
	"testing"

	"agent/pkg/config"
	"agent/pkg/llm/llmtest"
)

// An llm_task owned by a user of a latency-first channel (voice) runs as
// that user's own turns do: on llm.voice_model with the lean memory block;
// one of another channel's user runs on the main model.
func TestScheduledTaskOfAFastChannelIsFast(t *testing.T) {
	srv := llmtest.New(t)
	srv.Default(llmtest.Text("done"))
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Agent.StateDir = filepath.Join(dir, "var")
	cfg.Agent.Workspace = filepath.Join(dir, "ws")
	cfg.LLM.Provider, cfg.LLM.BaseURL, cfg.LLM.Model, cfg.LLM.VoiceModel = "custom", srv.BaseURL(), "main", "fast"
	cfg.Security.DMPolicy = "open"
	st := testStore(t, cfg)
	a, err := New(cfg, Deps{Store: st, SysRoot: "/nonexistent", Fast: func(ch string) bool { return ch == "voice" }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	if _, err := a.schedulePrompt(context.Background(), scheduler.Task{Owner: "voice:alice", Prompt: "what is on today?", Channel: "voice", To: "alice"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Last().Model; got != "fast" {
		t.Errorf("an llm_task owned by voice:alice ran on model %q; before the split it ran on llm.voice_model %q", got, "fast")
	}
	if _, err := a.schedulePrompt(context.Background(), scheduler.Task{Owner: "wecom:bob", Prompt: "what is on today?", Channel: "wecom", To: "bob"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Last().Model; got != "main" {
		t.Errorf("an llm_task owned by wecom:bob ran on model %q, want the main model", got)
	}
}
