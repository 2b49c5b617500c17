#!/usr/bin/python3
"""Writes tests/fixtures/sentencepiece/bpe_unused_cases.json: small BPE models with
UNUSED pieces (the pieces listed, no charsmap, defaults otherwise) and Debian's
sentencepiece 0.1.97 (python3-sentencepiece, the oracle) encodings of texts made to
repeat the unused pieces' strings next to unknown characters (#24: Petrel split every
occurrence of an unused piece where its last occurrence was, and merged unknown pieces
that were not adjacent). Deterministic (fixed seed):

    /usr/bin/python3 tests/make_spm_unused_cases.py
"""
import json
import os
import random
import sys

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fuzz"))
from make_corpora import NORMAL, UNKNOWN, UNUSED, spm_model  # noqa: E402

S = "\u2581"
MODELS = {
    # The case: an unused piece whose halves are no pieces.
    "unused_pair": [("<unk>", 0.0, UNKNOWN), (S, -1.0, NORMAL), ("xy", -2.0, UNUSED)],
    # Unused pieces made of unused pieces, beside normal merges.
    "nested_unused": [("<unk>", 0.0, UNKNOWN), (S, -1.0, NORMAL), ("a", -5.0, NORMAL), ("b", -5.1, NORMAL),
                      ("ab", -1.5, UNUSED), ("abab", -1.2, UNUSED), ("ba", -3.0, NORMAL), ("bQ", -2.5, NORMAL),
                      (S + "ab", -1.1, UNUSED), ("abQ", -0.5, NORMAL)],
    # Unused multi-byte pieces and unknown characters of several lengths.
    "unused_utf8": [("<unk>", 0.0, UNKNOWN), (S, -1.0, NORMAL), ("\u00e9", -4.0, NORMAL),
                    ("\u00e9\u00e9", -2.0, UNUSED), ("x\u00e9", -2.2, UNUSED), ("\u00e9x", -2.4, NORMAL),
                    ("\u6570", -6.0, NORMAL)],
}
ALPHABET = ["x", "y", "Q", " ", "a", "b", "\u00e9", "\u6570", "\u00fc", "xy", "ab", "\u00e9\u00e9"]


def texts(rng):
    out = ["xyQ xy", "xy xy", "xyxy", "Qxy xyQ", "abQ ab abab bab", "\u00e9\u00e9x x\u00e9 \u00fc\u00e9\u00e9"]
    for _ in range(300):
        out.append("".join(rng.choice(ALPHABET) for _ in range(rng.randrange(1, 16))))
    return out


def main():
    rng = random.Random(24)
    inputs = texts(rng)
    cases = {"inputs": inputs, "models": {}}
    for name, pieces in MODELS.items():
        sp = spm.SentencePieceProcessor(model_proto=spm_model(pieces, bpe=True))
        cases["models"][name] = {
            "pieces": [[p, score, t] for p, score, t in pieces],
            "encode": [{"pieces": sp.encode(t, out_type=str), "ids": sp.encode(t)} for t in inputs],
        }
    path = os.path.join(HERE, "fixtures", "sentencepiece", "bpe_unused_cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
