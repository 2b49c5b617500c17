#!/usr/bin/env python3
"""Makes tests/fixtures/marian-native/: two small Marian-native models (briefly
trained from seeded random weights) in the files Mozilla ships, with the translations of two oracles that
share no code: marian_native_reference.py (PyTorch, written here from marian-dev's
source) and bergamot-translator 0.4.9 (Firefox's engine, WASM, via
tools/reference/bergamot/translate.mjs).

    /usr/bin/python3 tools/reference/make_marian_native_fixtures.py [--skip-bergamot]

Writes OUT=tests/fixtures/marian-native/:
  vocab.spm                         one SentencePiece unigram model (VOCAB_PIECES pieces,
                                    </s> 0, <unk> 1, no <s>/<pad>, as Mozilla's), trained
                                    on the German catalogs' English msgids and German msgstrs
  <model>/model.bin                 float32 weights, marian::io::binary (marian_native.py)
  ssru/model.npz                    the same weights as a Marian .npz
  <model>/model.intgemm.alphas.bin  intgemm8 weights + <W>_QuantMultA activation multipliers
  <model>/lex.bin                   binary lexical shortlist (firstNum 10, bestNum 20)
  <model>/expected.json             the sentences and both oracles' outputs
for <model> in `transformer` (self-attention decoder) and `ssru` (SSRU decoder, as
Mozilla's tiny models). Bergamot runs only when tools/reference/bergamot/node_modules
exists (`npm install` there; this script never installs anything).

Weights start random, scaled as a trained model's roughly are, then get TRAIN_STEPS of
English->German training on the catalogs (train(): random weights alone repeat one piece
to the length limit); the result translates badly but varies with the source and ends
with EOS. Deterministic on one machine (seeds, fixed order); torch's CPU kernels may
round differently elsewhere, so rerunning can change the committed weights slightly.
Alphas are what marian's pipeline computes (marian-dev scripts/alphas/extract_stats.py):
127 / (mean + 1.1 * stddev) of each GEMM input's max|x| over all calls, observed here by
running the PyTorch reference on the fixture sentences.
"""
import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile

import numpy as np
import sentencepiece as spm
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "fixtures", "marian-native")
BERGAMOT = os.path.join(HERE, "bergamot")
sys.path.insert(0, HERE)

import gettext_catalogs  # noqa: E402
from marian_native_reference import MarianNativeModel, read_binary_shortlist  # noqa: E402

# Fewer pieces than Mozilla's 32k (and than the ~2000 first planned) to keep the two
# float32 models and their int8 copies near 3 MB: the embedding table is most of a model.
VOCAB_PIECES = 1000
EOS, UNK = 0, 1
N_SENTENCES = 320
MAX_LENGTH_FACTOR = 2.0
SHORTLIST_FIRST, SHORTLIST_BEST = 10, 20
TRAIN_STEPS = 400

BASE_OPTIONS = {
    "type": "transformer",
    "dim-emb": 64,
    "enc-depth": 2,
    "dec-depth": 2,
    "transformer-heads": 4,
    "transformer-dim-ffn": 256,
    "transformer-decoder-dim-ffn": 256,
    "transformer-ffn-depth": 2,
    "transformer-decoder-ffn-depth": 2,
    "transformer-ffn-activation": "relu",
    "transformer-postprocess": "dan",
    "transformer-preprocess": "",
    "transformer-postprocess-emb": "d",
    "transformer-decoder-autoreg": "self-attention",
    "transformer-no-projection": False,
    "transformer-tied-layers": [],
    "dec-cell": "gru",
    "dec-cell-base-depth": 2,
    "dec-cell-high-depth": 1,
    "tied-embeddings": False,
    "tied-embeddings-all": True,
    "tied-embeddings-src": False,
    "layer-normalization": False,
    "right-left": False,
    "output-omit-bias": False,
}
MODELS = {
    "transformer": {},
    "ssru": {"transformer-decoder-autoreg": "rnn", "dec-cell": "ssru"},
}


# ---- text ------------------------------------------------------------------------------
def catalog_text():
    """(English msgids, German msgstrs) of the German catalogs, in catalog order."""
    english, german = [], []
    for _, entry in gettext_catalogs.messages(gettext_catalogs.catalogs("de")):
        english.append(entry.msgid)
        german.extend(s for s in entry.msgstrs if s)
    return english, german


