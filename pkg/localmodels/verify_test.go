package localmodels

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"agent/pkg/config"
)

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	bge := filepath.Join(models, "bge-small-en-v1.5")
	os.MkdirAll(bge, 0o755)
	write := func(p, body string) string {
		os.WriteFile(p, []byte(body), 0o644)
		s := sha256.Sum256([]byte(body))
		return hex.EncodeToString(s[:])
	}
	onnxSum := write(filepath.Join(bge, "model.onnx"), "onnx bytes")
	write(filepath.Join(bge, "tokenizer.json"), "tokenizer bytes")
	write(filepath.Join(models, "ggml-tiny.bin"), "not the real tiny model")
	os.WriteFile(filepath.Join(models, "SHA256SUMS"), []byte(onnxSum+"  bge-small-en-v1.5/model.onnx\n"), 0o644)

	cfg := config.Default()
	cfg.Embedding.ModelDir = bge
	cfg.ASR.Model = filepath.Join(models, "ggml-tiny.bin")
	got := Verify(cfg)
	want := []string{"ok", "unknown", "mismatch"}
	for i, v := range got {
		if v.Status != want[i] {
			t.Errorf("%s: %s (%s); want %s", v.Path, v.Status, v.Detail, want[i])
		}
	}
	cfg.ASR.Model = filepath.Join(models, "absent.bin")
	if v := Verify(cfg)[2]; v.Status != "missing" {
		t.Errorf("absent file: %+v", v)
	}
}
