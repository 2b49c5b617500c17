// transformers.js's tokenizer (npm @lenml/tokenizers 3.7.2) over escaped lines on stdin
// (make_hf_tokenizer_fixtures.py's format), for the tokenizer.json in argv[2]'s folder.
// Writes per line (little-endian): u32 n, n u32 ids, a flags byte, then the texts the
// flags do not give: bit 0 set: decode(ids, skip_special_tokens) is the line itself,
// else it follows (u32 length + UTF-8); bit 1 set: decode(ids) (special tokens kept) is
// the same text, else it follows likewise.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const dir = process.argv[2];
const require = createRequire(path.join(dir, "..", "..", "..", "noop.js"));
const { TokenizerLoader } = require("@lenml/tokenizers");
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
  tokenizerConfig: JSON.parse(readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
});
const unescape = (s) => s.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c === "t" ? "\t" : c));
const lines = readFileSync(0, "utf8").split("\n");
lines.pop();
const chunks = [];
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); chunks.push(b); };
const str = (s) => { const b = Buffer.from(s, "utf8"); u32(b.length); chunks.push(b); };
for (const line of lines) {
  const ids = tokenizer.encode(unescape(line));
  u32(ids.length);
  for (const id of ids) u32(id);
  const text = unescape(line);
  const skipped = tokenizer.decode(ids, { skip_special_tokens: true });
  const kept = tokenizer.decode(ids, { skip_special_tokens: false });
  chunks.push(Buffer.from([(skipped === text ? 1 : 0) | (kept === skipped ? 2 : 0)]));
  if (skipped !== text) str(skipped);
  if (kept !== skipped) str(kept);
}
process.stdout.write(Buffer.concat(chunks));
