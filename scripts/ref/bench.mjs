// Reference latency for bench/RESULTS.md (test tooling, not shipped):
// onnxruntime-node 1.24.1 on the same model, the same sentence as
// pkg/embed's BenchmarkEmbedOne/BenchmarkEmbedBatch32, tokenised by the
// Hugging Face JS tokenizer, 2 intra-op threads. Prints Markdown table rows.
//
//   node bench.mjs MODEL_DIR        (the table rows)
//   node bench.mjs MODEL_DIR one    (EmbedOne alone: ms per sentence)
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { Tokenizer } from "@huggingface/tokenizers";

const dir = process.argv[2];
if (!dir) {
  console.error("usage: node bench.mjs MODEL_DIR");
  process.exit(2);
}
const sentence = "Please remind the team that the quarterly budget review moves to Thursday afternoon.";
const tok = new Tokenizer(JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")), {});
const session = await ort.InferenceSession.create(join(dir, "model.onnx"), {
  intraOpNumThreads: 2,
  interOpNumThreads: 1,
  logSeverityLevel: 3,
});

function feeds(texts) {
  const rows = texts.map((t) => tok.encode(t, { add_special_tokens: true }).ids.map(Number));
  const s = Math.max(...rows.map((r) => r.length));
  const b = rows.length;
  const ids = new BigInt64Array(b * s), mask = new BigInt64Array(b * s), types = new BigInt64Array(b * s);
  rows.forEach((r, i) => r.forEach((v, j) => { ids[i * s + j] = BigInt(v); mask[i * s + j] = 1n; }));
  const f = {};
  for (const name of session.inputNames) {
    const data = name === "input_ids" ? ids : name === "attention_mask" ? mask : types;
    f[name] = new ort.Tensor("int64", data, [b, s]);
  }
  return f;
}

async function measure(texts, n) {
  for (let i = 0; i < 3; i++) await session.run(feeds(texts)); // warm-up
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await session.run(feeds(texts));
  return Number(process.hrtime.bigint() - t0) / 1e6 / n;
}

const one = await measure([sentence], 30);
if (process.argv[3] === "one") {
  // One round of EmbedOne alone, in ms (bench.sh interleaves rounds with ours).
  console.log(one.toFixed(3));
  process.exit(0);
}
const batch = Array.from({ length: 32 }, (_, i) => `Item ${i}: ${sentence}`);
const b32 = await measure(batch, 10);
console.log("| benchmark | time/op | metrics |");
console.log("|---|---|---|");
console.log(`| onnxruntime-node EmbedOne | ${one.toFixed(2)} ms | ${one.toFixed(2)} ms/sentence |`);
console.log(`| onnxruntime-node EmbedBatch32 | ${b32.toFixed(2)} ms | ${(b32 / 32).toFixed(2)} ms/sentence |`);
