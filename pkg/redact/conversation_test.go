package redact

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"agent/pkg/llm"
)

// model is a scripted model: it records each request it is sent (what
// left the box) and answers with reply's message.
type model struct {
	sent  []llm.Request
	reply func(req llm.Request) llm.Message
}

func (m *model) Chat(_ context.Context, req llm.Request) (llm.Response, error) {
	m.sent = append(m.sent, req)
	return llm.Response{Message: m.reply(req)}, nil
}

func (m *model) Stream(ctx context.Context, req llm.Request, _ func(llm.Delta) error) (llm.Response, error) {
	return m.Chat(ctx, req)
}

// text is everything a request sent: message texts and tool arguments.
func (m *model) text(i int) string {
	var b strings.Builder
	for _, msg := range m.sent[i].Messages {
		b.WriteString(msg.Content + "\n")
		for _, tc := range msg.ToolCalls {
			b.WriteString(tc.Function.Arguments + "\n")
		}
	}
	return b.String()
}

func call(name, args string) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: name, Arguments: args}}}}
}

// restoreOnly is pkg/assistant's policy in small.
func restoreOnly(names ...string) func(string) bool {
	return func(tool string) bool {
		for _, n := range names {
			if tool == n || strings.HasSuffix(n, "*") && strings.HasPrefix(tool, strings.TrimSuffix(n, "*")) {
				return true
			}
		}
		return false
	}
}

// The model asks exec to reverse, cut and sed a placeholder: exec is
// given the placeholder, not the number, and has nothing real to work on;
// send_sms gets the number.
func TestToolsOutsideThePolicyGetPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		tool, args string
		real       bool
	}{
		{"exec", `{"command":"echo [PHONE_1] | rev"}`, false},
		{"exec", `{"command":"echo [PHONE_1] | cut -c1-6"}`, false},
		{"exec", `{"command":"echo [PHONE_1] | sed 's/./& /g'"}`, false},
		{"web_fetch", `{"url":"https://x.example/?q=[PHONE_1]"}`, false},
		{"crm__lookup", `{"phone":"[PHONE_1]"}`, false},
		{"send_sms", `{"to":"[PHONE_1]"}`, true},
		{"message", `{"text":"call [PHONE_1]"}`, true},
	} {
		next := &model{reply: func(llm.Request) llm.Message { return call(tc.tool, tc.args) }}
		c := &Client{Next: next, Kinds: func() []Kind { return Kinds }, Restore: restoreOnly("message", "send_*", "schedule", "write_file")}
		resp, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "my number is 13800138000"}}})
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Message.ToolCalls[0].Function.Arguments
		if has := strings.Contains(got, "13800138000"); has != tc.real {
			t.Errorf("%s got %s; real value: %v, want %v", tc.tool, got, has, tc.real)
		}
		if !tc.real && got != tc.args {
			t.Errorf("%s got %s, want its arguments as the model wrote them: %s", tc.tool, got, tc.args)
		}
	}
}

// Over the requests of a conversation: the placeholder exec was given and
// echoed back means the same number in the next request; the number in a
// tool result, glued to letters, in another form or reversed, goes back to
// the model as its placeholder; and the model's answer quoting the echoed
// placeholder reads as the number.
func TestToolResultsGiveKnownValuesBackAsPlaceholders(t *testing.T) {
	var step int
	next := &model{reply: func(req llm.Request) llm.Message {
		step++
		if step == 1 {
			return call("exec", `{"command":"echo [PHONE_1]; cat notes.txt"}`)
		}
		return llm.Message{Role: llm.RoleAssistant, Content: "Your number is [PHONE_1]."}
	}}
	c := &Client{Next: next, Kinds: func() []Kind { return Kinds }, Restore: restoreOnly("send_*"),
		Conversations: NewConversations(ConversationsConfig{})}
	ctx := WithConversation(context.Background(), "wecom:alice")
	history := []llm.Message{{Role: llm.RoleUser, Content: "my number is 13800138000, mail Zhang@Example.com"}}
	resp, err := c.Chat(ctx, llm.Request{Messages: history})
	if err != nil {
		t.Fatal(err)
	}
	if args := resp.Message.ToolCalls[0].Function.Arguments; strings.Contains(args, "13800138000") {
		t.Fatalf("exec was given the number: %s", args)
	}
	results := []string{
		"[PHONE_1]",                  // the placeholder echoed
		"abc13800138000xyz",          // glued to letters
		"id:x213800138000",           // glued to another digit
		"138-0013-8000",              // another form
		"１３８ ００１３ ８０００",              // fullwidth, spaced
		"00083100831",                // reversed
		"contact: zhang@example.COM", // another case
		"138\u200b0013\u200b8000",    // zero-width spaces
		"1 3 8 0 0 1 3 8 0 0 0",      // sed 's/./& /g' on a file write_file wrote
	}
	history = append(history, resp.Message, llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Name: "exec", Content: strings.Join(results, "\n")})
	resp, err = c.Chat(ctx, llm.Request{Messages: history})
	if err != nil {
		t.Fatal(err)
	}
	sent := next.text(1)
	for _, v := range []string{"13800138000", "138-0013-8000", "00083100831", "１３８", "0013", "xample.co"} {
		if strings.Contains(sent, v) {
			t.Errorf("the model was sent %q:\n%s", v, sent)
		}
	}
	if n := strings.Count(sent, "[PHONE_1]"); n < 2+len(results)-1 {
		t.Errorf("[PHONE_1] %d times, want every form as [PHONE_1]:\n%s", n, sent)
	}
	if strings.Contains(sent, "[PHONE_2]") || strings.Contains(sent, "[EMAIL_2]") {
		t.Errorf("a known value got a new placeholder:\n%s", sent)
	}
	if resp.Message.Content != "Your number is 13800138000." {
		t.Errorf("answer %q", resp.Message.Content)
	}
}

