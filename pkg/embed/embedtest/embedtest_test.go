package embedtest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// field is one decoded protobuf field.
type field struct {
	num  int
	wire int
	v    uint64 // varint / fixed
	b    []byte // length-delimited
}

// parse splits a protobuf message into its fields (a test-only decoder;
// pkg/embed's tests also decode the model with onnx-proto).
func parse(t *testing.T, msg []byte) []field {
	t.Helper()
	var out []field
	for len(msg) > 0 {
		key, n := binary.Uvarint(msg)
		if n <= 0 {
			t.Fatalf("bad key varint")
		}
		msg = msg[n:]
		f := field{num: int(key >> 3), wire: int(key & 7)}
		switch f.wire {
		case wireVarint:
			f.v, n = binary.Uvarint(msg)
			if n <= 0 {
				t.Fatalf("field %d: bad varint", f.num)
			}
			msg = msg[n:]
		case wireFixed32:
			f.v = uint64(binary.LittleEndian.Uint32(msg))
			msg = msg[4:]
		case wireFixed64:
			f.v = binary.LittleEndian.Uint64(msg)
			msg = msg[8:]
		case wireBytes:
			l, n := binary.Uvarint(msg)
			if n <= 0 || uint64(len(msg)-n) < l {
				t.Fatalf("field %d: bad length", f.num)
			}
			f.b = msg[n : n+int(l)]
			msg = msg[n+int(l):]
		default:
			t.Fatalf("field %d: wire type %d", f.num, f.wire)
		}
		out = append(out, f)
	}
	return out
}

func get(fs []field, num int) []field {
	var out []field
	for _, f := range fs {
		if f.num == num {
			out = append(out, f)
		}
	}
	return out
}

func TestWriteModelStructure(t *testing.T) {
	s := Shape{Vocab: 50, Hidden: 8, Layers: 2, Heads: 2, FF: 16, MaxPos: 16, TypeVocab: 2}
	p := filepath.Join(t.TempDir(), "m.onnx")
	if err := WriteModel(p, s, 1); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	model := parse(t, data)
	if ir := get(model, modelIRVersion); len(ir) != 1 || ir[0].v != 8 {
		t.Errorf("ir_version %v", ir)
	}
	opset := get(model, modelOpsetImport)
	if len(opset) != 1 || get(parse(t, opset[0].b), opsetVersion)[0].v != 17 {
		t.Errorf("opset_import %v", opset)
	}
	graphs := get(model, modelGraph)
	if len(graphs) != 1 {
		t.Fatalf("%d graphs", len(graphs))
	}
	g := parse(t, graphs[0].b)

	// Initializers: every float weight and constant, in full.
	var floats, params int64
	names := map[string]bool{}
	for _, f := range get(g, graphInitializer) {
		tf := parse(t, f.b)
		name := string(get(tf, tensorName)[0].b)
		names[name] = true
		n := int64(1)
		for _, d := range get(tf, tensorDims) {
			n *= int64(d.v)
		}
		raw := get(tf, tensorRawData)[0].b
		switch dt := get(tf, tensorDataType)[0].v; dt {
		case dataTypeFloat:
			if int64(len(raw)) != 4*n {
				t.Errorf("%s: %d bytes for %d floats", name, len(raw), n)
			}
			floats += n
			if n > 1 {
				params += n
			}
		case dataTypeInt64:
			if int64(len(raw)) != 8*n {
				t.Errorf("%s: %d bytes for %d int64s", name, len(raw), n)
			}
		default:
			t.Errorf("%s: data type %d", name, dt)
		}
		if name == "emb.ln.g" {
			for i := 0; i < len(raw); i += 4 {
				if v := math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])); v != 1 {
					t.Fatalf("emb.ln.g[%d] = %v, want 1", i/4, v)
				}
			}
		}
	}
	H, F := int64(s.Hidden), int64(s.FF)
	wantParams := int64(s.Vocab)*H + int64(s.MaxPos)*H + int64(s.TypeVocab)*H + 2*H +
		int64(s.Layers)*(4*(H*H+H)+2*H*F+F+H+4*H)
	if params != wantParams {
		t.Errorf("%d weights, want %d (BERT with %+v)", params, wantParams, s)
	}
	for _, n := range []string{"emb.word", "emb.pos", "emb.type", "layer1.ff2.w", "layer1.ln2.b"} {
		if !names[n] {
			t.Errorf("initializer %s missing", n)
		}
	}

	var ops = map[string]int{}
	for _, f := range get(g, graphNode) {
		ops[string(get(parse(t, f.b), nodeOpType)[0].b)]++
	}
	if ops["LayerNormalization"] != 1+2*s.Layers || ops["Softmax"] != s.Layers || ops["MatMul"] != 8*s.Layers || ops["Identity"] != 1 {
		t.Errorf("op counts %v", ops)
	}

	io := func(num int) []string {
		var out []string
		for _, f := range get(g, num) {
			vi := parse(t, f.b)
			tt := parse(t, get(parse(t, get(vi, valueInfoType)[0].b), typeTensorType)[0].b)
			var dims []string
			for _, d := range get(parse(t, get(tt, tensorTypeShape)[0].b), shapeDim) {
				df := parse(t, d.b)[0]
				if df.num == dimParam {
					dims = append(dims, string(df.b))
				} else {
					dims = append(dims, fmt.Sprint(df.v))
				}
			}
			out = append(out, fmt.Sprintf("%s:%d%v", get(vi, valueInfoName)[0].b, get(tt, tensorTypeElem)[0].v, dims))
		}
		return out
	}
	if got := fmt.Sprint(io(graphInput)); got != "[input_ids:7[batch seq] attention_mask:7[batch seq] token_type_ids:7[batch seq]]" {
		t.Errorf("inputs %s", got)
	}
	if got := fmt.Sprint(io(graphOutput)); got != "[last_hidden_state:1[batch seq 8]]" {
		t.Errorf("outputs %s", got)
	}
}

