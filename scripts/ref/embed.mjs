// Independent reference inference for pkg/embed tests (test-only).
//
//   node embed.mjs MODEL_ONNX [--raw] [--threads N] < batches.jsonl > out.jsonl
//
// Each input line is one batch: {"input_ids": [[...]], "attention_mask":
// [[...]], "token_type_ids": [[...]]} (rectangular; token_type_ids may be
// omitted: zeros). Runs it with onnxruntime-node and prints one line per
// batch: {"dims": [b,s,h], "cls": [[...]], "mean": [[...]], "raw": [...]?}
// where cls is token 0's hidden state and mean the attention-mask-weighted
// mean, both L2-normalised (in float64), and raw (with --raw) the flattened
// last_hidden_state.
import { createInterface } from "node:readline";
import * as ort from "onnxruntime-node";

const args = process.argv.slice(2);
const modelPath = args[0];
if (!modelPath) {
  console.error("usage: node embed.mjs MODEL_ONNX [--raw] [--threads N] < batches.jsonl");
  process.exit(2);
}
const raw = args.includes("--raw");
const ti = args.indexOf("--threads");
const threads = ti >= 0 ? Number(args[ti + 1]) : 1;

const session = await ort.InferenceSession.create(modelPath, {
  intraOpNumThreads: threads,
  interOpNumThreads: 1,
  logSeverityLevel: 3,
});
const outName = session.outputNames.includes("last_hidden_state") ? "last_hidden_state" : session.outputNames[0];

function tensor2d(rows) {
  const b = rows.length, s = b ? rows[0].length : 0;
  const data = new BigInt64Array(b * s);
  rows.forEach((r, i) => {
    if (r.length !== s) throw new Error("ragged batch");
    r.forEach((v, j) => { data[i * s + j] = BigInt(v); });
  });
  return new ort.Tensor("int64", data, [b, s]);
}

function normalise(v) {
  let n = 0;
  for (const x of v) n += x * x;
  n = Math.sqrt(n);
  return v.map((x) => (n > 0 ? x / n : x));
}

const lines = [];
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === "") continue;
  const batch = JSON.parse(line);
  const ids = batch.input_ids;
  const mask = batch.attention_mask;
  const types = batch.token_type_ids ?? ids.map((r) => r.map(() => 0));
  const feeds = {};
  for (const name of session.inputNames) {
    if (name === "input_ids") feeds[name] = tensor2d(ids);
    else if (name === "attention_mask") feeds[name] = tensor2d(mask);
    else if (name === "token_type_ids") feeds[name] = tensor2d(types);
    else throw new Error(`unexpected model input ${name}`);
  }
  const result = await session.run(feeds);
  const out = result[outName];
  const [b, s, h] = out.dims.map(Number);
  const data = out.data;
  const cls = [], mean = [];
  for (let i = 0; i < b; i++) {
    const c = new Array(h).fill(0), m = new Array(h).fill(0);
    let count = 0;
    for (let j = 0; j < s; j++) {
      const base = (i * s + j) * h;
      if (j === 0) for (let k = 0; k < h; k++) c[k] = data[base + k];
      if (Number(mask[i][j]) !== 0) {
        count++;
        for (let k = 0; k < h; k++) m[k] += data[base + k];
      }
    }
    cls.push(normalise(c));
    mean.push(normalise(m.map((x) => (count > 0 ? x / count : 0))));
  }
  const rec = { dims: [b, s, h], cls, mean };
  if (raw) rec.raw = Array.from(data);
  lines.push(JSON.stringify(rec));
}
process.stdout.write(lines.join("\n") + (lines.length ? "\n" : ""));
