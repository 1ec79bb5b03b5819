package redact

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"agent/pkg/llm"
)

// recordingNext records the request it is sent and answers with resp.
type recordingNext struct {
	got  llm.Request
	resp llm.Response
}

func (n *recordingNext) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	n.got = req
	return n.resp, nil
}

func (n *recordingNext) Stream(ctx context.Context, req llm.Request, _ func(llm.Delta) error) (llm.Response, error) {
	return n.Chat(ctx, req)
}

func sentText(t *testing.T, n *recordingNext) string {
	t.Helper()
	var sb strings.Builder
	for _, m := range n.got.Messages {
		sb.WriteString(m.Content + "\n")
	}
	return sb.String()
}

// Tool results are very often JSON text (MCP servers, APIs, Go's and
// Python's json encoders). Inside JSON a newline before a value is "\n"
// and Python's default ensure_ascii writes CJK as "\uXXXX": the value is
// then glued to a letter or hex digit ('n', 'd') and not recognised, so
// it goes to the model in the clear.
func TestValuesInJSONToolResultsReachTheModel(t *testing.T) {
	goJSON, _ := json.Marshal(map[string]string{"contacts": "张三\n13800138000\n李四\n" + idNum})
	for name, result := range map[string]string{
		"go json, newline before the value":         string(goJSON),
		"python json.dumps (ensure_ascii) after 电话": `{"text": "\u8054\u7cfb\u7535\u8bdd13800138000"}`,
		"tab-separated row in JSON":                 `{"row":"card\t` + card + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			n := &recordingNext{resp: llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "ok"}}}
			c := &Client{Next: n, Kinds: func() []Kind { return Kinds }}
			_, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{
				{Role: llm.RoleUser, Content: "who are my contacts?"},
				{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "crm__contacts", Arguments: `{}`}}}},
				{Role: llm.RoleTool, ToolCallID: "c1", Name: "crm__contacts", Content: result},
			}})
			if err != nil {
				t.Fatal(err)
			}
			sent := sentText(t, n)
			for _, v := range []string{"13800138000", idNum, card} {
				if strings.Contains(sent, v) {
					t.Errorf("%s went to the model in the clear: %s", v, sent)
				}
			}
		})
	}
}

// When a tool call's arguments hold a placeholder they are decoded into
// interface{} and encoded again: integers above 2^53 are rounded (an order
// or message id becomes another one) and <, >, & become \u003c.. escapes.
// The tool runs with arguments the model did not ask for.
func TestRestoringToolArgsRewritesOtherArguments(t *testing.T) {
	args := `{"to":"[PHONE_1]","order_id":9007199254740993,"note":"a<b & c"}`
	n := &recordingNext{resp: llm.Response{Message: llm.Message{Role: llm.RoleAssistant,
		ToolCalls: []llm.ToolCall{{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "sms", Arguments: args}}}}}}
	c := &Client{Next: n, Kinds: func() []Kind { return Kinds }}
	resp, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "text 13800138000 that order 9007199254740993 shipped"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Message.ToolCalls[0].Function.Arguments
	want := `{"to":"13800138000","order_id":9007199254740993,"note":"a<b & c"}`
	var g, w map[string]json.RawMessage
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal([]byte(want), &w)
	if string(g["order_id"]) != string(w["order_id"]) {
		t.Errorf("order_id became %s (asked: %s); args %s", g["order_id"], w["order_id"], got)
	}
	var note string
	json.Unmarshal(g["note"], &note)
	if !strings.Contains(got, `a<b & c`) {
		t.Logf("note re-escaped: %s (decodes to %q)", got, note)
	}
}

// Text that already reads as a placeholder is not told apart from the
// ones the map hands out: a user's (or a fetched page's, or a template
// file's) literal "[PHONE_1]" becomes, in the answer and in tool
// arguments, the first phone number anywhere else in the request (here a
// memory fact in the system prompt).
func TestLiteralPlaceholderAliasesAnotherValue(t *testing.T) {
	n := &recordingNext{resp: llm.Response{Message: llm.Message{Role: llm.RoleAssistant,
		Content: "Your template says: Call [PHONE_1] for help."}}}
	c := &Client{Next: n, Kinds: func() []Kind { return Kinds }}
	resp, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "## Relevant memory\n- Boss's private mobile is 13912345678"},
		{Role: llm.RoleUser, Content: "Repeat my template exactly: Call [PHONE_1] for help."},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(resp.Message.Content, "13912345678") {
		t.Fatalf("the user's literal [PHONE_1] came back as another value from the request: %q", resp.Message.Content)
	}
}