func TestWriteModelDeterministic(t *testing.T) {
	dir := t.TempDir()
	s := Shape{Vocab: 40, Hidden: 8, Layers: 1, Heads: 2, FF: 8, MaxPos: 8, TypeVocab: 2}
	write := func(name string, seed int64) []byte {
		p := filepath.Join(dir, name)
		if err := WriteModel(p, s, seed); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	a, b, c := write("a", 5), write("b", 5), write("c", 6)
	if !bytes.Equal(a, b) {
		t.Error("same seed, different files")
	}
	if bytes.Equal(a, c) || len(a) != len(c) {
		t.Error("different seeds should change the weights, not the size")
	}
	if err := WriteModel(filepath.Join(dir, "bad"), Shape{Vocab: 1, Hidden: 10, Heads: 3, FF: 1, MaxPos: 1, TypeVocab: 1}, 1); err == nil {
		t.Error("hidden not divisible by heads accepted")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name()[0] == '.' {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestRNGNormal(t *testing.T) {
	r := newRNG(42)
	const n = 200000
	var sum, sq float64
	for range n {
		v := r.normal()
		sum += v
		sq += v * v
	}
	mean, variance := sum/n, sq/n-(sum/n)*(sum/n)
	if math.Abs(mean) > 0.01 || math.Abs(variance-1) > 0.02 {
		t.Errorf("mean %v variance %v, want 0, 1", mean, variance)
	}
}

func TestWriteTokenizer(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := WriteTokenizer(p); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Normalizer map[string]any `json:"normalizer"`
		Model      struct {
			Type                 string         `json:"type"`
			UnkToken             string         `json:"unk_token"`
			MaxInputCharsPerWord int            `json:"max_input_chars_per_word"`
			Vocab                map[string]int `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &tj); err != nil {
		t.Fatal(err)
	}
	if len(tj.Model.Vocab) != 30522 || tj.Model.Vocab["[CLS]"] != 101 || tj.Model.Vocab["hello"] != 7592 {
		t.Errorf("vocab: %d entries, [CLS]=%d hello=%d", len(tj.Model.Vocab), tj.Model.Vocab["[CLS]"], tj.Model.Vocab["hello"])
	}
	if got := fmt.Sprint(tj.AddedTokens); got != "[{0 [PAD] true} {100 [UNK] true} {101 [CLS] true} {102 [SEP] true} {103 [MASK] true}]" {
		t.Errorf("added tokens %s", got)
	}
	if tj.Normalizer["strip_accents"] != nil || tj.Normalizer["lowercase"] != true || tj.Model.MaxInputCharsPerWord != 100 {
		t.Errorf("normalizer %v, model %s/%s/%d", tj.Normalizer, tj.Model.Type, tj.Model.UnkToken, tj.Model.MaxInputCharsPerWord)
	}
}
