package config

import (
	"errors"
	"os"
	"testing"

	"github.com/BurntSushi/toml"
)

// FuzzParse: arbitrary bytes never panic and always give either a config or
// an *Error with at least one problem; a config's Redacted() form is TOML.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("../../config.toml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(fullConfig))
	f.Add([]byte(validWeCom))
	f.Add([]byte(""))
	f.Add([]byte("[agent]\nowners = [\"wecom:${X}\", 5]\n[mcp_servers.a]\nenv = { K = \"$${\" }"))
	f.Add([]byte("[llm]\ntimeout = \"abc\"\napi_key_file = \"/nonexistent\"\napi_key = \"${\""))
	f.Add([]byte("[[mcp_servers]]\nx = 1\n[server]\nlisten = \"[::1]:80\""))
	f.Add([]byte("a.b.c.d = 1\n\"\" = 2\n[\"x,y\"]\nz = nan"))
	env := mapEnv(map[string]string{"X": "x", "OPENAI": "sk-fuzz-secret-value"})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := Parse("fuzz.toml", data, dir, env)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %T %v is not an *Error with problems", err, err)
			}
			if cfg != nil {
				t.Fatal("config and error together")
			}
			_ = err.Error()
			return
		}
		if cfg == nil {
			t.Fatal("neither config nor error")
		}
		var back Config
		if _, err := toml.Decode(cfg.Redacted(), &back); err != nil {
			t.Fatalf("Redacted() is not valid TOML: %v\n%s", err, cfg.Redacted())
		}
		_ = cfg.Secrets()
		_ = cfg.Location()
		_ = cfg.ListenIsLoopback()
	})
}