def train_vocab(english, german, path):
    lines = sorted({line.strip() for text in english + german for line in text.split("\n") if line.strip()})
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "vocab")
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=VOCAB_PIECES,
            model_type="unigram", eos_id=EOS, unk_id=UNK, bos_id=-1, pad_id=-1,
            num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
            minloglevel=2)
        with open(prefix + ".model", "rb") as f:
            data = f.read()
    with open(path, "wb") as f:
        f.write(data)


def pick_sentences(english, processor):
    """Unique one-line msgids of 1..40 words that bergamot translates as ONE sentence:
    no sentence-final punctuation followed by a space inside (its sentence splitter would
    cut there), no leading/trailing whitespace (bergamot copies it around the
    translation), fewer than 127 pieces (max-length-break would wrap)."""
    candidates = []
    for m in sorted(set(english)):
        if "\n" in m or "\t" in m or m != m.strip() or "  " in m:
            continue
        if not 1 <= len(m.split()) <= 40 or re.search(r"[.!?:;…]\W*\s", m):
            continue
        if any(ord(c) < 32 for c in m) or len(processor.encode(m)) + 1 > 127:
            continue
        candidates.append(m)
    return random.Random(25).sample(candidates, N_SENTENCES)


# ---- weights ---------------------------------------------------------------------------
def make_weights(options, seed, vocab_size):
    rng = np.random.RandomState(seed)
    d, ffn = options["dim-emb"], options["transformer-dim-ffn"]
    w = {}

    def matrix(name, n_in, n_out):
        w[name] = (rng.randn(n_in, n_out) / math.sqrt(n_in)).astype(np.float32)

    def vector(name, n, scale=0.05, center=0.0):
        w[name] = (center + scale * rng.randn(1, n)).astype(np.float32)

    def attention(prefix):
        for m in ("q", "k", "v", "o"):
            matrix(f"{prefix}_W{m}", d, d)
            vector(f"{prefix}_b{m}", d)
        vector(f"{prefix}_Wo_ln_scale", d, 0.1, 1.0)
        vector(f"{prefix}_Wo_ln_bias", d)

    def ffn_block(prefix):
        matrix(f"{prefix}_W1", d, ffn)
        vector(f"{prefix}_b1", ffn)
        matrix(f"{prefix}_W2", ffn, d)
        vector(f"{prefix}_b2", d)
        vector(f"{prefix}_ffn_ln_scale", d, 0.1, 1.0)
        vector(f"{prefix}_ffn_ln_bias", d)

    # rows of about unit length, as Marian's glorot-initialised embeddings
    w["Wemb"] = (rng.randn(vocab_size, d) / math.sqrt(d)).astype(np.float32)
    for i in range(1, options["enc-depth"] + 1):
        attention(f"encoder_l{i}_self")
        ffn_block(f"encoder_l{i}_ffn")
    for i in range(1, options["dec-depth"] + 1):
        if options["transformer-decoder-autoreg"] == "rnn":
            matrix(f"decoder_l{i}_rnn_W", d, d)
            matrix(f"decoder_l{i}_rnn_Wf", d, d)
            vector(f"decoder_l{i}_rnn_bf", d)
            vector(f"decoder_l{i}_rnn_ffn_ln_scale", d, 0.1, 1.0)
            vector(f"decoder_l{i}_rnn_ffn_ln_bias", d)
        else:
            attention(f"decoder_l{i}_self")
        attention(f"decoder_l{i}_context")
        ffn_block(f"decoder_l{i}_ffn")
    vector("decoder_ff_logit_out_b", vocab_size, 0.5)
    return w


def make_shortlist(seed, vocab_size):
    """lists[s]: 0..SHORTLIST_BEST distinct ids >= SHORTLIST_FIRST, sorted as Marian's
    import writes them; some source ids (never the last) get none."""
    rng = np.random.RandomState(seed)
    lists = []
    for s in range(vocab_size):
        # Marian's check refuses trailing empty lists: the last source id gets one
        n = int(rng.randint(0 if s < vocab_size - 1 else 1, SHORTLIST_BEST + 1))
        lists.append(sorted(rng.choice(np.arange(SHORTLIST_FIRST, vocab_size), n, replace=False).tolist()))
    return lists


