#!/usr/bin/env python3
"""Writes tests/fixtures/sentencepiece/surfaces.json: where each SentencePiece piece
comes from in its input (encode) and lands in its output (decode), by Debian's
python3-sentencepiece 0.1.97 as the oracle, for every committed model of
tests/fixtures/sentencepiece/models:

    /usr/bin/python3 tools/reference/make_spm_surface_fixtures.py

Texts: the first LINES lines of the held-out corpus (corpus.txt.xz) plus inputs with
leading, trailing and repeated whitespace, tabs, characters no model has (unknown
pieces, byte fallback) and full-width forms that normalization rewrites. For each
model and text: `encode` = [begin, end) byte offsets of each piece's surface
(ImmutableSentencePieceText), `ids` = the ids, and `decoded` = the text decode_ids_as_immutable_proto makes of `ids` followed by
the model's `eos` (when it has one, >= 0), `decode` = [begin, end) byte offsets of
each of those ids' surfaces in it. The oracle reports offsets in
characters; they are converted to bytes here.
"""
import json
import lzma
import os

import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "sentencepiece")
LINES = 80
EXTRA = [
    "", " ", "   Leading spaces", "Trailing spaces   ", "Repeated   inner    spaces", "Tab\tand\nnewline",
    "Ünïcödé wörds ☃ and ＦＵＬＬＷＩＤＴＨ ｶﾀｶﾅ", "Emoji 🦜 🦜🦜 end", "日本語のテキスト。", "ﬁne ligature ﬀ",
    "A  ☃☃  B", "x" * 3 + " ", "Ölçü  ağırlık", "Non\u00a0breaking\u2003em space", "<b>markup</b> &amp; text",
]


def char_to_byte(text):
    offsets, at = [], 0
    for ch in text:
        offsets.append(at)
        at += len(ch.encode("utf-8"))
    offsets.append(at)
    return offsets


def main():
    corpus = lzma.open(os.path.join(FIXTURES, "corpus.txt.xz"), "rt", encoding="utf-8").read().split("\n")
    texts = corpus[:LINES] + EXTRA
    models = {}
    for name in sorted(os.listdir(os.path.join(FIXTURES, "models"))):
        sp = spm.SentencePieceProcessor(model_file=os.path.join(FIXTURES, "models", name))
        eos = sp.eos_id()
        cases = []
        for text in texts:
            to_bytes = char_to_byte(text)
            proto = sp.encode(text, out_type="immutable_proto")
            ids = [p.id for p in proto.pieces]
            encode = [[to_bytes[p.begin], to_bytes[p.end]] for p in proto.pieces]
            decode_ids = ids + ([eos] if eos >= 0 else [])
            decoded = sp.decode_ids_as_immutable_proto(decode_ids)
            out_bytes = char_to_byte(decoded.text)
            decode = [[out_bytes[p.begin], out_bytes[p.end]] for p in decoded.pieces]
            assert len(decode) == len(decode_ids)
            cases.append({"ids": ids, "encode": encode, "decoded": decoded.text, "decode": decode})
        models[name[:-4]] = {"eos": eos, "cases": cases}
    out = {"made_by": "tools/reference/make_spm_surface_fixtures.py (python3-sentencepiece " + spm.__version__ + ")",
           "texts": texts, "models": models}
    with open(os.path.join(FIXTURES, "surfaces.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
