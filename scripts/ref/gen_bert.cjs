// Test-only copy of shared/tools/gen-bert-onnx/gen_bert.js, the generator
// that pkg/embed/embedtest.WriteModel ports to Go, with the shape taken from
// the environment (VOCAB HIDDEN LAYERS HEADS FF MAXPOS TYPE_VOCAB; defaults
// are bge-small's). pkg/embed's tests run both and compare the decoded
// graphs (inspect.mjs), so the Go port is checked against the original.
//
//   VOCAB=... HIDDEN=... node gen_bert.cjs out.onnx
// Builds a BERT encoder ONNX graph with the exact architecture of
// BAAI/bge-small-en-v1.5 (vocab 30522, hidden 384, 12 layers, 12 heads,
// intermediate 1536, max_pos 512, type_vocab 2) filled with RANDOM weights.
// Purpose: latency / RSS / plumbing test only -- embeddings are meaningless.
const fs = require('fs');
const { onnx } = require('onnx-proto');

const env = (k, d) => +(process.env[k] || d);
const V = env('VOCAB', 30522), H = env('HIDDEN', 384), L = env('LAYERS', 12), NH = env('HEADS', 12), HD = H / NH,
  FF = env('FF', 1536), P = env('MAXPOS', 512), T = env('TYPE_VOCAB', 2);
const out = process.argv[2] || 'bert_small_random.onnx';

let seed = 12345;
function randn() { // deterministic Box-Muller
  seed = (seed * 1103515245 + 12345) & 0x7fffffff; const u1 = (seed + 1) / 0x80000000;
  seed = (seed * 1103515245 + 12345) & 0x7fffffff; const u2 = seed / 0x80000000;
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}
const F = onnx.TensorProto.DataType.FLOAT, I64 = onnx.TensorProto.DataType.INT64;
const inits = [], nodes = [];
function initF(name, dims, fill) {
  const n = dims.reduce((a, b) => a * b, 1); const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = fill === undefined ? randn() * 0.02 : fill;
  inits.push(onnx.TensorProto.create({ name, dims, dataType: F, rawData: new Uint8Array(a.buffer) }));
  return name;
}
function initI64(name, vals) {
  const a = new BigInt64Array(vals.map(BigInt));
  inits.push(onnx.TensorProto.create({ name, dims: [vals.length], dataType: I64, rawData: new Uint8Array(a.buffer) }));
  return name;
}
function initScalarF(name, v) {
  inits.push(onnx.TensorProto.create({ name, dims: [], dataType: F, rawData: new Uint8Array(new Float32Array([v]).buffer) }));
  return name;
}
let k = 0;
function node(op, inputs, attrs = {}, nOut = 1) {
  const outs = []; for (let i = 0; i < nOut; i++) outs.push(`${op}_${k++}`);
  const attribute = Object.entries(attrs).map(([name, v]) => {
    if (Array.isArray(v)) return onnx.AttributeProto.create({ name, ints: v, type: onnx.AttributeProto.AttributeType.INTS });
    if (Number.isInteger(v)) return onnx.AttributeProto.create({ name, i: v, type: onnx.AttributeProto.AttributeType.INT });
    return onnx.AttributeProto.create({ name, f: v, type: onnx.AttributeProto.AttributeType.FLOAT });
  });
  nodes.push(onnx.NodeProto.create({ opType: op, input: inputs, output: outs, name: outs[0], attribute }));
  return nOut === 1 ? outs[0] : outs;
}
const layerNorm = (x, p) => node('LayerNormalization', [x, initF(p + '.g', [H], 1), initF(p + '.b', [H], 0)], { axis: -1, epsilon: 1e-12 });
const linear = (x, p, i, o) => node('Add', [node('MatMul', [x, initF(p + '.w', [i, o])]), initF(p + '.bias', [o], 0)]);

