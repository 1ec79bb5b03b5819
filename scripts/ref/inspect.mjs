// Independent decoder check for pkg/embed/embedtest's hand-written ONNX
// protobuf (test-only).
//
//   node inspect.mjs MODEL_ONNX > summary.json
//
// Decodes the file with onnx-proto (protobufjs, generated from onnx.proto)
// and prints a summary: versions, graph inputs/outputs with types and
// dimensions, node count per op type, and each initializer's name, dims,
// data type and raw byte length, and every node as one line.
import { readFileSync } from "node:fs";
import onnxProto from "onnx-proto";

const { onnx } = onnxProto;
const path = process.argv[2];
if (!path) {
  console.error("usage: node inspect.mjs MODEL_ONNX");
  process.exit(2);
}
const m = onnx.ModelProto.decode(readFileSync(path));
const num = (v) => (v == null ? null : Number(v));
const vi = (v) => ({
  name: v.name,
  elemType: v.type.tensorType.elemType,
  dims: v.type.tensorType.shape.dim.map((d) => (d.dimParam ? d.dimParam : num(d.dimValue))),
});
const ops = {};
for (const n of m.graph.node) ops[n.opType] = (ops[n.opType] || 0) + 1;
const attrs = {};
for (const n of m.graph.node) {
  for (const a of n.attribute) {
    const key = `${n.opType}.${a.name}`;
    const val = a.type === 1 ? a.f : a.type === 2 ? num(a.i) : a.type === 7 ? a.ints.map(num) : null;
    attrs[key] = attrs[key] || [];
    const s = JSON.stringify(val);
    if (!attrs[key].includes(s)) attrs[key].push(s);
  }
}
const summary = {
  irVersion: num(m.irVersion),
  producerName: m.producerName,
  opset: m.opsetImport.map((o) => ({ domain: o.domain || "", version: num(o.version) })),
  inputs: m.graph.input.map(vi),
  outputs: m.graph.output.map(vi),
  nodes: m.graph.node.length,
  // every node: op, name, inputs -> outputs
  graph: m.graph.node.map((n) => `${n.opType} ${n.name}: ${n.input.join(",")} -> ${n.output.join(",")}`),
  ops,
  attrs,
  initializers: m.graph.initializer.map((t) => ({
    name: t.name,
    dims: t.dims.map(num),
    dataType: t.dataType,
    rawLen: t.rawData.length,
  })),
};
process.stdout.write(JSON.stringify(summary) + "\n");
