// transformers.js (npm @lenml/tokenizers 3.7.2) encoding and decoding the same lines as
// petrel_hf_tokenizer_bench, in one Node 20 process: prints lines/s, MB/s, tokens/s.
//   node bench/hf_tokenizer_js.mjs NODE_MODULES_DIR gemma3|qwen3|llama3 LINES_FILE [RUNS]
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [modules, name, linesFile, runsArg] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { TokenizerLoader } = require("@lenml/tokenizers");
const dir = path.join(modules, "@lenml", `tokenizer-${name}`, "models");
const t0 = performance.now();
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
});
const loadMs = performance.now() - t0;
const unescape = (s) => s.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c === "t" ? "\t" : c));
const lines = readFileSync(linesFile, "utf8").split("\n").slice(0, -1).map(unescape);
const bytes = lines.reduce((n, l) => n + Buffer.byteLength(l), 0);
const runs = Number(runsArg ?? 3);
let best = Infinity, bestDecode = Infinity, tokens = 0;
for (let r = 0; r < runs; ++r) {
  const all = [];
  let start = performance.now();
  for (const line of lines) all.push(tokenizer.encode(line));
  best = Math.min(best, performance.now() - start);
  tokens = all.reduce((n, ids) => n + ids.length, 0);
  start = performance.now();
  for (const ids of all) tokenizer.decode(ids, { skip_special_tokens: true });
  bestDecode = Math.min(bestDecode, performance.now() - start);
}
console.log(JSON.stringify({ tokenizer: name, load_ms: loadMs, lines: lines.length, encode_lines_per_s: lines.length / (best / 1000),
  encode_mb_per_s: bytes / 1e6 / (best / 1000), encode_tokens_per_s: tokens / (best / 1000),
  decode_tokens_per_s: tokens / (bestDecode / 1000) }));
