// transformers.js's tokenizer (npm @lenml/tokenizers 3.7.2) for make_hf_wordpiece_fixtures.py.
//   node wordpiece_oracle.mjs <modules> encode <dir>   escaped lines on stdin; writes per line
//       (little-endian) u16 n, n u16 ids of encode(line), then decode(ids,
//       skip_special_tokens: true) as u32 length + UTF-8.
//   node wordpiece_oracle.mjs <modules> lowercase      escaped lines on stdin; writes each
//       line's toLowerCase(), escaped, one per line.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const [modules, mode, dir] = process.argv.slice(2);
const unescape = (s) => s.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c === "t" ? "\t" : c));
const escape = (s) => s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/\t/g, "\\t");
const lines = readFileSync(0, "utf8").split("\n");
lines.pop();
if (mode === "lowercase") {
  process.stdout.write(lines.map((l) => escape(unescape(l).toLowerCase()) + "\n").join(""));
} else {
  const require = createRequire(path.join(modules, "noop.js"));
  const { TokenizerLoader } = require("@lenml/tokenizers");
  const tokenizer = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
    tokenizerConfig: JSON.parse(readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
  });
  const chunks = [];
  for (const line of lines) {
    const ids = tokenizer.encode(unescape(line));
    const head = Buffer.alloc(2 + 2 * ids.length);
    head.writeUInt16LE(ids.length, 0);
    ids.forEach((id, i) => head.writeUInt16LE(id, 2 + 2 * i));
    chunks.push(head);
    const text = Buffer.from(tokenizer.decode(ids, { skip_special_tokens: true }), "utf8");
    const n = Buffer.alloc(4);
    n.writeUInt32LE(text.length);
    chunks.push(n, text);
  }
  process.stdout.write(Buffer.concat(chunks));
}