def alphas_from(gemm_maxabs):
    """extract_stats.py: 127 / (mean + 1.1 * std) of the per-call max|x| of each GEMM."""
    out = {}
    for name, values in gemm_maxabs.items():
        v = np.asarray(values, dtype=np.float64)
        out[name] = float(np.float32(127.0 / (v.mean() + 1.1 * v.std())))
    return out


# ---- a short training run --------------------------------------------------------------
# Random weights alone make a degenerate translator (with tied embeddings the residual
# stream carries the previous token, so it repeats one piece until the length limit).
# A few minutes of English->German training on the catalogs gives outputs that vary,
# follow the source and end with EOS, and activations like a real model's for the alphas.
class Trainable(torch.nn.Module):
    """Batched, differentiable twin of the reference's forward pass (teacher forcing),
    parameters kept under Marian's names and layout."""

    def __init__(self, weights, options):
        super().__init__()
        self.names = sorted(weights)
        self.params = torch.nn.ParameterList([torch.nn.Parameter(torch.from_numpy(weights[n].copy()))
                                              for n in self.names])
        self.index = {n: i for i, n in enumerate(self.names)}
        self.o = options
        self.d, self.heads = options["dim-emb"], options["transformer-heads"]

    def w(self, name):
        return self.params[self.index[name]]

    def dense(self, x, name, bias=None):
        y = x @ self.w(name)
        return y if bias is None else y + self.w(bias).reshape(-1)

    def ln(self, x, prefix):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return self.w(prefix + "_ln_scale").reshape(-1) * (x - mean) / torch.sqrt(var + 1e-6) \
            + self.w(prefix + "_ln_bias").reshape(-1)

    def attention(self, prefix, x, kv, mask):
        B, T, d = x.shape
        hd = d // self.heads
        q = self.dense(x, prefix + "_Wq", prefix + "_bq").reshape(B, T, self.heads, hd).transpose(1, 2)
        k = self.dense(kv, prefix + "_Wk", prefix + "_bk").reshape(B, -1, self.heads, hd).transpose(1, 2)
        v = self.dense(kv, prefix + "_Wv", prefix + "_bv").reshape(B, -1, self.heads, hd).transpose(1, 2)
        z = q @ k.transpose(-1, -2) / math.sqrt(hd) + mask
        y = (torch.softmax(z, -1) @ v).transpose(1, 2).reshape(B, T, d)
        return self.ln(self.dense(y, prefix + "_Wo", prefix + "_bo") + x, prefix + "_Wo")

    def ffn(self, prefix, x):
        y = torch.relu(self.dense(x, prefix + "_W1", prefix + "_b1"))
        return self.ln(self.dense(y, prefix + "_W2", prefix + "_b2") + x, prefix + "_ffn")

    def forward(self, src, src_mask, tgt_in):
        """src [B,S] ids, src_mask [B,S] 1/0, tgt_in [B,T] ids with -1 for the zero start."""
        from marian_native_reference import sinusoids
        d = self.d
        E = self.w("Wemb")
        x = math.sqrt(d) * E[src] + sinusoids(0, src.shape[1], d)
        enc_mask = ((1 - src_mask) * -1e9)[:, None, None, :]
        for i in range(1, self.o["enc-depth"] + 1):
            x = self.attention(f"encoder_l{i}_self", x, x, enc_mask)
            x = self.ffn(f"encoder_l{i}_ffn", x)
        T = tgt_in.shape[1]
        y = math.sqrt(d) * E[tgt_in.clamp(min=0)] * (tgt_in >= 0)[..., None] + sinusoids(0, T, d)
        causal = torch.triu(torch.full((T, T), -1e9), 1)[None, None]
        for i in range(1, self.o["dec-depth"] + 1):
            if self.o["transformer-decoder-autoreg"] == "rnn":
                p = f"decoder_l{i}_rnn"
                cand = self.dense(y, p + "_W")
                gate = torch.sigmoid(self.dense(y, p + "_Wf", p + "_bf"))
                c = torch.zeros_like(y[:, 0])
                outs = []
                for t in range(T):
                    c = gate[:, t] * c + (1 - gate[:, t]) * cand[:, t]
                    outs.append(torch.relu(c))
                y = self.ln(torch.stack(outs, 1) + y, p + "_ffn")
            else:
                y = self.attention(f"decoder_l{i}_self", y, y, causal)
            y = self.attention(f"decoder_l{i}_context", y, x, enc_mask)
            y = self.ffn(f"decoder_l{i}_ffn", y)
        return y @ E.t() + self.w("decoder_ff_logit_out_b").reshape(-1)

    def export(self):
        return {n: p.detach().numpy().astype(np.float32).copy() for n, p in zip(self.names, self.params)}


