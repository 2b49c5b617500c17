#!/usr/bin/python3
"""Writes fuzz_split_regex's seeds (tests/fuzz/corpus/fuzz_split_regex/hand-*): each real
pre-tokenizer pattern of tests/fixtures/split_regex/oracle.json, and its Oniguruma syntax probes (made by
tools/reference/make_split_regex_fixtures.py) with a few of its texts, plus patterns
using the rest of the syntax. An input is the pattern's length (2 bytes, little-endian),
the pattern, then the text.

    /usr/bin/python3 tests/fuzz/make_split_regex_seeds.py
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "corpus", "fuzz_split_regex")

EXTRA = {
    "syntax": (r"(?i:ab|[^\x{1F600}-\x{1F64F}\p{^Lu}]){2,5}?|^\s*$|\A(?:x(?=y))+\z|(?<n>\u00e9)(?#c)\Z|[a-c[x-z]\d\w\h]",
               "aBc AB\n  \n xy xy\u00e9 \U0001F600 Z9_"),
    "refused": (r"(a)\1(?<=b)", "aab"),
    "empty": ("", "text \u00e9"),
    # At the limits: a program of the most instructions the compiler accepts, one whose
    # every thread stays alive, one that copies its registers at every step.
    "limit_1024": ("a{1023}", "a" * 1900),
    "limit_busy": ("(?:.?){511}x", "y" * 1500),
    "limit_registers": ("(?:" + "(?:a??)*" * 60 + ")x", "a" * 600),
}


def write(name, pattern, text):
    p, t = pattern.encode(), text.encode()
    with open(os.path.join(OUT, "hand-" + name), "wb") as f:
        f.write(len(p).to_bytes(2, "little") + p + t)


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(ROOT, "tests", "fixtures", "split_regex", "oracle.json"), encoding="utf-8") as f:
        fixture = json.load(f)
    texts = fixture["texts"]
    edges = [e["text"] for e in fixture["edge_cases"]]
    for p in fixture["patterns"] + fixture["onig"]["patterns"]:
        for i, text in enumerate([texts[0], texts[len(texts) // 2], texts[-1], edges[4], edges[7], edges[16]]):
            write(f"{p['name']}_{i}.bin", p["pattern"], text)
    for name, (pattern, text) in EXTRA.items():
        write(name + ".bin", pattern, text)


if __name__ == "__main__":
    main()
