package agent

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"agent/pkg/llm"
	"agent/pkg/session"
	"agent/pkg/store/storetest"
	"agent/pkg/tools"
)

// fakeLLM answers with zero latency: a tool call when the last message is
// the user's, text after a tool result.
type fakeLLM struct{}

func (fakeLLM) Chat(ctx context.Context, req llm.Request) (llm.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	u := llm.Usage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}
	if last.Role == llm.RoleUser {
		return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "echo", Arguments: `{"q":"weather"}`}},
		}}, FinishReason: llm.FinishToolCalls, Usage: u}, nil
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "It is sunny."}, FinishReason: llm.FinishStop, Usage: u}, nil
}

func (f fakeLLM) Stream(ctx context.Context, req llm.Request, fn func(llm.Delta) error) (llm.Response, error) {
	return f.Chat(ctx, req)
}

// BenchmarkLoopOverhead runs turns of two model calls (one tool step, one
// answer) on a 40-message session with a zero-latency LLM: everything
// measured is the loop's own cost (SQLite reads and appends, repair, prune,
// prompt, tool dispatch). step-p50/step-p99 are per model call, from 200
// turns run before the timed loop.
func BenchmarkLoopOverhead(b *testing.B) {
	ctx := context.Background()
	db := storetest.Open(b)
	sessions := session.New(db.DB(), nil)
	key, _ := session.P2P("wecom", "bench")
	sess, err := sessions.Current(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 20 {
		if err := sessions.Append(ctx, sess.ID,
			llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("question %d about the quarterly report and the meeting schedule", i)},
			llm.Message{Role: llm.RoleAssistant, Content: "an answer of a few sentences, as an office assistant would give, with some detail in it."}); err != nil {
			b.Fatal(err)
		}
	}
	reg := tools.NewRegistry()
	if err := reg.Register(tools.Tool{Name: "echo", Description: "echo", Handler: func(ctx context.Context, c tools.Call) (string, error) {
		return "echo " + string(c.Args), nil
	}}); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	a := New(Config{}, Deps{LLM: fakeLLM{}, Tools: reg, Sessions: sessions, Prompt: NewPrompt(dir, nil)})
	in := Input{Key: key, User: "bench", Channel: "wecom", Profile: "wecom", Text: "what is the weather?"}
	turn := func() {
		out, err := a.Turn(ctx, in, nil)
		if err != nil || out.Steps != 2 {
			b.Fatalf("turn: %+v %v", out, err)
		}
	}

	const samples = 200
	steps := make([]time.Duration, 0, samples)
	for range samples {
		t0 := time.Now()
		turn()
		steps = append(steps, time.Since(t0)/2)
	}
	slices.Sort(steps)

	for b.Loop() {
		turn()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/step")
	b.ReportMetric(float64(steps[samples/2].Microseconds())/1000, "step-p50-ms")
	b.ReportMetric(float64(steps[samples*99/100].Microseconds())/1000, "step-p99-ms")
}
