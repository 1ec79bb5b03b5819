package embed

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"agent/pkg/embed/embedtest"
)

// These tests compare against independent implementations in scripts/ref:
// Hugging Face's tokenizer (@huggingface/tokenizers, pure JS), ONNX Runtime
// for Node (onnxruntime-node), a protobuf decoder generated from onnx.proto
// (onnx-proto), and the original JS model generator.

// refIDs tokenizes texts with the reference tokenizer.
func refIDs(t *testing.T, tokPath string, maxTokens int, texts []string) [][]int {
	t.Helper()
	vals := make([]any, len(texts))
	for i, s := range texts {
		vals[i] = strings.ToValidUTF8(s, "\uFFFD") // what encoding/json sends anyway
	}
	out := decodeLines[[]int](t, runNode(t, "tokenize.mjs", jsonLines(t, vals...), tokPath, fmt.Sprint(maxTokens)))
	if len(out) != len(texts) {
		t.Fatalf("reference tokenizer returned %d results for %d texts", len(out), len(texts))
	}
	return out
}

func compareIDs(t *testing.T, tok *Tokenizer, tokPath string, maxTokens int, texts []string) {
	t.Helper()
	want := refIDs(t, tokPath, maxTokens, texts)
	bad := 0
	for i, s := range texts {
		got, err := tok.Encode(s, maxTokens)
		if err != nil {
			t.Errorf("Encode(%q): %v", s, err)
			continue
		}
		if !slices.Equal(got, want[i]) {
			bad++
			if bad <= 10 {
				t.Errorf("ids differ for %q (max %d)\n got %v\nwant %v", clip(s), maxTokens, clip(fmt.Sprint(got)), clip(fmt.Sprint(want[i])))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d texts differ from the reference tokenizer", bad, len(texts))
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func TestTokenizerMatchesReference(t *testing.T) {
	tokPath := filepath.Join(fixtureDir(t), TokenizerFile)
	tok := fixtureTokenizer(t)
	texts := corpus()
	t.Run("corpus", func(t *testing.T) {
		compareIDs(t, tok, tokPath, 512, texts)
	})
	t.Run("untruncated", func(t *testing.T) {
		compareIDs(t, tok, tokPath, 0, texts)
	})
	t.Run("short limits", func(t *testing.T) {
		for _, max := range []int{2, 3, 16} {
			compareIDs(t, tok, tokPath, max, texts)
		}
	})
	t.Run("random", func(t *testing.T) {
		compareIDs(t, tok, tokPath, 64, randomTexts(3000, 1))
	})
}

// TestTokenizerSupplementaryCJK pins the one deliberate difference from the
// JS tokenizer: ideographs beyond the BMP are split like the Rust and
// Python tokenizers split them. The JS reference gives the same ids once
// the spaces are put in by hand.
func TestTokenizerSupplementaryCJK(t *testing.T) {
	tokPath := filepath.Join(fixtureDir(t), TokenizerFile)
	tok := fixtureTokenizer(t)
	texts := []string{"a𠀀b", "x𪚥y 中𠮷z"}
	spaced := []string{"a 𠀀 b", "x 𪚥 y 中 𠮷 z"}
	want := refIDs(t, tokPath, 0, spaced)
	for i, s := range texts {
		got, err := tok.Encode(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[i]) {
			t.Errorf("Encode(%q) = %v, want %v (the reference's ids for %q)", s, got, want[i], spaced[i])
		}
	}
}

// randomTexts builds n deterministic texts from fragments chosen to hit the
// normaliser's corners.
func randomTexts(n int, seed uint64) []string {
	frags := []string{
		"a", "Z", "word", "Hello", "WORLD", "x1", "42", "3.5", " ", "  ", "\t", "\n", "\r\n",
		".", ",", "!", "?", "'", "\"", "-", "_", "(", ")", "[", "]", "{", "}", "<", ">", "@", "#", "$", "%",
		"^", "&", "*", "+", "=", "|", "\\", "/", "~", "`", ";", ":",
		"é", "É", "è", "ñ", "Ñ", "ü", "Ü", "ç", "ø", "Å", "ß", "ẞ", "æ", "œ", "İ", "ı", "ǅ", "ﬁ",
		"e\u0301", "A\u030a", "\u0301", "\u0308", "\u20dd",
		"Σ", "σ", "ς", "ΟΔΟΣ", "Α", "ά", "Ω", "Привет", "ЁЖ",
		"中", "文", "你好", "。", "，", "、", "「", "」", "日本", "が", "ガ", "ぱ", "ｶﾞ", "한", "국어", "ㄱ",
		"👍", "🏽", "👨", "\u200d", "👩", "❤", "\ufe0f", "🇩", "🇪", "😀",
		"\x00", "\x01", "\x1b", "\x7f", "\u0085", "\u00ad", "\u200b", "\u200c", "\u200e", "\u2060", "\ufeff",
		"\u00a0", "\u1680", "\u2000", "\u2007", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
		"\ue000", "\U000F0001", "\ufffd", "\xff", "\xc3",
		"[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "[SEP", "SEP]", "[sep]",
		"½", "²", "①", "٣", "ⅷ", "Ⅻ", "𝐀", "Ａ", "ｚ", "ℌ", "№", "™", "€", "£", "¥", "§", "¶", "·", "•", "…", "—", "–",
		"http://x.y/z?q=1", "a@b.c", "O'Neil", "isn't", "U.S.A.",
		"مرحبا", "שלום", "नमस्ते", "สวัสดี", "ⵜⴰ", "ᏣᎳᎩ",
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range 1 + r.IntN(40) {
			b.WriteString(frags[r.IntN(len(frags))])
		}
		out[i] = b.String()
	}
	return out
}

type refEmbedding struct {
	Dims []int       `json:"dims"`
	CLS  [][]float64 `json:"cls"`
	Mean [][]float64 `json:"mean"`
	Raw  []float64   `json:"raw"`
}

type refBatch struct {
	InputIDs      [][]int `json:"input_ids"`
	AttentionMask [][]int `json:"attention_mask"`
	TokenTypeIDs  [][]int `json:"token_type_ids"`
}

func single(ids []int) refBatch {
	ones := make([]int, len(ids))
	zeros := make([]int, len(ids))
	for i := range ones {
		ones[i] = 1
	}
	return refBatch{InputIDs: [][]int{ids}, AttentionMask: [][]int{ones}, TokenTypeIDs: [][]int{zeros}}
}

func maxAbsDiff(a []float32, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-b[i]))
	}
	return d
}

func l2(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// TestEmbedMatchesReference runs every corpus text through our path
// (tokenizer, batching with padding, inference, pooling, normalisation)
// and compares with onnxruntime-node running each text alone, unpadded,
// with pooling and normalisation done in JS.
func TestEmbedMatchesReference(t *testing.T) {
	texts := corpus()
	tok := fixtureTokenizer(t)
	var batches []any
	for _, s := range texts {
		ids, err := tok.Encode(s, 512)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, single(ids))
	}
	ref := decodeLines[refEmbedding](t, runNode(t, "embed.mjs", jsonLines(t, batches...),
		filepath.Join(fixtureDir(t), ModelFile)))
	if len(ref) != len(texts) {
		t.Fatalf("reference returned %d results for %d texts", len(ref), len(texts))
	}
	for _, pooling := range []string{PoolingCLS, PoolingMean} {
		t.Run(pooling, func(t *testing.T) {
			e := newTestEmbedder(t, Config{Pooling: pooling, BatchSize: 8})
			got, err := e.Embed(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i := range texts {
				want := ref[i].CLS[0]
				if pooling == PoolingMean {
					want = ref[i].Mean[0]
				}
				if len(got[i]) != len(want) || len(got[i]) != e.Dim() {
					t.Fatalf("text %d: dim %d, reference %d, Dim() %d", i, len(got[i]), len(want), e.Dim())
				}
				d := maxAbsDiff(got[i], want)
				worst = max(worst, d)
				if d >= 1e-4 {
					t.Errorf("text %d (%q): max abs difference %g from onnxruntime-node", i, clip(texts[i]), d)
				}
				if n := l2(got[i]); math.Abs(n-1) > 1e-5 {
					t.Errorf("text %d: L2 norm %v, want 1", i, n)
				}
			}
			t.Logf("%s pooling: max abs difference from onnxruntime-node over %d texts: %.3g", pooling, len(texts), worst)

			// Batch vs single: each text alone gives what it gave in the
			// padded batch.
			worst = 0
			for i, s := range texts {
				one, err := e.Embed(context.Background(), []string{s})
				if err != nil {
					t.Fatal(err)
				}
				for k := range one[0] {
					worst = max(worst, math.Abs(float64(one[0][k]-got[i][k])))
				}
			}
			if worst >= 1e-5 {
				t.Errorf("batch vs single: max abs difference %g", worst)
			}
			t.Logf("%s pooling: batch vs single max abs difference: %.3g", pooling, worst)
		})
	}
}

// TestRawHiddenStateMatchesReference compares the unpooled output of one
// padded batch, fed identically to both runtimes.
func TestRawHiddenStateMatchesReference(t *testing.T) {
	tok := fixtureTokenizer(t)
	e := newTestEmbedder(t, Config{})
	texts := []string{"short", "a somewhat longer sentence, with punctuation!", ""}
	rows := make([][]int, len(texts))
	s := 0
	for i, txt := range texts {
		rows[i], _ = tok.Encode(txt, 512)
		s = max(s, len(rows[i]))
	}
	var batch refBatch
	for _, r := range rows {
		ids := make([]int, s)
		mask := make([]int, s)
		for j := range s {
			if j < len(r) {
				ids[j], mask[j] = r[j], 1
			}
		}
		batch.InputIDs = append(batch.InputIDs, ids)
		batch.AttentionMask = append(batch.AttentionMask, mask)
		batch.TokenTypeIDs = append(batch.TokenTypeIDs, make([]int, s))
	}
	ref := decodeLines[refEmbedding](t, runNode(t, "embed.mjs", jsonLines(t, batch),
		filepath.Join(fixtureDir(t), ModelFile), "--raw"))[0]
	hidden := e.rawHidden(t, rows)
	if !slices.Equal(ref.Dims, []int{len(rows), s, e.Dim()}) {
		t.Fatalf("reference dims %v, want [%d %d %d]", ref.Dims, len(rows), s, e.Dim())
	}
	if d := maxAbsDiff(hidden, ref.Raw); d >= 1e-4 {
		t.Errorf("last_hidden_state: max abs difference %g", d)
	} else {
		t.Logf("last_hidden_state [%d %d %d]: max abs difference %.3g", len(rows), s, e.Dim(), d)
	}
}

// rawHidden runs one batch through the session and returns the unpooled
// output.
func (e *Embedder) rawHidden(t *testing.T, rows [][]int) []float32 {
	t.Helper()
	hidden, _, _, _, err := e.infer(context.Background(), rows)
	if err != nil {
		t.Fatal(err)
	}
	return hidden
}

// TestModelMatchesJSGenerator decodes our ONNX file with onnx-proto and
// compares it with the original gen_bert.js output for the same shape:
// the same nodes, attributes, initializers, inputs and outputs.
func TestModelMatchesJSGenerator(t *testing.T) {
	node, dir := refTool(t)
	tmp := t.TempDir()
	s := embedtest.Tiny()
	s.Layers = 3
	ours := filepath.Join(tmp, "go.onnx")
	if err := embedtest.WriteModel(ours, s, 3); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(tmp, "js.onnx")
	cmd := exec.Command(node, filepath.Join(dir, "gen_bert.cjs"), theirs)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("VOCAB=%d", s.Vocab), fmt.Sprintf("HIDDEN=%d", s.Hidden),
		fmt.Sprintf("LAYERS=%d", s.Layers), fmt.Sprintf("HEADS=%d", s.Heads), fmt.Sprintf("FF=%d", s.FF),
		fmt.Sprintf("MAXPOS=%d", s.MaxPos), fmt.Sprintf("TYPE_VOCAB=%d", s.TypeVocab))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen_bert.cjs: %v\n%s", err, out)
	}
	decode := func(p string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(runNode(t, "inspect.mjs", nil, p), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	a, b := decode(ours), decode(theirs)
	for k := range b {
		if k == "producerName" {
			continue
		}
		if string(a[k]) != string(b[k]) {
			t.Errorf("%s differs from gen_bert.js:\n go: %s\n js: %s", k, clip(string(a[k])), clip(string(b[k])))
		}
	}
	var sum struct {
		IRVersion int `json:"irVersion"`
		Opset     []struct {
			Version int `json:"version"`
		} `json:"opset"`
		Nodes int `json:"nodes"`
	}
	raw, _ := json.Marshal(a)
	json.Unmarshal(raw, &sum)
	if sum.IRVersion != 8 || len(sum.Opset) != 1 || sum.Opset[0].Version != 17 {
		t.Errorf("ir %d opset %+v, want IR 8, opset 17", sum.IRVersion, sum.Opset)
	}
	t.Logf("graph of %d nodes identical to gen_bert.js", sum.Nodes)
}
