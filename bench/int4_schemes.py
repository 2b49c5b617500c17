#!/usr/bin/env python3
"""How much each 4-bit weight layout loses, measured before choosing one (issue #17).

    /usr/bin/python3 bench/int4_schemes.py tools/en-de-model/model.safetensors

For every weight matrix of a MarianMT checkpoint (and a random Gaussian matrix shaped like
Transformer-base's FFN, as the bench model's weights are), quantizes each row symmetrically
to 4 bits (q in [-7, 7]) under several scale layouts and prints the signal-to-noise ratio
(dB, over all matrices of a kind) and the bits stored per weight (k = 512):

  row          one f32 scale per row (what int8 does; no blocks)
  b32/f32      32-column blocks, an f32 scale each (max|block| / 7)
  b32/f16      32-column blocks, an f16 scale each (ggml's Q4_0 layout, but symmetric)
  b64/f16      64-column blocks, an f16 scale each
  row+b32/u8   an f32 scale per row times a u8 scale per 32-column block (1..255; the
               block's max / 7 rounded to the row's grid, the better of floor and ceil)
  +search      the same, the block scale searched: floor and ceil of 0.70, 0.72 .. 1.00
               times max / 7, the smallest squared error wins (what petrel-convert does)

Needs numpy and torch (Debian's python3-numpy, python3-torch) for marian_reference's reader.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "reference"))


def quantize(w, scale):
    """w / scale rounded half to even into [-7, 7], times scale; scale broadcasts over w."""
    safe = np.where(scale > 0, scale, 1.0)
    q = np.clip(np.rint(w / safe), -7, 7)
    return np.where(scale > 0, q * scale, 0.0)


def blocks(w, size):
    rows, cols = w.shape
    padded = np.zeros((rows, -(-cols // size) * size), dtype=np.float64)
    padded[:, :cols] = w
    return padded.reshape(rows, -1, size)


def scheme_row(w):
    s = np.abs(w).max(axis=1, keepdims=True) / 7
    return quantize(w, s)


def scheme_block(w, size, scale_type):
    b = blocks(w, size)
    s = (np.abs(b).max(axis=2, keepdims=True) / 7).astype(scale_type).astype(np.float64)
    return quantize(b, s).reshape(w.shape[0], -1)[:, :w.shape[1]]


def scheme_row_block_u8(w, size=32, factors=(1.0,)):
    b = blocks(w, size)
    row_max = np.abs(w).max(axis=1)
    row_scale = (row_max / (7 * 255))[:, None, None]            # block scale = row_scale x u8
    ideal = np.abs(b).max(axis=2, keepdims=True) / 7 / np.where(row_scale > 0, row_scale, 1)
    best, best_err = None, None
    for u in [r(ideal * f) for f in factors for r in (np.floor, np.ceil)]:
        u = np.clip(u, 1, 255)
        d = quantize(b, u * row_scale)
        err = ((d - b) ** 2).sum(axis=2, keepdims=True)
        if best is None:
            best, best_err = d, err
        else:
            take = err < best_err
            best = np.where(take, d, best)
            best_err = np.where(take, err, best_err)
    return best.reshape(w.shape[0], -1)[:, :w.shape[1]]


SCHEMES = [
    ("row", scheme_row, 4 + 32 / 512),
    ("b32/f32", lambda w: scheme_block(w, 32, np.float32), 4 + 32 / 32),
    ("b32/f16", lambda w: scheme_block(w, 32, np.float16), 4 + 16 / 32),
    ("b64/f16", lambda w: scheme_block(w, 64, np.float16), 4 + 16 / 64),
    ("row+b32/u8", scheme_row_block_u8, 4 + 8 / 32 + 32 / 512),
    ("+search", lambda w: scheme_row_block_u8(w, factors=[0.70 + 0.02 * i for i in range(16)]), 4 + 8 / 32 + 32 / 512),
]


def snr_db(pairs):
    signal = sum(float((w ** 2).sum()) for w, _ in pairs)
    noise = sum(float(((w - d) ** 2).sum()) for w, d in pairs)
    return 10 * np.log10(signal / noise)


def main():
    groups = {}
    if len(sys.argv) > 1:
        import marian_reference as ref
        for name, t in ref.read_safetensors(sys.argv[1]).items():
            if t.dim() != 2 or "positions" in name:
                continue
            kind = "embedding/output table" if "shared" in name or "embed_tokens" in name or "lm_head" in name \
                else "linear layers"
            groups.setdefault(kind, []).append(t.double().numpy())
    rng = np.random.default_rng(0)
    groups["random normal 2048x512 (bench)"] = [rng.normal(0, 512 ** -0.5, (2048, 512))]
    print(f"{'matrices':34} " + " ".join(f"{n:>11}" for n, _, _ in SCHEMES))
    print(f"{'bits per weight (k = 512)':34} " + " ".join(f"{b:>11.3f}" for _, _, b in SCHEMES))
    for kind, mats in groups.items():
        cells = [snr_db([(w, f(w)) for w in mats]) for _, f, _ in SCHEMES]
        print(f"{kind + ' (' + str(len(mats)) + ')':34} " + " ".join(f"{c:>8.2f} dB" for c in cells))


if __name__ == "__main__":
    main()