// A user writing a literal placeholder gets no other conversation's value:
// in the answer and in a send tool's arguments it stays literal text.
func TestLiteralPlaceholderFromAnotherConversationStaysLiteral(t *testing.T) {
	next := &model{}
	c := &Client{Next: next, Kinds: func() []Kind { return Kinds }, Restore: restoreOnly("send_*"),
		Conversations: NewConversations(ConversationsConfig{})}
	next.reply = func(llm.Request) llm.Message { return llm.Message{Role: llm.RoleAssistant, Content: "ok"} }
	alice := WithConversation(context.Background(), "wecom:alice")
	if _, err := c.Chat(alice, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "my number is 13912345678"}}}); err != nil {
		t.Fatal(err)
	}
	next.reply = func(llm.Request) llm.Message {
		m := call("send_sms", `{"to":"[PHONE_1]","text":"hi"}`)
		m.Content = "Sending to [PHONE_1]."
		return m
	}
	mallory := WithConversation(context.Background(), "wecom:mallory")
	resp, err := c.Chat(mallory, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "text [PHONE_1] hi; my own is 13800138000"}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(resp.Message.Content, "13912345678") || strings.Contains(resp.Message.ToolCalls[0].Function.Arguments, "13912345678") {
		t.Fatalf("mallory got alice's number: %+v", resp.Message)
	}
	if !strings.Contains(next.text(1), "[PHONE_2]") {
		t.Errorf("mallory's own number did not skip the reserved [PHONE_1]: %s", next.text(1))
	}
	// Without a conversation a request has a map of its own: same rule.
	resp, err = c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "text [PHONE_1] hi"}}})
	if err != nil || strings.Contains(resp.Message.Content, "139") {
		t.Fatalf("a request without a conversation: %+v %v", resp.Message, err)
	}
}

// A conversation's placeholders are numbered once for all its requests: a
// value keeps its placeholder from turn to turn, a new one takes the next.
func TestConversationKeepsNumbering(t *testing.T) {
	next := &model{reply: func(llm.Request) llm.Message { return llm.Message{Role: llm.RoleAssistant, Content: "ok"} }}
	c := &Client{Next: next, Kinds: func() []Kind { return Kinds }, Conversations: NewConversations(ConversationsConfig{})}
	ctx := WithConversation(context.Background(), "k")
	c.Chat(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "a 13800138000"}}})
	c.Chat(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "b 13912345678"}, {Role: llm.RoleUser, Content: "a again 13800138000"}}})
	if got, want := next.text(1), "b [PHONE_2]\na again [PHONE_1]\n"; got != want {
		t.Fatalf("second request %q, want %q", got, want)
	}
}

// Conversations is bounded: idle maps are dropped, the least recently
// used goes when there are too many, a full map starts over.
func TestConversationsBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cs := NewConversations(ConversationsConfig{Max: 2, MaxValues: 3, Idle: time.Hour, Now: func() time.Time { return now }})
	a := cs.Map("a", Kinds)
	a.Text("13800138000")
	now = now.Add(time.Minute)
	cs.Map("b", Kinds)
	now = now.Add(time.Minute)
	if cs.Map("a", Kinds) != a {
		t.Fatal("a's map was not kept")
	}
	cs.Map("c", Kinds) // b is the least recently used
	if cs.Len() != 2 {
		t.Fatalf("%d conversations, want 2", cs.Len())
	}
	if cs.Map("a", Kinds) != a {
		t.Fatal("a evicted instead of b")
	}
	now = now.Add(2 * time.Hour)
	if cs.Map("a", Kinds) == a {
		t.Fatal("an idle map was kept")
	}
	full := cs.Map("d", Kinds)
	for i := range 3 {
		full.Text(fmt.Sprintf("1391234567%d", i))
	}
	if cs.Map("d", Kinds) == full {
		t.Fatal("a full map was kept")
	}
}

// Whatever a tool returns, a value the map has does not come out of
// Result in its plain form, its reversed digits or another case.
func FuzzResultHidesKnownValues(f *testing.F) {
	for _, s := range []string{"abc13800138000xyz", "00083100831", "ZHANG@example.com", "1380013800013800138000", "138-0013-8000", "a" + idNum + "b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := NewMap(Kinds)
		m.Text("13800138000 zhang@example.com " + idNum)
		out := m.Result(s)
		lower := strings.ToLower(out)
		for _, v := range []string{"13800138000", "00083100831", "zhang@example.com", strings.ToLower(idNum)} {
			if strings.Contains(lower, v) {
				t.Fatalf("Result(%q) = %q still holds %s", s, out, v)
			}
		}
	})
}
