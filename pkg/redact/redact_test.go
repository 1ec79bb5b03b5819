package redact

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"agent/pkg/llm"
	"agent/pkg/llm/llmtest"
)

// Valid test values: the ID number's check digit and the card's Luhn
// digit are right; the "near misses" are one digit off.
const (
	idNum     = "11010519491231002X"
	idBad     = "110105194912310021" // wrong check digit
	card      = "6222021234567890128"
	cardSpace = "6222 0212 3456 7890 128"
	cardBad   = "6222021234567890123" // Luhn fails
)

func TestDetectors(t *testing.T) {
	all := Kinds
	for _, c := range []struct {
		in   string
		want string
	}{
		{"call me at 13800138000 please", "call me at [PHONE_1] please"},
		{"手机138-0013-8000，座机010-62345678", "手机[PHONE_1]，座机[PHONE_2]"},
		{"+86 139 1234 5678 or (0755)23456789-12", "[PHONE_1] or [PHONE_2]"},
		{"order 213800138000 is not a phone", "order 213800138000 is not a phone"},
		{"身份证" + idNum + "。", "身份证[ID_CARD_1]。"},
		{"not an id: " + idBad, "not an id: " + idBad},
		{"card " + card + " and " + cardSpace, "card [BANK_CARD_1] and [BANK_CARD_2]"},
		{"not a card " + cardBad, "not a card " + cardBad},
		{"mail zhang.san+work@example.com.cn now", "mail [EMAIL_1] now"},
		{"车牌京A12345和粤B·D12345，沪AD1234F", "车牌[PLATE_1]和[PLATE_2]，[PLATE_3]"},
		{"same 13800138000 twice 13800138000", "same [PHONE_1] twice [PHONE_1]"},
		{"version 1.2.3, 2026-12-02, 100%", "version 1.2.3, 2026-12-02, 100%"},
	} {
		m := NewMap(all)
		got := m.Text(c.in)
		if got != c.want {
			t.Errorf("Text(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		if back := m.Restore(got); back != c.in {
			t.Errorf("Restore(%q) = %q, want %q", got, back, c.in)
		}
	}
	// Only the enabled kinds.
	m := NewMap([]Kind{Email})
	if got := m.Text("13800138000 a@b.cn"); got != "13800138000 [EMAIL_1]" {
		t.Errorf("email only: %q", got)
	}
	if _, err := ParseKinds([]string{"phone", "passport"}); err == nil {
		t.Error("unknown kind accepted")
	}
}

// A placeholder split across stream fragments is put back whole; a "["
// that is not one is passed on.
func TestStreamRestore(t *testing.T) {
	m := NewMap(Kinds)
	m.Text("13800138000 and a@b.cn")
	s := m.NewStream()
	var out strings.Builder
	for _, f := range []string{"call [PHO", "NE_1] or mail [", "EMAIL_1", "] [see note] [PHONE_9] end ["} {
		out.WriteString(s.Write(f))
	}
	out.WriteString(s.Flush())
	if got, want := out.String(), "call 13800138000 or mail a@b.cn [see note] [PHONE_9] end ["; got != want {
		t.Fatalf("streamed %q, want %q", got, want)
	}
}

// Through a real HTTP exchange with a scripted model that echoes what it
// is sent and calls a tool with a placeholder: no raw value reaches the
// server, the user reads the values, the tool gets them.
func TestClientRoundTrip(t *testing.T) {
	srv := llmtest.NewFunc(t, func(r *llmtest.Request) llmtest.Reply {
		last := r.LastUser()
		if strings.Contains(last, "call") {
			return llmtest.Calls(llmtest.Call("send_sms", `{"to":"[PHONE_1]","text":"card [BANK_CARD_1] ok"}`))
		}
		return llmtest.Reply{Chunks: []string{"You said: ", last[:len(last)/2], last[len(last)/2:]}}
	})
	client, err := llm.New(llm.Config{Provider: "custom", BaseURL: srv.BaseURL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	counted := map[Kind]int{}
	c := &Client{Next: client, Kinds: func() []Kind { return Kinds }, Counted: func(n map[Kind]int) {
		for k, v := range n {
			counted[k] += v
		}
	}}
	secret := "my phone 13800138000, card " + card + ", id " + idNum + ", car 京A12345, mail li@example.com"
	req := llm.Request{Messages: []llm.Message{
		{Role: "system", Content: "Relevant memory: alice's phone is 13800138000"},
		{Role: "user", Content: secret},
	}}
	var streamed strings.Builder
	resp, err := c.Stream(context.Background(), req, func(d llm.Delta) error { streamed.WriteString(d.Content); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if want := "You said: " + secret; resp.Message.Content != want || streamed.String() != want {
		t.Fatalf("answer %q, streamed %q", resp.Message.Content, streamed.String())
	}
	req.Messages = append(req.Messages, resp.Message, llm.Message{Role: "user", Content: "now call 13800138000 about card " + card})
	resp, err = c.Chat(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var args struct{ To, Text string }
	if len(resp.Message.ToolCalls) != 1 || json.Unmarshal([]byte(resp.Message.ToolCalls[0].Function.Arguments), &args) != nil ||
		args.To != "13800138000" || args.Text != "card "+card+" ok" {
		t.Fatalf("tool call %+v", resp.Message.ToolCalls)
	}
	for _, r := range srv.Requests() {
		raw := string(r.Body)
		for _, v := range []string{"13800138000", card, idNum, "京A12345", "li@example.com"} {
			if strings.Contains(raw, v) {
				t.Fatalf("the model was sent %q: %s", v, raw)
			}
		}
	}
	if counted[Phone] < 3 || counted[BankCard] < 1 || counted[IDCard] < 1 || counted[Email] < 1 || counted[Plate] < 1 {
		t.Fatalf("counted %v", counted)
	}
	// Off: untouched.
	c.Kinds = func() []Kind { return nil }
	if _, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "13800138000"}}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(srv.Last().Body), "13800138000") {
		t.Fatal("redaction off still changed the request")
	}
}

// Whatever the text, redaction then restoration gives it back, and no
// detected value is left in the redacted text.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"13800138000", idNum, card, cardSpace, "a@b.cn", "京A12345", "[PHONE_1]", "1380013800013800138000", "x" + idNum + "x", "(010)12345678-123", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := NewMap(Kinds)
		red := m.Text(s)
		if m.Restore(red) != s && !rePH.MatchString(s) {
			t.Fatalf("round trip of %q: redacted %q, restored %q", s, red, m.Restore(red))
		}
		if again := NewMap(Kinds).Text(red); again != red {
			t.Fatalf("%q redacted to %q still holds values: %q", s, red, again)
		}
	})
}
