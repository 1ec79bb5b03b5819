package customtool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"agent/pkg/customtool"
	"agent/pkg/invisible"
	"agent/pkg/tools"
)

// FuzzCheckSchema: any bytes a model sends as parameters. CheckSchema never
// panics, and what it accepts the registry accepts too, with no $ref left
// anywhere once compacted as the store keeps it, and no invisible
// character (a "\u200b" escape included) a reviewer would not see.
func FuzzCheckSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`,
		`{"type":"object","properties":{"x":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`,
		`{"type":"object","properties":{"x":{"type":"array","items":{"type":"object","properties":{"y":{"enum":[1,2]}}}}}}`,
		`{"type":"object","properties":{"x":{"type":"string","\u0024ref":"#"}}}`,
		`{"type":["object"]}`, `[]`, `null`, `{"type":"object","properties":{"a":{"type":[]}}}`,
		`{"type":"object","description":"a\u200bb","properties":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := customtool.CheckSchema(data); err != nil {
			return
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		compact, _ := json.Marshal(v)
		if bytes.Contains(compact, []byte(`"$ref"`)) {
			t.Fatalf("accepted a $ref: %s", compact)
		}
		if (customtool.Version{Description: "d", Code: "c", Parameters: compact}).Hidden() != "" {
			t.Fatalf("accepted invisible characters: %q", compact)
		}
		reg := tools.NewRegistry()
		if err := reg.Register(tools.Tool{Name: "t", Schema: compact, Handler: func(context.Context, tools.Call) (string, error) { return "", nil }}); err != nil {
			t.Fatalf("CheckSchema accepted what the registry refuses (%v): %s", err, compact)
		}
	})
}

// FuzzCheckDef: any description and code a model sends. What CheckDef
// accepts holds no character a reviewer would not see (a '\r' only in a
// "\r\n" line ending), and the stored version says nothing is hidden.
func FuzzCheckDef(f *testing.F) {
	for _, s := range [][2]string{
		{"Count words.", "def f(text):\n    return len(text.split())\n"},
		{"Count words.", "x = 1\rimport os\n"},
		{"Count\U000E0041 words.", "print(1)\r\n"},
		{"Count words.", "s = '\u202e'\n"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, desc, code string) {
		if customtool.CheckDef(desc, code, customtool.LangPython) != nil {
			return
		}
		for _, text := range []string{desc, code} {
			for i, r := range text {
				if invisible.Is(r) && !(r == '\r' && strings.HasPrefix(text[i+1:], "\n")) {
					t.Fatalf("accepted %q holding U+%04X", text, r)
				}
			}
		}
		if why := (customtool.Version{Description: desc, Code: code, Parameters: []byte(`{}`)}).Hidden(); why != "" {
			t.Fatalf("accepted %q / %q, but the stored version holds %s", desc, code, why)
		}
	})
}
