package assistant

import (
	"context"
	"path/filepath"
	"testing"

	"agent/pkg/config"
	"agent/pkg/egress"
	"agent/pkg/llm/llmtest"
)

// The model self-check (probeLLM) dials with http.DefaultClient: past the
// egress ledger, so privacy.egress_allow does not hold it, agentctl egress
// does not count it, and it goes through HTTP(S)_PROXY from the
// environment, unlike every model request.
func TestModelSelfCheckBypassesTheEgressLedger(t *testing.T) {
	srv := llmtest.New(t)
	srv.Default(llmtest.Text("done"))
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Agent.StateDir = filepath.Join(dir, "var")
	cfg.Agent.Workspace = filepath.Join(dir, "ws")
	cfg.LLM.Provider, cfg.LLM.BaseURL, cfg.LLM.Model = "custom", srv.BaseURL(), "main"
	cfg.Security.DMPolicy = "open"
	st := testStore(t, cfg)
	led := egress.New(egress.Config{})
	led.SetRules([]egress.Rule{{Host: "api.example.invalid"}}) // the model's host is not allowed
	a, err := New(cfg, Deps{Store: st, SysRoot: "/nonexistent", Egress: led})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	_ = a.probeLLM(context.Background())
	if n := len(srv.ModelsRequests()); n != 0 {
		t.Fatalf("the self-check reached %s %d time(s) although privacy.egress_allow does not permit it (the ledger never saw it)", srv.URL(), n)
	}
}
