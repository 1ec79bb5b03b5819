package session

import (
	"reflect"
	"strings"
	"testing"

	"agent/pkg/llm"
)

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		name string
		m    llm.Message
		want int
	}{
		{"empty", llm.Message{Role: "user"}, messageOverhead},
		{"ascii 8 chars", user("abcdefgh"), messageOverhead + 2},
		{"ascii 9 chars rounds up", user("abcdefghi"), messageOverhead + 3},
		{"cjk one each", user("明天下午三点开会"), messageOverhead + 8},
		{"cjk punctuation", user("你好，世界。"), messageOverhead + 6},
		{"mixed", user("开会 at 3pm"), messageOverhead + 2 + 2},
		{"image", llm.Message{Role: "user", Parts: []llm.Part{llm.TextPart("abcd"), llm.ImagePart("image/png", []byte{1})}}, messageOverhead + 1 + imageTokens},
		{"tool call", llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c1", Function: llm.FunctionCall{Name: "read", Arguments: "{}"}}}},
			messageOverhead + callOverhead + 1 + 1 + 1},
		{"reasoning counted", llm.Message{Role: "assistant", ReasoningContent: "abcd"}, messageOverhead + 1},
	}
	for _, tt := range tests {
		if got := EstimateTokens(tt.m); got != tt.want {
			t.Errorf("%s: EstimateTokens = %d; want %d", tt.name, got, tt.want)
		}
	}
}

// byLen counts one token per byte of content, so the tables are readable.
func byLen(m llm.Message) int { return len(m.Content) + 1 }

func total(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += byLen(m)
	}
	return n
}

func TestPrune(t *testing.T) {
	big := strings.Repeat("x", 100)
	stub := "[tool result pruned: 100 chars]"
	hist := []llm.Message{
		sys("s"),
		user("q1"), calls("a"), result("a", big), asst("r1"),
		user("q2"), calls("b"), result("b", big), asst("r2"),
		user("q3"), calls("c"), result("c", big),
	}
	tests := []struct {
		name   string
		budget int
		want   []llm.Message
	}{
		{"under budget unchanged", 1000, hist},
		{"oldest result stubbed first", total(hist) - 60, []llm.Message{
			sys("s"),
			user("q1"), calls("a"), result("a", stub), asst("r1"),
			user("q2"), calls("b"), result("b", big), asst("r2"),
			user("q3"), calls("c"), result("c", big),
		}},
		{"both old results stubbed", total(hist) - 130, []llm.Message{
			sys("s"),
			user("q1"), calls("a"), result("a", stub), asst("r1"),
			user("q2"), calls("b"), result("b", stub), asst("r2"),
			user("q3"), calls("c"), result("c", big),
		}},
		{"then oldest turn dropped", 170, []llm.Message{
			sys("s"),
			user("q2"), calls("b"), result("b", stub), asst("r2"),
			user("q3"), calls("c"), result("c", big),
		}},
		{"all old turns dropped, current kept", 140, []llm.Message{
			sys("s"),
			user("q3"), calls("c"), result("c", big),
		}},
		{"current result stubbed last", 20, []llm.Message{
			sys("s"),
			user("q3"), calls("c"), result("c", stub),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := clone(hist)
			got := Prune(hist, tt.budget, byLen)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Prune(budget %d, total %d):\n got  %s\n want %s", tt.budget, total(hist), dump(got), dump(tt.want))
			}
			if err := Valid(got); err != nil {
				t.Fatalf("Valid: %v", err)
			}
			if !reflect.DeepEqual(hist, in) {
				t.Fatalf("Prune modified its input")
			}
		})
	}
}

func TestPruneLeadingPartialTurnAndNoUser(t *testing.T) {
	big := strings.Repeat("y", 50)
	// A window that starts with an assistant exchange (no user message yet).
	in := []llm.Message{calls("a"), result("a", big), asst("r0"), user("q"), asst("r")}
	got := Prune(in, 10, byLen)
	want := []llm.Message{user("q"), asst("r")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s; want %s", dump(got), dump(want))
	}
	// No user message at all: only stubbing, nothing dropped.
	in = []llm.Message{calls("a"), result("a", big)}
	got = Prune(in, 1, byLen)
	want = []llm.Message{calls("a"), result("a", "[tool result pruned: 50 chars]")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s; want %s", dump(got), dump(want))
	}
}

func TestPruneFuzzShapes(t *testing.T) {
	// Every repaired history stays valid under any budget, and the latest
	// user message survives.
	for seed := range 2000 {
		data := []byte{byte(seed), byte(seed >> 3), byte(seed * 7), byte(seed * 13), byte(seed >> 5), byte(seed * 31)}
		msgs := Repair(historyFromBytes(data))
		for _, budget := range []int{0, 5, 15, 1000} {
			got := Prune(msgs, budget, nil)
			if err := Valid(got); err != nil {
				t.Fatalf("Prune(%s, %d) invalid: %v", dump(msgs), budget, err)
			}
			lastUser := func(ms []llm.Message) int {
				n := 0
				for _, m := range ms {
					if m.Role == llm.RoleUser {
						n++
					}
				}
				return n
			}
			if lastUser(msgs) > 0 && lastUser(got) == 0 {
				t.Fatalf("Prune(%s, %d) dropped the latest user message", dump(msgs), budget)
			}
		}
	}
}

func FuzzPrune(f *testing.F) {
	f.Add([]byte{0, 2, 3, 1, 0, 6, 7, 0}, 10)
	f.Add([]byte{1, 3, 0, 2}, 0)
	f.Fuzz(func(t *testing.T, data []byte, budget int) {
		msgs := Repair(historyFromBytes(data))
		for i := range msgs {
			if msgs[i].Role == llm.RoleTool {
				msgs[i].Content = strings.Repeat("r", len(data)*7)
			}
		}
		got := Prune(msgs, budget, nil)
		if err := Valid(got); err != nil {
			t.Fatalf("Prune(%s, %d) invalid: %v", dump(msgs), budget, err)
		}
		var inUser, outUser int
		for _, m := range msgs {
			if m.Role == llm.RoleUser {
				inUser++
			}
		}
		for _, m := range got {
			if m.Role == llm.RoleUser {
				outUser++
			}
		}
		if inUser > 0 && outUser == 0 {
			t.Fatalf("Prune dropped the latest user message")
		}
		if len(got) > len(msgs) {
			t.Fatalf("Prune grew the history")
		}
	})
}
