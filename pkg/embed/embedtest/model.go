// Package embedtest writes architecture-faithful test fixtures for
// pkg/embed: a BERT encoder ONNX graph with deterministic random weights and
// a Hugging Face tokenizer.json for BERT base uncased.
//
// The weights mean nothing. These files exist so that loading, shapes,
// numerics against an independent runtime, latency and memory can be tested
// on machines where real weights cannot be downloaded. Never ship them and
// never use them outside tests and benchmarks.
package embedtest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Shape is a BERT encoder's architecture.
type Shape struct {
	Vocab, Hidden, Layers, Heads, FF, MaxPos, TypeVocab int
	// Int8 writes the encoder's linear layers as ONNX Runtime's dynamic
	// quantisation writes them (quantize_dynamic, the "_quantized"/"int8"
	// exports of bge): int8 weights with a scale, the activations
	// quantised per call (DynamicQuantizeLinear, MatMulInteger).
	Int8 bool
}

// BGESmallInt8 is BGESmall with int8 linear layers (about 68 MB).
func BGESmallInt8() Shape { s := BGESmall(); s.Int8 = true; return s }

// BGESmall is BAAI/bge-small-en-v1.5's shape (about 133 MB of weights).
func BGESmall() Shape {
	return Shape{Vocab: 30522, Hidden: 384, Layers: 12, Heads: 12, FF: 1536, MaxPos: 512, TypeVocab: 2}
}

// Tiny is a fast shape for unit tests: the full uncased vocabulary and 512
// positions (so every token id and length the tokenizer produces is valid),
// but a narrow, two-layer encoder (about 4 MB).
func Tiny() Shape {
	return Shape{Vocab: 30522, Hidden: 32, Layers: 2, Heads: 4, FF: 64, MaxPos: 512, TypeVocab: 2}
}

func (s Shape) validate() error {
	switch {
	case s.Vocab <= 0, s.Hidden <= 0, s.Layers < 0, s.Heads <= 0, s.FF <= 0, s.MaxPos <= 0, s.TypeVocab <= 0:
		return fmt.Errorf("invalid shape %+v: sizes must be positive", s)
	case s.Hidden%s.Heads != 0:
		return fmt.Errorf("invalid shape %+v: hidden %d is not a multiple of heads %d", s, s.Hidden, s.Heads)
	}
	return nil
}

// WriteModel writes a BERT encoder as an ONNX model (IR 8, opset 17) to
// path: inputs input_ids, attention_mask and token_type_ids (int64
// [batch,seq]), output last_hidden_state (float [batch,seq,hidden]). It is a
// Go port of shared/tools/gen-bert-onnx/gen_bert.js: the same graph, node
// for node, with weights drawn from N(0, 0.02²) by a deterministic
// generator seeded with seed (LayerNorm gains 1, biases 0). Weights are
// streamed to disk, so memory stays small even for BGESmall. The file is
// written to a temporary name and renamed into place.
func WriteModel(path string, s Shape, seed int64) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("embedtest: write model: %w", err)
	}
	g := buildGraph(s, seed)
	return writeAtomic(path, func(w io.Writer) error { return g.encode(w) })
}

