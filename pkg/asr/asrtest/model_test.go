package asrtest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// countingHash hashes and counts what is written to it.
type countingHash struct {
	h io.Writer
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// TestTinyModelMatchesReference pins the port to the reference generator
// (shared/tools/gen-whisper-ggml, `go run . out.bin [multi]`): the files
// must be byte-identical.
func TestTinyModelMatchesReference(t *testing.T) {
	tests := []struct {
		multilingual bool
		size         int64
		sha256       string
	}{
		{false, 77724573, "19ca6719470120933672f6d7d6054377b73838e8d95a892f2b1a06b36eaf8215"},
		{true, 77725341, "84b3ccbb4000ca15f5c15110ec1daef77472fca531dd5ae950151676da5b2838"},
	}
	for _, tt := range tests {
		h := sha256.New()
		cw := &countingHash{h: h}
		if err := writeTinyModel(cw, tt.multilingual); err != nil {
			t.Fatalf("writeTinyModel(multilingual=%v): %v", tt.multilingual, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != tt.sha256 {
			t.Errorf("model(multilingual=%v) sha256 = %s, want %s", tt.multilingual, got, tt.sha256)
		}
		if cw.n != tt.size {
			t.Errorf("model(multilingual=%v) wrote %d bytes, want %d", tt.multilingual, cw.n, tt.size)
		}
		if got := TinyModelSize(tt.multilingual); got != tt.size {
			t.Errorf("TinyModelSize(%v) = %d, want %d", tt.multilingual, got, tt.size)
		}
	}
}

func TestEnsureTinyModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	path, err := EnsureTinyModel(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != TinyModelName {
		t.Errorf("EnsureTinyModel path = %s, want .../%s", path, TinyModelName)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != TinyModelSize(false) {
		t.Fatalf("model file: %v, %v", st, err)
	}
	// A second call reuses the file.
	before := st.ModTime()
	if _, err := EnsureTinyModel(dir, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); !st.ModTime().Equal(before) {
		t.Error("EnsureTinyModel rewrote an intact model")
	}
	// A damaged (wrong-size) file is replaced; no temporary files remain.
	if err := os.Truncate(path, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureTinyModel(dir, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Size() != TinyModelSize(false) {
		t.Errorf("EnsureTinyModel left a truncated model (%d bytes)", st.Size())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("cache holds %d entries, want only the model", len(entries))
	}
}

func TestModelDir(t *testing.T) {
	dir, err := ModelDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "..", "go.mod")); err != nil {
		t.Errorf("ModelDir() = %s, not <module root>/testdata/models", dir)
	}
}
