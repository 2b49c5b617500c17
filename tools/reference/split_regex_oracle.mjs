// The oracle of tests/fixtures/split_regex: JavaScript's RegExp (Node >= 20, flags "gu")
// over texts, driven by make_split_regex_fixtures.py. Reads {"patterns": [js source...],
// "texts": [...]} as JSON on stdin; writes, per pattern and text, the matches as UTF-8
// byte offsets [[begin, end], ...] (JSON on stdout), as HF's tokenizers (the onig crate's
// find_iter, like Rust's regex) reports them: JS's matchAll also reports an empty match
// right at the previous match's end, which Rust skips (the next search then starts one
// code point on in both), so such matches are dropped here.
import { readFileSync } from "node:fs";

const input = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const source of input.patterns) {
  const re = new RegExp(source, "gu");
  const perText = [];
  for (const text of input.texts) {
    // UTF-16 index -> UTF-8 byte offset.
    const bytesBefore = new Int32Array(text.length + 1);
    for (let i = 0, b = 0; i <= text.length; ++i) {
      bytesBefore[i] = b;
      if (i === text.length) break;
      const c = text.codePointAt(i);
      if (c > 0xffff) {
        bytesBefore[i + 1] = b;  // inside the pair: never a match boundary with "u"
        b += 4;
        ++i;
        bytesBefore[i + 1] = b;
        continue;
      }
      b += c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    }
    const matches = [];
    let lastEnd = -1;
    for (const m of text.matchAll(re)) {
      const begin = bytesBefore[m.index], end = bytesBefore[m.index + m[0].length];
      if (begin === end && begin === lastEnd) continue;
      matches.push([begin, end]);
      lastEnd = end;
    }
    perText.push(matches);
  }
  out.push(perText);
}
process.stdout.write(JSON.stringify(out));
