package config

import (
	"path/filepath"
	"testing"
)

// The default embedding model follows asr.language; a model_dir given in
// the file is kept whatever the language.
func TestEmbeddingModelFollowsLanguage(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"", "bge-small-en-v1.5"},
		{"[asr]\nlanguage = \"zh\"\n", "bge-small-zh-v1.5"},
		{"[asr]\nlanguage = \"en\"\n", "bge-small-en-v1.5"},
		{"[asr]\nlanguage = \"zh\"\n[embedding]\nmodel_dir = \"models/bge-small-en-v1.5\"\n", "bge-small-en-v1.5"},
	} {
		cfg, _, _ := mustParse(t, c.text, nil)
		if got := filepath.Base(cfg.Embedding.ModelDir); got != c.want {
			t.Errorf("%q: embedding.model_dir %s, want %s", c.text, cfg.Embedding.ModelDir, c.want)
		}
	}
}
