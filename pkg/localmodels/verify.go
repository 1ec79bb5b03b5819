package localmodels

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"agent/pkg/config"
)

// pinned are the SHA-256 sums of the published files scripts/fetch-models.sh
// downloads, by file name. Keep in sync with its manifest.
var pinned = map[string]string{
	"ggml-tiny.bin":    "be07e048e1e599ad46341c8d2a135645097a538221678b7acdd1b1919c6e1b21",
	"ggml-tiny.en.bin": "921e4cf8686fdd993dcd081a5da5b6c365bfde1162e72b08d75ac75289920b1f",
	"ggml-base.bin":    "60ed5bc3dd14eea856493d334349b405782ddcaf0028d4b5df4088345fba2efe",
}

// Verdict of one file.
type Verdict struct {
	Path   string `json:"path"`
	Status string `json:"status"` // ok | mismatch | unknown | missing
	Detail string `json:"detail"`
}

// Verify hashes the configured model files and compares them with the
// pinned sums, or with the SHA256SUMS file fetch-models.sh records.
func Verify(cfg *config.Config) []Verdict {
	files := []string{
		filepath.Join(cfg.Embedding.ModelDir, "model.onnx"),
		filepath.Join(cfg.Embedding.ModelDir, "tokenizer.json"),
		cfg.ASR.Model,
	}
	var out []Verdict
	for _, f := range files {
		out = append(out, verifyFile(f))
	}
	return out
}

func verifyFile(path string) Verdict {
	v := Verdict{Path: path}
	got, err := sha256File(path)
	if err != nil {
		v.Status, v.Detail = "missing", err.Error()
		return v
	}
	want, source := pinned[filepath.Base(path)], "pinned"
	if want == "" {
		want, source = recorded(path)
	}
	switch {
	case want == "":
		v.Status, v.Detail = "unknown", "sha256 "+got+" (no pinned or recorded sum)"
	case want == got:
		v.Status, v.Detail = "ok", "sha256 matches the "+source+" sum"
	default:
		v.Status, v.Detail = "mismatch", fmt.Sprintf("sha256 %s, %s sum %s; re-fetch with scripts/fetch-models.sh", got, source, want)
	}
	return v
}

// recorded looks the file up in a SHA256SUMS file in its directory or the
// one above (fetch-models.sh writes models/SHA256SUMS with paths relative
// to models/).
func recorded(path string) (string, string) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", ""
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		rel, err := filepath.Rel(dir, abs)
		if err == nil {
			if sum := lookupSums(filepath.Join(dir, "SHA256SUMS"), filepath.ToSlash(rel)); sum != "" {
				return sum, "recorded"
			}
		}
		if dir == filepath.Dir(dir) || strings.Count(rel, "/") >= 2 {
			return "", ""
		}
	}
}

func lookupSums(sumsPath, rel string) string {
	f, err := os.Open(sumsPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && strings.TrimPrefix(fields[1], "*") == rel {
			return fields[0]
		}
	}
	return ""
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
