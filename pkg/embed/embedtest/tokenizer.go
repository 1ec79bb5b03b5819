package embedtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
)

const (
	sugarmeModule = "github.com/sugarme/tokenizer"
	vocabRelPath  = "pretrained/model/bert-base-uncased-vocab.txt"
)

// UncasedVocabPath finds bert-base-uncased-vocab.txt inside the
// github.com/sugarme/tokenizer module (the same WordPiece vocabulary that
// bge-small-en-v1.5 and all-MiniLM-L6-v2 use): first through
// `go list -m`, then in GOMODCACHE.
func UncasedVocabPath() (string, error) {
	var tried []string
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", sugarmeModule).Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); dir != "" {
			p := filepath.Join(dir, vocabRelPath)
			if fileExists(p) {
				return p, nil
			}
			tried = append(tried, p)
		}
	} else {
		tried = append(tried, "go list -m "+sugarmeModule+": "+errText(err))
	}
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
			cache = strings.TrimSpace(string(out))
		}
	}
	if cache != "" {
		var dirs []string
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, m := range bi.Deps {
				if m.Path == sugarmeModule {
					dirs = append(dirs, filepath.Join(cache, "github.com/sugarme/tokenizer@"+m.Version))
				}
			}
		}
		matches, _ := filepath.Glob(filepath.Join(cache, "github.com/sugarme/tokenizer@*"))
		sort.Sort(sort.Reverse(sort.StringSlice(matches)))
		for _, dir := range append(dirs, matches...) {
			p := filepath.Join(dir, vocabRelPath)
			if fileExists(p) {
				return p, nil
			}
			tried = append(tried, p)
		}
	}
	return "", fmt.Errorf("embedtest: the uncased BERT vocabulary from %s is not in the module cache (tried %s); run `go mod download %s`",
		sugarmeModule, strings.Join(tried, ", "), sugarmeModule)
}

func errText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return err.Error()
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// readVocab reads a vocab.txt: one token per line, the line number is the id.
func readVocab(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var vocab []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		vocab = append(vocab, strings.TrimRight(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return vocab, nil
}

// WriteTokenizer writes a Hugging Face tokenizer.json equivalent to
// bert-base-uncased's (and bge-small-en-v1.5's): BertNormalizer (clean_text,
// handle_chinese_chars, strip_accents null, lowercase), BertPreTokenizer,
// WordPiece with [UNK] and max_input_chars_per_word 100, TemplateProcessing
// "[CLS] $A [SEP]" and the five special added tokens.
func WriteTokenizer(path string) error {
	vp, err := UncasedVocabPath()
	if err != nil {
		return err
	}
	vocab, err := readVocab(vp)
	if err != nil {
		return fmt.Errorf("embedtest: read vocabulary: %w", err)
	}
	ids := map[string]int{}
	for i, tok := range vocab {
		if _, dup := ids[tok]; !dup {
			ids[tok] = i
		}
	}
	specials := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	for _, s := range specials {
		if _, ok := ids[s]; !ok {
			return fmt.Errorf("embedtest: vocabulary %s lacks %s", vp, s)
		}
	}
	return writeAtomic(path, func(w io.Writer) error { return encodeTokenizer(w, vocab, ids, specials) })
}

func encodeTokenizer(w io.Writer, vocab []string, ids map[string]int, specials []string) error {
	type addedToken struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var added []addedToken
	for _, s := range specials {
		added = append(added, addedToken{ID: ids[s], Content: s, Special: true})
	}
	type piece map[string]map[string]any
	special := func(id string, typeID int) piece {
		return piece{"SpecialToken": {"id": id, "type_id": typeID}}
	}
	sequence := func(id string, typeID int) piece {
		return piece{"Sequence": {"id": id, "type_id": typeID}}
	}
	specialTok := func(s string) map[string]any {
		return map[string]any{"id": s, "ids": []int{ids[s]}, "tokens": []string{s}}
	}
	head := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer": map[string]any{
			"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
			"strip_accents": nil, "lowercase": true,
		},
		"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"},
		"post_processor": map[string]any{
			"type":   "TemplateProcessing",
			"single": []piece{special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0)},
			"pair":   []piece{special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0), sequence("B", 1), special("[SEP]", 1)},
			"special_tokens": map[string]any{
				"[CLS]": specialTok("[CLS]"),
				"[SEP]": specialTok("[SEP]"),
			},
		},
		"decoder": map[string]any{"type": "WordPiece", "prefix": "##", "cleanup": true},
	}
	// The vocabulary is written in id order, as Hugging Face does; a Go map
	// would sort it by token.
	var b bytes.Buffer
	b.WriteString("{\n")
	keys := []string{"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder"}
	for _, k := range keys {
		v, err := json.Marshal(head[k])
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "  %q: %s,\n", k, v)
	}
	b.WriteString(`  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": {`)
	first := true
	for i, tok := range vocab {
		if ids[tok] != i { // a duplicate line keeps its first id
			continue
		}
		k, err := json.Marshal(tok)
		if err != nil {
			return err
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "\n    %s: %d", k, i)
	}
	b.WriteString("\n  }}\n}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// EnsureBGESmall makes sure dir holds model.onnx (the BGESmall shape,
// random weights, seed 1) and tokenizer.json, generating whichever is
// missing. Benchmarks use it with <repo>/testdata/models/bge-small-random.
func EnsureBGESmall(dir string) error {
	return Ensure(dir, BGESmall(), 1)
}

// EnsureBGESmallInt8 is EnsureBGESmall for the int8 shape: the same seed,
// so its weights are the fp32 model's, quantised.
func EnsureBGESmallInt8(dir string) error {
	return Ensure(dir, BGESmallInt8(), 1)
}

// Ensure makes sure dir holds model.onnx (shape s, seed) and
// tokenizer.json, generating whichever is missing. An existing model is
// not checked against s.
func Ensure(dir string, s Shape, seed int64) error {
	if p := filepath.Join(dir, "tokenizer.json"); !fileExists(p) {
		if err := WriteTokenizer(p); err != nil {
			return err
		}
	}
	if p := filepath.Join(dir, "model.onnx"); !fileExists(p) {
		if err := WriteModel(p, s, seed); err != nil {
			return err
		}
	}
	return nil
}