// embeddings
const word = node('Gather', [initF('emb.word', [V, H]), 'input_ids']);
const shp = node('Shape', ['input_ids']);
const seqLen = node('Gather', [shp, initI64('one_idx', [1]).replace('one_idx', 'one_idx')], { axis: 0 });
const seqScalar = node('Squeeze', [seqLen, initI64('sq_axes', [0])]);
const zero = 'zero_i64', oneS = 'one_i64';
inits.push(onnx.TensorProto.create({ name: zero, dims: [], dataType: I64, rawData: new Uint8Array(new BigInt64Array([0n]).buffer) }));
inits.push(onnx.TensorProto.create({ name: oneS, dims: [], dataType: I64, rawData: new Uint8Array(new BigInt64Array([1n]).buffer) }));
const posIds = node('Range', [zero, seqScalar, oneS]);
const pos = node('Gather', [initF('emb.pos', [P, H]), posIds]);
const typ = node('Gather', [initF('emb.type', [T, H]), 'token_type_ids']);
let x = layerNorm(node('Add', [node('Add', [word, pos]), typ]), 'emb.ln');

// additive attention mask [B,1,1,S]
const mf = node('Cast', ['attention_mask'], { to: F });
const inv = node('Sub', [initScalarF('one_f', 1.0), mf]);
const maskAdd = node('Unsqueeze', [node('Mul', [inv, initScalarF('neg_big', -10000.0)]), initI64('unsq_axes', [1, 2])]);
const shapeHeads = initI64('shape_heads', [0, 0, NH, HD]);
const shapeBack = initI64('shape_back', [0, 0, H]);
const scale = initScalarF('scale', 1 / Math.sqrt(HD));
const sqrt2 = initScalarF('sqrt2', Math.SQRT2), half = initScalarF('half', 0.5);

for (let l = 0; l < L; l++) {
  const p = `layer${l}`;
  const q = node('Transpose', [node('Reshape', [linear(x, p + '.q', H, H), shapeHeads])], { perm: [0, 2, 1, 3] });
  const kk = node('Transpose', [node('Reshape', [linear(x, p + '.k', H, H), shapeHeads])], { perm: [0, 2, 3, 1] });
  const v = node('Transpose', [node('Reshape', [linear(x, p + '.v', H, H), shapeHeads])], { perm: [0, 2, 1, 3] });
  const scores = node('Add', [node('Mul', [node('MatMul', [q, kk]), scale]), maskAdd]);
  const probs = node('Softmax', [scores], { axis: -1 });
  const ctx = node('Reshape', [node('Transpose', [node('MatMul', [probs, v])], { perm: [0, 2, 1, 3] }), shapeBack]);
  const x1 = layerNorm(node('Add', [linear(ctx, p + '.o', H, H), x]), p + '.ln1');
  const ff = linear(x1, p + '.ff1', H, FF);
  const gelu = node('Mul', [node('Mul', [ff, half]), node('Add', [node('Erf', [node('Div', [ff, sqrt2])]), initScalarF(p + '.onef', 1.0)])]);
  x = layerNorm(node('Add', [linear(gelu, p + '.ff2', FF, H), x1]), p + '.ln2');
}
nodes.push(onnx.NodeProto.create({ opType: 'Identity', input: [x], output: ['last_hidden_state'], name: 'out' }));

const dimB = onnx.TensorShapeProto.Dimension.create({ dimParam: 'batch' });
const dimS = onnx.TensorShapeProto.Dimension.create({ dimParam: 'seq' });
const vi = (name, t, dims) => onnx.ValueInfoProto.create({ name, type: onnx.TypeProto.create({ tensorType: onnx.TypeProto.Tensor.create({ elemType: t, shape: onnx.TensorShapeProto.create({ dim: dims }) }) }) });
const graph = onnx.GraphProto.create({
  name: 'bert_small_random', node: nodes, initializer: inits,
  input: [vi('input_ids', I64, [dimB, dimS]), vi('attention_mask', I64, [dimB, dimS]), vi('token_type_ids', I64, [dimB, dimS])],
  output: [vi('last_hidden_state', F, [dimB, dimS, onnx.TensorShapeProto.Dimension.create({ dimValue: H })])],
});
const model = onnx.ModelProto.create({ irVersion: 8, producerName: 'feas-gen', graph, opsetImport: [onnx.OperatorSetIdProto.create({ domain: '', version: 17 })] });
fs.writeFileSync(out, onnx.ModelProto.encode(model).finish());
console.log('wrote', out, fs.statSync(out).size, 'bytes,', nodes.length, 'nodes,', inits.length, 'initializers');
