package session

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"agent/pkg/llm"
)

func user(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }
func asst(s string) llm.Message { return llm.Message{Role: llm.RoleAssistant, Content: s} }
func sys(s string) llm.Message  { return llm.Message{Role: llm.RoleSystem, Content: s} }

func calls(ids ...string) llm.Message {
	m := llm.Message{Role: llm.RoleAssistant}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: "f", Arguments: `{"x":1}`}})
	}
	return m
}

func result(id, content string) llm.Message {
	return llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: content}
}

func interrupted(id string) llm.Message {
	return llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: InterruptedResult}
}

func TestRepair(t *testing.T) {
	tests := []struct {
		name string
		in   []llm.Message
		want []llm.Message
	}{
		{"empty", nil, []llm.Message{}},
		{"plain", []llm.Message{sys("s"), user("hi"), asst("hello")}, []llm.Message{sys("s"), user("hi"), asst("hello")}},
		{"complete exchange",
			[]llm.Message{user("q"), calls("a", "b"), result("b", "2"), result("a", "1"), asst("done")},
			[]llm.Message{user("q"), calls("a", "b"), result("b", "2"), result("a", "1"), asst("done")}},
		{"missing result at end",
			[]llm.Message{user("q"), calls("a")},
			[]llm.Message{user("q"), calls("a"), interrupted("a")}},
		{"missing result before next user",
			[]llm.Message{user("q"), calls("a"), user("again")},
			[]llm.Message{user("q"), calls("a"), interrupted("a"), user("again")}},
		{"one of two missing, inserted after the present one",
			[]llm.Message{user("q"), calls("a", "b"), result("b", "2"), asst("x")},
			[]llm.Message{user("q"), calls("a", "b"), result("b", "2"), interrupted("a"), asst("x")}},
		{"missing then next call step",
			[]llm.Message{user("q"), calls("a"), calls("b"), result("b", "2")},
			[]llm.Message{user("q"), calls("a"), interrupted("a"), calls("b"), result("b", "2")}},
		{"orphan result at start",
			[]llm.Message{result("a", "1"), user("q"), asst("x")},
			[]llm.Message{user("q"), asst("x")}},
		{"orphan result after user",
			[]llm.Message{user("q"), result("a", "1"), asst("x")},
			[]llm.Message{user("q"), asst("x")}},
		{"result with unknown id",
			[]llm.Message{calls("a"), result("zz", "?"), result("a", "1")},
			[]llm.Message{calls("a"), result("a", "1")}},
		{"duplicate result",
			[]llm.Message{calls("a"), result("a", "1"), result("a", "again")},
			[]llm.Message{calls("a"), result("a", "1")}},
		{"result of an earlier step after a later call",
			[]llm.Message{calls("a"), result("a", "1"), calls("b"), result("a", "late"), result("b", "2")},
			[]llm.Message{calls("a"), result("a", "1"), calls("b"), result("b", "2")}},
		{"result separated by assistant text",
			[]llm.Message{calls("a"), asst("thinking"), result("a", "1")},
			[]llm.Message{calls("a"), interrupted("a"), asst("thinking")}},
		{"empty result id",
			[]llm.Message{calls("a"), result("", "1"), result("a", "1")},
			[]llm.Message{calls("a"), result("a", "1")}},
		{"ids reused across steps",
			[]llm.Message{calls("call_0"), result("call_0", "1"), calls("call_0"), result("call_0", "2")},
			[]llm.Message{calls("call_0"), result("call_0", "1"), calls("call_0"), result("call_0", "2")}},
		{"empty and repeated call ids dropped",
			[]llm.Message{calls("a", "", "a", "b"), result("a", "1")},
			[]llm.Message{calls("a", "b"), result("a", "1"), interrupted("b")}},
		{"only empty call ids",
			[]llm.Message{calls(""), result("", "1"), asst("x")},
			[]llm.Message{{Role: llm.RoleAssistant}, asst("x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inCopy := clone(tt.in)
			got := Repair(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Repair:\n got  %s\n want %s", dump(got), dump(tt.want))
			}
			if err := Valid(got); err != nil {
				t.Fatalf("Valid(Repair(...)): %v", err)
			}
			if again := Repair(got); !reflect.DeepEqual(again, got) {
				t.Fatalf("Repair is not idempotent:\n once  %s\n twice %s", dump(got), dump(again))
			}
			if !reflect.DeepEqual(tt.in, inCopy) {
				t.Fatalf("Repair modified its input")
			}
		})
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		name string
		in   []llm.Message
		want string // substring of the error, "" for nil
	}{
		{"empty", nil, ""},
		{"good", []llm.Message{user("q"), calls("a", "b"), result("a", "1"), result("b", "2"), asst("x")}, ""},
		{"missing at end", []llm.Message{calls("a")}, "has no result"},
		{"missing before user", []llm.Message{calls("a"), user("q")}, "has no result"},
		{"orphan", []llm.Message{user("q"), result("a", "1")}, "does not answer"},
		{"duplicate", []llm.Message{calls("a"), result("a", "1"), result("a", "1")}, "duplicate"},
		{"empty call id", []llm.Message{calls("")}, "empty id"},
		{"repeated call id", []llm.Message{calls("a", "a")}, "repeated"},
	}
	for _, tt := range tests {
		err := Valid(tt.in)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: Valid = %v; want %q", tt.name, err, tt.want)
		}
	}
}

// FuzzRepair builds a history from bytes (each byte one message of a shape)
// and checks Repair's output is valid, idempotent and keeps non-tool messages.
func FuzzRepair(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{4, 4, 2, 5, 5, 6, 0, 3, 3})
	f.Add([]byte{7, 3, 0, 12, 19, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs := historyFromBytes(data)
		got := Repair(msgs)
		if err := Valid(got); err != nil {
			t.Fatalf("Valid(Repair(%s)): %v\nout %s", dump(msgs), err, dump(got))
		}
		if again := Repair(got); !reflect.DeepEqual(again, got) {
			t.Fatalf("not idempotent for %s", dump(msgs))
		}
		var in, out int
		for _, m := range msgs {
			if m.Role != llm.RoleTool {
				in++
			}
		}
		for _, m := range got {
			if m.Role != llm.RoleTool {
				out++
			}
		}
		if in != out {
			t.Fatalf("non-tool messages %d in, %d out", in, out)
		}
	})
}

func historyFromBytes(data []byte) []llm.Message {
	ids := []string{"a", "b", "c", ""}
	var msgs []llm.Message
	for _, b := range data {
		switch b % 4 {
		case 0:
			msgs = append(msgs, user("u"))
		case 1:
			msgs = append(msgs, asst("x"))
		case 2:
			n := int(b>>2)%3 + 1
			var cs []string
			for i := range n {
				cs = append(cs, ids[(int(b>>4)+i)%len(ids)])
			}
			msgs = append(msgs, calls(cs...))
		case 3:
			msgs = append(msgs, result(ids[int(b>>2)%len(ids)], "r"))
		}
	}
	return msgs
}

func clone(msgs []llm.Message) []llm.Message {
	b, _ := json.Marshal(msgs)
	var out []llm.Message
	_ = json.Unmarshal(b, &out)
	return out
}

func dump(msgs []llm.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Role)
		for _, c := range m.ToolCalls {
			b.WriteString("(" + c.ID + ")")
		}
		if m.ToolCallID != "" {
			b.WriteString("[" + m.ToolCallID + "]")
		}
		b.WriteString(":" + m.Content + " ")
	}
	return b.String()
}