// writeAtomic writes a file through fn into a temporary file beside path,
// syncs it and renames it into place.
func writeAtomic(path string, fn func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("embedtest: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("embedtest: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := fn(bw); err != nil {
		return fmt.Errorf("embedtest: write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("embedtest: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("embedtest: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("embedtest: write %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("embedtest: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("embedtest: %w", err)
	}
	return nil
}

// initializer is a TensorProto whose raw data is produced while writing.
type initializer struct {
	name     string
	dims     []int64
	dataType int64
	count    int64
	// exactly one of these describes the data
	random bool      // N(0, 0.02²) floats from the graph's generator
	fill   float32   // constant float (when !random and ints == nil)
	ints   []int64   // int64 values
	floats []float32 // explicit float values (scalars)
}

func (in *initializer) rawLen() int64 {
	switch in.dataType {
	case dataTypeInt64:
		return in.count * 8
	case dataTypeInt8:
		return in.count
	}
	return in.count * 4
}

// int8Scale is the weight scale of an Int8 model: the N(0, 0.02²) weights
// over ±4 standard deviations in 127 steps.
const int8Scale = 0.08 / 127

// head is the TensorProto minus its raw data payload.
func (in *initializer) head() pb {
	var b pb
	for _, d := range in.dims {
		b = b.int64f(tensorDims, d)
	}
	b = b.int64f(tensorDataType, in.dataType)
	b = b.stringf(tensorName, in.name)
	return b.tag(tensorRawData, wireBytes).varint(uint64(in.rawLen()))
}

func (in *initializer) encodedLen() int64 {
	return bytesFieldLen(graphInitializer, int64(len(in.head()))+in.rawLen())
}

type attr struct {
	name string
	kind int64 // attrTypeInt | attrTypeFloat | attrTypeInts
	i    int64
	f    float32
	ints []int64
}

func intAttr(name string, v int64) attr     { return attr{name: name, kind: attrTypeInt, i: v} }
func floatAttr(name string, v float32) attr { return attr{name: name, kind: attrTypeFloat, f: v} }
func intsAttr(name string, v ...int64) attr { return attr{name: name, kind: attrTypeInts, ints: v} }
func (a attr) encode() pb {
	b := pb(nil).stringf(attrName, a.name)
	switch a.kind {
	case attrTypeFloat:
		b = b.float32f(attrF, a.f)
	case attrTypeInt:
		b = b.int64f(attrI, a.i)
	case attrTypeInts:
		for _, v := range a.ints {
			b = b.int64f(attrInts, v)
		}
	}
	return b.int64f(attrType, a.kind)
}

type graph struct {
	shape Shape
	seed  int64
	nodes []pb
	inits []*initializer
	k     int
}

func (g *graph) add(in *initializer) string {
	in.count = 1
	for _, d := range in.dims {
		in.count *= d
	}
	g.inits = append(g.inits, in)
	return in.name
}

func (g *graph) initF(name string, dims ...int64) string {
	return g.add(&initializer{name: name, dims: dims, dataType: dataTypeFloat, random: true})
}

func (g *graph) initConst(name string, v float32, dims ...int64) string {
	return g.add(&initializer{name: name, dims: dims, dataType: dataTypeFloat, fill: v})
}

func (g *graph) initI64(name string, vals ...int64) string {
	return g.add(&initializer{name: name, dims: []int64{int64(len(vals))}, dataType: dataTypeInt64, ints: vals})
}

func (g *graph) scalarF(name string, v float32) string {
	return g.add(&initializer{name: name, dataType: dataTypeFloat, floats: []float32{v}})
}

func (g *graph) scalarI64(name string, v int64) string {
	return g.add(&initializer{name: name, dataType: dataTypeInt64, ints: []int64{v}})
}

// node appends a node named after its first output, "<op>_<counter>", as
// gen_bert.js does, and returns its output names.
func (g *graph) node(op string, inputs []string, attrs []attr, nOut int) []string {
	outs := make([]string, nOut)
	for i := range outs {
		outs[i] = fmt.Sprintf("%s_%d", op, g.k)
		g.k++
	}
	g.nodes = append(g.nodes, encodeNode(op, outs[0], inputs, outs, attrs))
	return outs
}

func (g *graph) node1(op string, inputs []string, attrs ...attr) string {
	return g.node(op, inputs, attrs, 1)[0]
}

func encodeNode(op, name string, inputs, outputs []string, attrs []attr) pb {
	var b pb
	for _, in := range inputs {
		b = b.stringf(nodeInput, in)
	}
	for _, out := range outputs {
		b = b.stringf(nodeOutput, out)
	}
	b = b.stringf(nodeName, name)
	b = b.stringf(nodeOpType, op)
	for _, a := range attrs {
		b = b.bytesf(nodeAttribute, a.encode())
	}
	return b
}

func buildGraph(s Shape, seed int64) *graph {
	g := &graph{shape: s, seed: seed}
	V, H, P, T := int64(s.Vocab), int64(s.Hidden), int64(s.MaxPos), int64(s.TypeVocab)
	NH, FF := int64(s.Heads), int64(s.FF)
	HD := H / NH
	ss := func(v ...string) []string { return v }

	layerNorm := func(x, p string) string {
		return g.node1("LayerNormalization", ss(x, g.initConst(p+".g", 1, H), g.initConst(p+".b", 0, H)),
			intAttr("axis", -1), floatAttr("epsilon", 1e-12))
	}
	linear := func(x, p string, in, out int64) string {
		if !s.Int8 {
			mm := g.node1("MatMul", ss(x, g.initF(p+".w", in, out)))
			return g.node1("Add", ss(mm, g.initConst(p+".bias", 0, out)))
		}
		// y = (x_q - x_zp)·(W_q - 0) · x_scale · w_scale + bias
		xq := g.node("DynamicQuantizeLinear", ss(x), nil, 3)
		w := g.add(&initializer{name: p + ".w_q", dims: []int64{in, out}, dataType: dataTypeInt8, random: true})
		mmi := g.node1("MatMulInteger", ss(xq[0], w, xq[2], g.add(&initializer{name: p + ".w_zp", dataType: dataTypeInt8, fill: 0})))
		f := g.node1("Cast", ss(mmi), intAttr("to", dataTypeFloat))
		scl := g.node1("Mul", ss(xq[1], g.scalarF(p+".w_scale", int8Scale)))
		return g.node1("Add", ss(g.node1("Mul", ss(f, scl)), g.initConst(p+".bias", 0, out)))
	}

	// embeddings
	word := g.node1("Gather", ss(g.initF("emb.word", V, H), "input_ids"))
	shp := g.node1("Shape", ss("input_ids"))
	seqLen := g.node1("Gather", ss(shp, g.initI64("one_idx", 1)), intAttr("axis", 0))
	seqScalar := g.node1("Squeeze", ss(seqLen, g.initI64("sq_axes", 0)))
	zero := g.scalarI64("zero_i64", 0)
	one := g.scalarI64("one_i64", 1)
	posIDs := g.node1("Range", ss(zero, seqScalar, one))
	pos := g.node1("Gather", ss(g.initF("emb.pos", P, H), posIDs))
	typ := g.node1("Gather", ss(g.initF("emb.type", T, H), "token_type_ids"))
	x := layerNorm(g.node1("Add", ss(g.node1("Add", ss(word, pos)), typ)), "emb.ln")

	// additive attention mask [B,1,1,S]
	mf := g.node1("Cast", ss("attention_mask"), intAttr("to", dataTypeFloat))
	inv := g.node1("Sub", ss(g.scalarF("one_f", 1), mf))
	maskAdd := g.node1("Unsqueeze", ss(g.node1("Mul", ss(inv, g.scalarF("neg_big", -10000))), g.initI64("unsq_axes", 1, 2)))
	shapeHeads := g.initI64("shape_heads", 0, 0, NH, HD)
	shapeBack := g.initI64("shape_back", 0, 0, H)
	scale := g.scalarF("scale", float32(1/math.Sqrt(float64(HD))))
	sqrt2 := g.scalarF("sqrt2", float32(math.Sqrt2))
	half := g.scalarF("half", 0.5)

	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("layer%d", l)
		q := g.node1("Transpose", ss(g.node1("Reshape", ss(linear(x, p+".q", H, H), shapeHeads))), intsAttr("perm", 0, 2, 1, 3))
		k := g.node1("Transpose", ss(g.node1("Reshape", ss(linear(x, p+".k", H, H), shapeHeads))), intsAttr("perm", 0, 2, 3, 1))
		v := g.node1("Transpose", ss(g.node1("Reshape", ss(linear(x, p+".v", H, H), shapeHeads))), intsAttr("perm", 0, 2, 1, 3))
		scores := g.node1("Add", ss(g.node1("Mul", ss(g.node1("MatMul", ss(q, k)), scale)), maskAdd))
		probs := g.node1("Softmax", ss(scores), intAttr("axis", -1))
		ctx := g.node1("Reshape", ss(g.node1("Transpose", ss(g.node1("MatMul", ss(probs, v))), intsAttr("perm", 0, 2, 1, 3)), shapeBack))
		x1 := layerNorm(g.node1("Add", ss(linear(ctx, p+".o", H, H), x)), p+".ln1")
		ff := linear(x1, p+".ff1", H, FF)
		halfFF := g.node1("Mul", ss(ff, half))
		erf := g.node1("Erf", ss(g.node1("Div", ss(ff, sqrt2))))
		gelu := g.node1("Mul", ss(halfFF, g.node1("Add", ss(erf, g.scalarF(p+".onef", 1)))))
		x = layerNorm(g.node1("Add", ss(linear(gelu, p+".ff2", FF, H), x1)), p+".ln2")
	}
	g.nodes = append(g.nodes, encodeNode("Identity", "out", ss(x), ss("last_hidden_state"), nil))
	return g
}

func valueInfo(name string, elem int64, dims ...any) pb {
	var shape pb
	for _, d := range dims {
		var dim pb
		switch d := d.(type) {
		case string:
			dim = dim.stringf(dimParam, d)
		case int:
			dim = dim.int64f(dimValue, int64(d))
		}
		shape = shape.bytesf(shapeDim, dim)
	}
	tensor := pb(nil).int64f(tensorTypeElem, elem).bytesf(tensorTypeShape, shape)
	typ := pb(nil).bytesf(typeTensorType, tensor)
	return pb(nil).stringf(valueInfoName, name).bytesf(valueInfoType, typ)
}

// encode streams the ModelProto to w.
func (g *graph) encode(w io.Writer) error {
	// Everything but the initializer payloads is small; build it in memory.
	var nodes pb
	for _, n := range g.nodes {
		nodes = nodes.bytesf(graphNode, n)
	}
	name := pb(nil).stringf(graphName, "bert_random")
	var ios pb
	ios = ios.bytesf(graphInput, valueInfo("input_ids", dataTypeInt64, "batch", "seq"))
	ios = ios.bytesf(graphInput, valueInfo("attention_mask", dataTypeInt64, "batch", "seq"))
	ios = ios.bytesf(graphInput, valueInfo("token_type_ids", dataTypeInt64, "batch", "seq"))
	ios = ios.bytesf(graphOutput, valueInfo("last_hidden_state", dataTypeFloat, "batch", "seq", g.shape.Hidden))

	graphLen := int64(len(nodes) + len(name) + len(ios))
	for _, in := range g.inits {
		graphLen += in.encodedLen()
	}

	head := pb(nil).int64f(modelIRVersion, onnxIRVersion).
		stringf(modelProducerName, "agent-embedtest").
		tag(modelGraph, wireBytes).varint(uint64(graphLen))
	if _, err := w.Write(head); err != nil {
		return err
	}
	if _, err := w.Write(nodes); err != nil {
		return err
	}
	if _, err := w.Write(name); err != nil {
		return err
	}
	r := newRNG(g.seed)
	buf := make([]byte, 0, 64<<10)
	for _, in := range g.inits {
		h := in.head()
		tensorHead := pb(nil).tag(graphInitializer, wireBytes).varint(uint64(int64(len(h)) + in.rawLen()))
		if _, err := w.Write(append(tensorHead, h...)); err != nil {
			return err
		}
		var err error
		if buf, err = in.writeData(w, r, buf); err != nil {
			return err
		}
	}
	if _, err := w.Write(ios); err != nil {
		return err
	}
	opset := pb(nil).stringf(opsetDomain, "").int64f(opsetVersion, onnxOpsetVersion)
	_, err := w.Write(pb(nil).bytesf(modelOpsetImport, opset))
	return err
}

// writeData streams the initializer's little-endian payload in chunks.
func (in *initializer) writeData(w io.Writer, r *rng, buf []byte) ([]byte, error) {
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	for i := int64(0); i < in.count; i++ {
		switch {
		case in.dataType == dataTypeInt64:
			buf = binary.LittleEndian.AppendUint64(buf, uint64(in.ints[i]))
		case in.dataType == dataTypeInt8 && in.random:
			q := math.Round(r.normal() * 0.02 / int8Scale)
			buf = append(buf, byte(int8(max(-127, min(127, q)))))
		case in.dataType == dataTypeInt8:
			buf = append(buf, byte(int8(in.fill)))
		case in.random:
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(r.normal()*0.02)))
		case in.floats != nil:
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(in.floats[i]))
		default:
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(in.fill))
		}
		if len(buf) >= cap(buf)-8 {
			if err := flush(); err != nil {
				return buf, err
			}
		}
	}
	return buf, flush()
}

// rng is splitmix64 with Box-Muller normals: small, fast, and the same
// sequence for a seed on every Go version (math/rand/v2's normal generator
// makes no such promise).
type rng struct {
	s     uint64
	spare float64
	has   bool
}

func newRNG(seed int64) *rng { return &rng{s: uint64(seed)} }

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// uniform is in the open interval (0, 1).
func (r *rng) uniform() float64 { return (float64(r.next()>>11) + 0.5) / (1 << 53) }

func (r *rng) normal() float64 {
	if r.has {
		r.has = false
		return r.spare
	}
	rad := math.Sqrt(-2 * math.Log(r.uniform()))
	sin, cos := math.Sincos(2 * math.Pi * r.uniform())
	r.spare, r.has = rad*sin, true
	return rad * cos
}
