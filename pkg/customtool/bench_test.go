package customtool_test

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func percentiles(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.50), "p50_ms")
	b.ReportMetric(at(0.99), "p99_ms")
}

// BenchmarkCallPython is one call of a created Python tool as the agent
// loop makes it: the registry, the argument check, the caller's view, a
// sandbox, the interpreter's start, the wrapper, the function, the result.
func BenchmarkCallPython(b *testing.B) { benchCall(b, wordCount, `{"words": 3}`) }

// BenchmarkCallShell is the same for a shell tool.
func BenchmarkCallShell(b *testing.B) {
	benchCall(b, map[string]any{"name": "word_count", "description": "Count words.", "language": "sh",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
		"code":       `set -- $ARG_text; printf '{"words": %d}' $#`}, `{"words": 3}`)
}

func benchCall(b *testing.B, def map[string]any, want string) {
	f := newFixture(&testing.T{}, nil)
	if _, err := f.run("boss", "create_tool", def); err != nil {
		b.Fatal(err)
	}
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		got, err := f.run("alice", "word_count", map[string]any{"text": "one two three"})
		ds = append(ds, time.Since(t0))
		if err != nil || got != want {
			b.Fatal(got, err)
		}
	}
	percentiles(b, ds)
}

// BenchmarkDirectPython is the reference: the same interpreter started
// directly (no sandbox) running the same function: /usr/bin/python3, the
// interpreter the sandbox resolves python3 to.
func BenchmarkDirectPython(b *testing.B) {
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		out, err := exec.CommandContext(context.Background(), "/usr/bin/python3", "-I", "-c", "import json\ndef word_count(text):\n    return {'words': len(text.split())}\nprint(json.dumps(word_count('one two three')))").Output()
		ds = append(ds, time.Since(t0))
		if err != nil || len(out) == 0 {
			b.Fatal(err)
		}
	}
	percentiles(b, ds)
}