def training_pairs(processor, max_pieces=24):
    pairs, seen = [], set()
    for _, entry in gettext_catalogs.messages(gettext_catalogs.catalogs("de")):
        source, target = entry.msgid, entry.msgstrs[0] if entry.msgstrs else ""
        if not target or "\n" in source + target or (source, target) in seen:
            continue
        seen.add((source, target))
        s, t = processor.encode(source), processor.encode(target)
        if 0 < len(s) <= max_pieces and 0 < len(t) <= max_pieces:
            pairs.append((s, t))
    return pairs


def train(weights, options, pairs, seed, steps=TRAIN_STEPS, batch=32):
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = Trainable(weights, options)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50) * (1 - s / (steps + 1)))
    for step in range(steps):
        chunk = rng.sample(pairs, batch)
        S = max(len(s) for s, _ in chunk) + 1
        T = max(len(t) for _, t in chunk) + 1
        src = torch.full((batch, S), EOS, dtype=torch.long)
        src_mask = torch.zeros(batch, S)
        tgt_in = torch.full((batch, T), EOS, dtype=torch.long)
        tgt_out = torch.full((batch, T), -100, dtype=torch.long)
        for b, (s, t) in enumerate(chunk):
            src[b, :len(s) + 1] = torch.tensor(s + [EOS])
            src_mask[b, :len(s) + 1] = 1
            tgt_in[b, :len(t) + 1] = torch.tensor([-1] + t)
            tgt_out[b, :len(t) + 1] = torch.tensor(t + [EOS])
        logits = model(src, src_mask, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                                                 ignore_index=-100, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 100 == 0 or step == steps - 1:
            print(f"  step {step} loss {loss.item():.3f}", file=sys.stderr)
    return model.export()


# ---- oracles ---------------------------------------------------------------------------
def run_reference(model, src, shortlist=None):
    return [model.greedy(ids, EOS, UNK, MAX_LENGTH_FACTOR, shortlist=shortlist) for ids in src]


def run_bergamot(model_path, vocab_path, sentences, precision, shortlist_path=None):
    cmd = ["node", os.path.join(BERGAMOT, "translate.mjs"), "--model", model_path, "--vocab", vocab_path,
           "--precision", precision, "--max-length-factor", str(MAX_LENGTH_FACTOR),
           "--batch", "1"]  # each sentence its own batch: see greedy(batch_width=...)
    if shortlist_path:
        cmd += ["--shortlist", shortlist_path]
    result = subprocess.run(cmd, input="\n".join(sentences) + "\n", capture_output=True, text=True, check=True)
    translations = json.loads(result.stdout)["translations"]
    if len(translations) != len(sentences):
        raise RuntimeError(f"bergamot returned {len(translations)} translations for {len(sentences)} sentences")
    return translations


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-bergamot", action="store_true")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    import marian_native  # the writer, imported late so --help works without it

    os.makedirs(args.out, exist_ok=True)
    english, german = catalog_text()
    vocab_path = os.path.join(args.out, "vocab.spm")
    train_vocab(english, german, vocab_path)
    processor = spm.SentencePieceProcessor(model_file=vocab_path)
    assert processor.piece_to_id("</s>") == EOS and processor.piece_to_id("<unk>") == UNK
    vocab_size = processor.get_piece_size()
    sentences = pick_sentences(english, processor)
    src = [processor.encode(s) for s in sentences]
    pairs = training_pairs(processor)
    have_bergamot = (not args.skip_bergamot and os.path.isdir(os.path.join(BERGAMOT, "node_modules"))
                     and os.path.exists(os.path.join(BERGAMOT, "translate.mjs")))
    summary = {}

    for index, (name, overrides) in enumerate(MODELS.items()):
        options = dict(BASE_OPTIONS, **overrides)
        options["dim-vocabs"] = [vocab_size, vocab_size]
        print(f"training {name}", file=sys.stderr)
        weights = train(make_weights(options, 1000 + index, vocab_size), options, pairs, 3000 + index)
        model_dir = os.path.join(args.out, name)
        os.makedirs(model_dir, exist_ok=True)

        f32_path = os.path.join(model_dir, "model.bin")
        seen = marian_native.write_model_bin(f32_path, weights, options)
        if name == "ssru":  # the same weights as .npz: the converter must read both alike
            marian_native.write_model_npz(os.path.join(model_dir, "model.npz"), weights, options)
        model = MarianNativeModel(seen, options)
        model.gemm_maxabs = {}
        ids = run_reference(model, src)
        alphas = alphas_from(model.gemm_maxabs)
        model.gemm_maxabs = None

        int8_path = os.path.join(model_dir, "model.intgemm.alphas.bin")
        marian_native.write_model_bin(int8_path, weights, options, intgemm8=True, alphas=alphas)

        lex_path = os.path.join(model_dir, "lex.bin")
        lists = make_shortlist(2000 + index, vocab_size)
        marian_native.write_binary_shortlist(lex_path, SHORTLIST_FIRST, SHORTLIST_BEST, lists)
        first, _, read_lists = read_binary_shortlist(lex_path)  # also checks A's writer
        assert first == SHORTLIST_FIRST and read_lists == lists
        ids_sl = run_reference(model, src, shortlist=(first, read_lists, True))

        expected = {
            "sentences": sentences,
            "source_ids": src,
            "max_length_factor": MAX_LENGTH_FACTOR,
            "options": options,
            "reference": {"ids": ids, "text": [processor.decode(i) for i in ids]},
            "reference_shortlist": {"ids": ids_sl, "text": [processor.decode(i) for i in ids_sl]},
        }
        lengths = [len(i) for i in ids]
        limits = [math.ceil(MAX_LENGTH_FACTOR * (len(s) + 1)) for s in src]
        stats = {"distinct_outputs": len(set(map(tuple, ids))),
                 "mean_length": float(np.mean(lengths)), "max_length": max(lengths),
                 "hit_length_limit": sum(n >= m for n, m in zip(lengths, limits)),
                 "empty": sum(n == 0 for n in lengths),
                 "length_histogram": np.bincount(lengths).tolist()}
        if have_bergamot:
            runs = {"float32": (f32_path, "float32", None),
                    "float32_shortlist": (f32_path, "float32", lex_path),
                    "int8shiftAlphaAll": (int8_path, "int8shiftAlphaAll", None),
                    "int8shiftAll": (int8_path, "int8shiftAll", None),
                    "int8shiftAlphaAll_shortlist": (int8_path, "int8shiftAlphaAll", lex_path)}
            expected["bergamot"] = {key: run_bergamot(path, vocab_path, sentences, prec, sl)
                                    for key, (path, prec, sl) in runs.items()}
            b = expected["bergamot"]
            expected["agreement"] = {
                "sentences": len(sentences),
                "reference_vs_bergamot_float32": sum(
                    x == y for x, y in zip(expected["reference"]["text"], b["float32"])),
                "reference_shortlist_vs_bergamot_float32_shortlist": sum(
                    x == y for x, y in zip(expected["reference_shortlist"]["text"], b["float32_shortlist"])),
                "bergamot_float32_vs_int8shiftAlphaAll": sum(
                    x == y for x, y in zip(b["float32"], b["int8shiftAlphaAll"])),
                "bergamot_float32_vs_int8shiftAll": sum(
                    x == y for x, y in zip(b["float32"], b["int8shiftAll"])),
            }
            stats["agreement"] = expected["agreement"]
        with open(os.path.join(model_dir, "expected.json"), "w", encoding="utf-8") as f:
            json.dump(expected, f, ensure_ascii=False, indent=1)
            f.write("\n")
        summary[name] = stats
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
