package customtool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"agent/pkg/customtool"
	"agent/pkg/tools"
)

// FuzzCheckSchema: any bytes a model sends as parameters. CheckSchema never
// panics, and what it accepts the registry accepts too, with no $ref left
// anywhere once compacted as the store keeps it.
func FuzzCheckSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`,
		`{"type":"object","properties":{"x":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`,
		`{"type":"object","properties":{"x":{"type":"array","items":{"type":"object","properties":{"y":{"enum":[1,2]}}}}}}`,
		`{"type":"object","properties":{"x":{"type":"string","\u0024ref":"#"}}}`,
		`{"type":["object"]}`, `[]`, `null`, `{"type":"object","properties":{"a":{"type":[]}}}`,
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
		reg := tools.NewRegistry()
		if err := reg.Register(tools.Tool{Name: "t", Schema: compact, Handler: func(context.Context, tools.Call) (string, error) { return "", nil }}); err != nil {
			t.Fatalf("CheckSchema accepted what the registry refuses (%v): %s", err, compact)
		}
	})
}
