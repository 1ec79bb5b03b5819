package config

import (
	"errors"
	"strings"
	"testing"
)

// mapEnv is an Env backed by a map.
func mapEnv(m map[string]string) Env {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// parseText parses text as "config.toml" in a fresh directory, which it
// returns.
func parseText(t *testing.T, text string, env map[string]string) (*Config, []Warning, string, error) {
	t.Helper()
	dir := t.TempDir()
	cfg, warns, err := Parse("config.toml", []byte(text), dir, mapEnv(env))
	return cfg, warns, dir, err
}

// mustParse parses text and fails the test on any problem.
func mustParse(t *testing.T, text string, env map[string]string) (*Config, []Warning, string) {
	t.Helper()
	cfg, warns, dir, err := parseText(t, text, env)
	if err != nil {
		t.Fatalf("Parse: unexpected error:\n%v\ninput:\n%s", err, text)
	}
	if cfg == nil {
		t.Fatal("Parse returned neither a config nor an error")
	}
	return cfg, warns, dir
}

// problems parses text and returns its problems; the parse must fail.
func problems(t *testing.T, text string, env map[string]string) []Problem {
	t.Helper()
	cfg, _, _, err := parseText(t, text, env)
	if err == nil {
		t.Fatalf("Parse succeeded, want an error; input:\n%s", text)
	}
	if cfg != nil {
		t.Errorf("Parse returned a config together with an error")
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error is %T, want *Error: %v", err, err)
	}
	if len(ce.Problems) == 0 {
		t.Fatalf("*Error without problems")
	}
	return ce.Problems
}

func findWarning(ws []Warning, key string) (Warning, bool) {
	for _, w := range ws {
		if w.Key == key {
			return w, true
		}
	}
	return Warning{}, false
}

func warningsString(ws []Warning) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// validWeCom is an enabled [wecom] section that passes validation, using
// the key from Tencent's sample.
const validWeCom = `
[wecom]
enabled = true
corp_id = "wx5823bf96d3bd56c7"
corp_secret = "s3cr3t-corp"
agent_id = 1000002
token = "QDG6eK"
encoding_aes_key = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
`
