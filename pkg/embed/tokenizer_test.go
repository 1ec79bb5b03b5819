package embed

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Ids below are bert-base-uncased's, as the reference tokenizer gives them
// (TestTokenizerMatchesReference checks the whole corpus against it; these
// pin a few without Node).
const (
	idPAD  = 0
	idUNK  = 100
	idCLS  = 101
	idSEP  = 102
	idMASK = 103
)

func TestTokenizerEncode(t *testing.T) {
	tok := fixtureTokenizer(t)
	tests := []struct {
		name string
		text string
		max  int
		want []int
	}{
		{"empty", "", 512, []int{idCLS, idSEP}},
		{"whitespace", " \t\n\u00a0\u3000 ", 512, []int{idCLS, idSEP}},
		{"controls only", "\x00\x01\u200b\ufeff", 512, []int{idCLS, idSEP}},
		{"invalid utf8", "\xff\xfe", 512, []int{idCLS, idSEP}},
		{"ascii", "Hello, World!", 512, []int{idCLS, 7592, 1010, 2088, 999, idSEP}},
		{"accents stripped", "Café", 512, []int{idCLS, 7668, idSEP}},
		{"nbsp splits", "hello\u00a0world", 512, []int{idCLS, 7592, 2088, idSEP}},
		{"zwsp joins", "hel\u200blo", 512, []int{idCLS, 7592, idSEP}},
		{"literal special tokens", "[SEP] x [MASK]", 512, []int{idCLS, idSEP, 1060, idMASK, idSEP}},
		{"truncated", "hello world hello world", 4, []int{idCLS, 7592, 2088, idSEP}},
		{"only specials fit", "hello", 2, []int{idCLS, idSEP}},
		{"no limit", "hello world", 0, []int{idCLS, 7592, 2088, idSEP}},
		{"word over 100 chars", strings.Repeat("a", 101), 512, []int{idCLS, idUNK, idSEP}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tok.Encode(tt.text, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q, %d) = %v, want %v", tt.text, tt.max, got, tt.want)
			}
		})
	}
	if _, err := tok.Encode("x", 1); err == nil {
		t.Error("Encode with max 1 (no room for [CLS] [SEP]) succeeded")
	}
	if tok.Specials() != 2 || tok.PadID() != idPAD {
		t.Errorf("Specials() = %d, PadID() = %d; want 2, 0", tok.Specials(), tok.PadID())
	}
}

// TestTokenizerWindow checks that tokenising only a window of a long text
// gives exactly the truncated ids of the whole text.
func TestTokenizerWindow(t *testing.T) {
	tok := fixtureTokenizer(t)
	texts := append(corpus(), randomTexts(200, 9)...)
	texts = append(texts,
		strings.Repeat("word ", 5000),
		strings.Repeat("中文", 3000),
		strings.Repeat("x", 20000)+" tail",
		strings.Repeat("ΟΔΟΣ ", 1000),
		strings.Repeat("[SEP] ", 1000),
		strings.Repeat("a\u00a0", 3000),
	)
	for _, s := range texts {
		for _, max := range []int{3, 10, 512} {
			fast, err1 := tok.encode(s, max, true)
			slow, err2 := tok.encode(s, max, false)
			if err1 != nil || err2 != nil {
				t.Fatalf("encode(%q): %v, %v", clip(s), err1, err2)
			}
			if !slices.Equal(fast, slow) {
				t.Errorf("windowed ids differ for %q (max %d)", clip(s), max)
			}
		}
	}
}

func TestNormalize(t *testing.T) {
	n := bertNormalizer{cleanText: true, handleChineseChars: true, lowercase: true, stripAccents: true}
	tests := []struct{ in, want string }{
		{"Café Ångström Zürich", "cafe angstrom zurich"},
		{"a\tb\nc\u00a0d\u3000e\u2028f", "a b c d e f"},
		{"x\u200by\ufeffz\x00w\x7f", "xyzw"},
		{"中文句子", " 中  文  句  子 "},
		{"a𠀀b", "a 𠀀 b"}, // beyond the BMP: padded (Rust/Python behaviour)
		{"ΟΔΟΣ Σ ΑΣ.Β ΑΣ'", "οδος σ ασ.β ας'"},
		{"İ", "i"},
		{"がガ", "かカ"},
		{"한", "\u1112\u1161\u11ab"}, // NFD splits Hangul into jamo, which are not marks
		{"ﬁ", "ﬁ"},                  // compatibility forms stay (no NFKC)
	}
	for _, tt := range tests {
		if got := n.normalize(tt.in); got != tt.want {
			t.Errorf("normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	cased := bertNormalizer{cleanText: true, handleChineseChars: true}
	if got := cased.normalize("Café"); got != "Café" {
		t.Errorf("cased normalize(Café) = %q", got)
	}
}

func TestSplitAdded(t *testing.T) {
	toks := []addedToken{{content: "[SEP]", id: 1}, {content: "[SEP]]", id: 2}, {content: "<s>", id: 3, lstrip: true, rstrip: true}}
	type sec = section
	tests := []struct {
		in   string
		want []section
	}{
		{"", nil},
		{"plain", []sec{{"plain", -1}}},
		{"a[SEP]b", []sec{{"a", -1}, {"[SEP]", 1}, {"b", -1}}},
		{"[SEP][SEP]", []sec{{"[SEP]", 1}, {"[SEP]", 1}}},
		{"x[SEP]]y", []sec{{"x", -1}, {"[SEP]]", 2}, {"y", -1}}}, // longest wins
		{"a  <s>  b", []sec{{"a", -1}, {"<s>", 3}, {"b", -1}}},
		{"[SE", []sec{{"[SE", -1}}},
	}
	for _, tt := range tests {
		if got := splitAdded(tt.in, toks); !slices.Equal(got, tt.want) {
			t.Errorf("splitAdded(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestLoadTokenizerErrors(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join(fixtureDir(t), TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	replace := func(old, new string) string {
		if !strings.Contains(string(good), old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(string(good), old, new, 1)
	}
	tests := []struct {
		name, path, wantErr string
	}{
		{"missing", filepath.Join(dir, "nope.json"), "no such file"},
		{"not json", write("bad.json", "{"), "unexpected"},
		{"truncated vocabulary", write("trunc.json", string(good[:len(good)/2])), "unexpected"},
		{"other normalizer", write("norm.json", replace(`"type":"BertNormalizer"`, `"type":"NFKC"`)), "unsupported normalizer"},
		{"other pre-tokenizer", write("pre.json", replace(`"pre_tokenizer": {"type":"BertPreTokenizer"}`, `"pre_tokenizer": {"type":"Whitespace"}`)), "unsupported pre_tokenizer"},
		{"other model", write("model.json", replace(`"model": {"type": "WordPiece"`, `"model": {"type": "BPE"`)), "unsupported model"},
		{"other post-processor", write("post.json", replace(`"type":"TemplateProcessing"`, `"type":"ByteLevel"`)), "unsupported post_processor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadTokenizer(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("LoadTokenizer: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}

	// BertProcessing (older tokenizer.json files) gives the same ids.
	p := write("bertproc.json", replace(`"post_processor": {`, `"post_processor": {"type":"BertProcessing","sep":["[SEP]",102],"cls":["[CLS]",101]}, "unused": {`))
	tok, err := LoadTokenizer(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tok.Encode("hello", 0); !slices.Equal(got, []int{idCLS, 7592, idSEP}) {
		t.Errorf("BertProcessing: got %v", got)
	}
}
