#!/usr/bin/env python3
"""Makes a stand-in for Mozilla's "tiny" Firefox Translations student (the shape of
e.g. `model.enit.intgemm.alphas.bin`): dim-emb 256, 6 encoder layers, 2 SSRU decoder
layers, FFN 1536, 8 heads, relu, post-LN "dan", tied-embeddings-all, one shared
SentencePiece vocabulary of 32000 pieces. Weights are random (not trained) at the
scales of tools/reference/make_marian_native_fixtures.py; speed does not depend on
their values, only output lengths do (random weights tend to run to the length limit).

    /usr/bin/python3 bench/make_firefox_tiny_standin.py OUTDIR

Writes (deterministic on one machine; 99.7 MB in all, not committed):
  OUTDIR/model.tiny.intgemm.alphas.bin   intgemm8 weights + <W>_QuantMultA alphas
  OUTDIR/vocab.tiny.spm                  SentencePiece unigram model (</s> 0, <unk> 1)
  OUTDIR/lex.50.50.tiny.s2t.bin          binary shortlist, firstNum 50, bestNum 50
  OUTDIR/float32/model.tiny.float32.bin  the same weights in float32 (own directory:
                                         petrel-convert wants one model*.bin per dir),
                                         with copies of the vocabulary and shortlist
  OUTDIR/sentences.en.txt                300 English gettext messages, one per line
  OUTDIR/standin.json                    what was made (vocab size, alphas, sizes)
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import sentencepiece as spm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))

import make_marian_native_fixtures as fixtures  # noqa: E402
import marian_native  # noqa: E402
from marian_native_reference import MarianNativeModel  # noqa: E402

VOCAB_PIECES = 32000
N_SENTENCES = 300
MAX_PIECES = 100          # source pieces (without EOS) per bench sentence, below this
ALPHA_SENTENCES = 40      # sentences the PyTorch reference runs to observe activations
SHORTLIST_FIRST, SHORTLIST_BEST = 50, 50

OPTIONS = dict(fixtures.BASE_OPTIONS, **{
    "dim-emb": 256,
    "enc-depth": 6,
    "dec-depth": 2,
    "transformer-heads": 8,
    "transformer-dim-ffn": 1536,
    "transformer-decoder-dim-ffn": 1536,
    "transformer-decoder-autoreg": "rnn",
    "dec-cell": "ssru",
})


def train_vocab(lines, path, pieces):
    """Unigram model as Mozilla's (</s>=0, <unk>=1, no <s>/<pad>); num_threads 1 and
    no sampling/shuffling make it deterministic. Returns the piece count reached:
    SentencePiece refuses a size the text cannot fill, so step down until it trains."""
    while True:
        with tempfile.TemporaryDirectory() as tmp:
            prefix = os.path.join(tmp, "vocab")
            try:
                spm.SentencePieceTrainer.train(
                    sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=pieces,
                    model_type="unigram", eos_id=fixtures.EOS, unk_id=fixtures.UNK, bos_id=-1,
                    pad_id=-1, num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
                    minloglevel=2)
            except RuntimeError as error:
                # "Vocabulary size is too high ... Please set it to a value <= N."
                text = str(error)
                marker = "value <= "
                if marker not in text:
                    raise
                limit = int(text.split(marker)[1].split(".")[0])
                print(f"  {pieces} pieces not reachable on this text; largest is {limit}", file=sys.stderr)
                pieces = limit
                continue
            shutil.copyfile(prefix + ".model", path)
            return pieces


def make_shortlist(seed, vocab_size):
    """lists[s]: SHORTLIST_BEST distinct target ids >= SHORTLIST_FIRST per source id,
    drawn Zipf-like (spm unigram ids are roughly in frequency order, and a real lexical
    shortlist favours frequent targets), with the source id itself among them when it
    is eligible (shared vocabularies copy names and numbers)."""
    rng = np.random.RandomState(seed)
    candidates = np.arange(SHORTLIST_FIRST, vocab_size)
    weights = 1.0 / (candidates - SHORTLIST_FIRST + 10.0)
    weights /= weights.sum()
    lists = []
    for s in range(vocab_size):
        picked = set(rng.choice(candidates, SHORTLIST_BEST, replace=False, p=weights).tolist())
        if s >= SHORTLIST_FIRST and s not in picked:
            picked.pop()
            picked.add(s)
        lists.append(sorted(picked))
    return lists


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outdir")
    args = parser.parse_args()
    out = args.outdir
    f32_dir = os.path.join(out, "float32")
    os.makedirs(f32_dir, exist_ok=True)

    english, german = fixtures.catalog_text()
    lines = sorted({line.strip() for text in english + german for line in text.split("\n") if line.strip()})
    vocab_path = os.path.join(out, "vocab.tiny.spm")
    print(f"training the vocabulary on {len(lines)} lines", file=sys.stderr)
    pieces = train_vocab(lines, vocab_path, VOCAB_PIECES)
    processor = spm.SentencePieceProcessor(model_file=vocab_path)
    assert processor.piece_to_id("</s>") == fixtures.EOS and processor.piece_to_id("<unk>") == fixtures.UNK
    vocab_size = processor.get_piece_size()

    # the fixtures' selection (one sentence per line for bergamot's splitter), shorter
    sentences = [s for s in fixtures.pick_sentences(english, processor)
                 if len(processor.encode(s)) < MAX_PIECES][:N_SENTENCES]
    assert len(sentences) == N_SENTENCES
    with open(os.path.join(out, "sentences.en.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(sentences) + "\n")

    options = dict(OPTIONS, **{"dim-vocabs": [vocab_size, vocab_size]})
    weights = fixtures.make_weights(options, 4000, vocab_size)

    f32_path = os.path.join(f32_dir, "model.tiny.float32.bin")
    seen = marian_native.write_model_bin(f32_path, weights, options)

    # alphas as marian's pipeline makes them: observe each GEMM's input over a run
    print(f"observing activations on {ALPHA_SENTENCES} sentences", file=sys.stderr)
    model = MarianNativeModel(seen, options)
    model.gemm_maxabs = {}
    for s in sentences[:ALPHA_SENTENCES]:
        model.greedy(processor.encode(s), fixtures.EOS, fixtures.UNK, fixtures.MAX_LENGTH_FACTOR)
    alphas = fixtures.alphas_from(model.gemm_maxabs)

    int8_path = os.path.join(out, "model.tiny.intgemm.alphas.bin")
    marian_native.write_model_bin(int8_path, weights, options, intgemm8=True, alphas=alphas)

    lex_path = os.path.join(out, "lex.50.50.tiny.s2t.bin")
    marian_native.write_binary_shortlist(lex_path, SHORTLIST_FIRST, SHORTLIST_BEST,
                                         make_shortlist(5000, vocab_size))
    for path in (vocab_path, lex_path):
        shutil.copyfile(path, os.path.join(f32_dir, os.path.basename(path)))

    files = [int8_path, vocab_path, lex_path, f32_path]
    summary = {"vocab_pieces": pieces, "vocab_pieces_asked": VOCAB_PIECES, "sentences": len(sentences),
               "mean_source_pieces": float(np.mean([len(processor.encode(s)) for s in sentences])),
               "options": options, "alphas": alphas,
               "bytes": {os.path.relpath(p, out): os.path.getsize(p) for p in files}}
    with open(os.path.join(out, "standin.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    print(json.dumps({k: summary[k] for k in ("vocab_pieces", "sentences", "mean_source_pieces", "bytes")},
                     indent=1))


if __name__ == "__main__":
    main()
