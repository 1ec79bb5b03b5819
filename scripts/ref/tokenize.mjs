// Independent reference tokenizer for pkg/embed tests (test-only).
//
//   node tokenize.mjs TOKENIZER_JSON [MAX_TOKENS] < texts.jsonl > ids.jsonl
//
// Reads one JSON string per line, prints one JSON array of token ids per
// line: Hugging Face's pure-JS tokenizer (@huggingface/tokenizers) with
// special tokens, truncated the way pkg/embed truncates (the text is cut to
// MAX_TOKENS-2 pieces, then [CLS] ... [SEP] wrap it). MAX_TOKENS 0 or absent
// means no truncation.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokPath, maxArg] = process.argv.slice(2);
if (!tokPath) {
  console.error("usage: node tokenize.mjs TOKENIZER_JSON [MAX_TOKENS] < texts.jsonl");
  process.exit(2);
}
const max = Number(maxArg || 0);
const tok = new Tokenizer(JSON.parse(readFileSync(tokPath, "utf8")), {});

// The post-processor wraps a text as prefix + pieces + suffix ([CLS] ...
// [SEP] for BERT); find the two parts once with a probe text.
const probeAll = tok.encode("a", { add_special_tokens: true }).ids;
const probeBare = tok.encode("a", { add_special_tokens: false }).ids;
const nPrefix = probeAll.indexOf(probeBare[0]);
const prefix = probeAll.slice(0, nPrefix);
const suffix = probeAll.slice(nPrefix + probeBare.length);

const out = [];
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (line === "") continue;
  const text = JSON.parse(line);
  let ids = tok.encode(text, { add_special_tokens: true }).ids;
  if (max > 0 && ids.length > max) {
    const bare = tok.encode(text, { add_special_tokens: false }).ids;
    ids = [...prefix, ...bare.slice(0, Math.max(0, max - prefix.length - suffix.length)), ...suffix];
  }
  out.push(JSON.stringify(ids.map(Number)));
}
process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
