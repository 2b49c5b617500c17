#!/usr/bin/env python3
"""Writes fuzz_model_file's seed of a converted Marian C++ model (Firefox's kind):
tests/fuzz/corpus/fuzz_model_file/hand-marian_native_ssru.petrel, so the fuzzer starts
from the fields format 1.4 added: SSRU decoder layers, the zero start embedding, int8
tensors with static activation scales, the SentencePieceIds tokenizer, a shortlist used
by default and padded to 8, the max length factor; and format 1.9's alignment layer.

    /usr/bin/python3 tests/fuzz/make_marian_native_seed.py build/release/tools/petrel-convert

A tiny model (d 8, 1 encoder + 1 SSRU decoder layer, 2 heads, FFN 16, 40 pieces, random
weights from a fixed seed) written by tools/reference/marian_native.py as intgemm8 with
alphas, a SentencePiece model from make_corpora.spm_model (ids: </s> 0, <unk> 1 as
Mozilla's vocabularies), a binary shortlist; converted with petrel-convert. Needs numpy.
The name starts with hand-, so make_corpora.py leaves it.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "reference"))
import make_corpora  # noqa: E402
import marian_native  # noqa: E402

D, FFN, VOCAB = 8, 16, 40


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = np.random.default_rng(25)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["H", "\u00e4"]
    pieces = [("</s>", 0.0, make_corpora.CONTROL), ("<unk>", 0.0, make_corpora.UNKNOWN)]
    pieces += [(w, -2.0 - i / 4, make_corpora.NORMAL) for i, w in enumerate(["\u2581the", "\u2581Haus", "\u2581is", "er"])]
    pieces += [("\u2581", -5.0, make_corpora.NORMAL)]
    pieces += [(c, -6.0 - i / 8, make_corpora.NORMAL) for i, c in enumerate(letters)]
    pieces = pieces[:VOCAB] + [(f"\u2581w{i}", -9.0, make_corpora.NORMAL) for i in range(VOCAB - len(pieces))]

    w = {}
    def add(name, *shape, scale=0.4, around=0.0):
        w[name] = (around + scale * rng.standard_normal(shape)).astype(np.float32)
    add("Wemb", VOCAB, D)
    for role, kinds in (("encoder", ("self",)), ("decoder", ("context",))):
        for kind in kinds:
            for m in "qkvo":
                add(f"{role}_l1_{kind}_W{m}", D, D)
                add(f"{role}_l1_{kind}_b{m}", 1, D, scale=0.1)
            add(f"{role}_l1_{kind}_Wo_ln_scale", 1, D, scale=0.1, around=1.0)
            add(f"{role}_l1_{kind}_Wo_ln_bias", 1, D, scale=0.1)
        add(f"{role}_l1_ffn_W1", D, FFN)
        add(f"{role}_l1_ffn_b1", 1, FFN, scale=0.1)
        add(f"{role}_l1_ffn_W2", FFN, D)
        add(f"{role}_l1_ffn_b2", 1, D, scale=0.1)
        add(f"{role}_l1_ffn_ffn_ln_scale", 1, D, scale=0.1, around=1.0)
        add(f"{role}_l1_ffn_ffn_ln_bias", 1, D, scale=0.1)
    add("decoder_l1_rnn_W", D, D)
    add("decoder_l1_rnn_Wf", D, D)
    add("decoder_l1_rnn_bf", 1, D, scale=0.1)
    add("decoder_l1_rnn_ffn_ln_scale", 1, D, scale=0.1, around=1.0)
    add("decoder_l1_rnn_ffn_ln_bias", 1, D, scale=0.1)
    add("decoder_ff_logit_out_b", 1, VOCAB, scale=0.1)
    options = {"type": "transformer", "dim-emb": D, "dim-vocabs": [VOCAB, VOCAB], "enc-depth": 1, "dec-depth": 1,
               "transformer-heads": 2, "transformer-dim-ffn": FFN, "transformer-ffn-depth": 2,
               "transformer-ffn-activation": "relu", "transformer-postprocess": "dan", "transformer-preprocess": "",
               "transformer-postprocess-emb": "d", "transformer-decoder-autoreg": "rnn", "dec-cell": "ssru",
               "tied-embeddings-all": True}
    alphas = {name: 2.0 + float(i) / 10 for i, name in enumerate(sorted(w)) if marian_native.is_intgemm_name(name)}
    with tempfile.TemporaryDirectory(prefix="petrel-marian-seed-") as work:
        marian_native.write_model_bin(os.path.join(work, "model.tiny.intgemm.alphas.bin"), w, options,
                                      intgemm8=True, alphas=alphas)
        with open(os.path.join(work, "vocab.tiny.spm"), "wb") as f:
            f.write(make_corpora.spm_model(pieces))
        lists = [sorted({int(x) for x in rng.integers(0, VOCAB, 4)}) for _ in range(VOCAB)]
        marian_native.write_binary_shortlist(os.path.join(work, "lex.2.4.tiny.s2t.bin"), 2, 4, lists)
        out = os.path.join(HERE, "corpus", "fuzz_model_file", "hand-marian_native_ssru.petrel")
        subprocess.run([sys.argv[1], work, "-o", out, "--quiet"], check=True)
        print(f"wrote {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
