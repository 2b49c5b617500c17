#!/usr/bin/env python3
"""Golden test of M2M100's (and NLLB's) sinusoidal position table.

    /usr/bin/python3 tools/reference/check_m2m100_positions.py      (exit 0 and "ok", or an assertion)

1. marian_reference.m2m100_position_table (what the oracle runs) equals, bit for bit, a
   line-by-line transcription of transformers' M2M100SinusoidalPositionalEmbedding
   .get_embedding (modeling_m2m_100.py; the same at huggingface/transformers 001400f5 and in
   the 4.57-era copy feisenyu/transformers_4573 9c66b221), for even and odd widths.
2. The recipe FAMILIES.md gives the C++ side (frequencies exp(x) of the float32 argument
   x = float32(i) * float32(-log(10000)/(d/2-1)) computed in double and rounded to float32;
   the angle a float32 product; sin/cos in double, rounded) agrees with torch's table
   within what one ulp of a frequency can move an angle: torch's float32 exp is not always
   correctly rounded (1 frequency in 8 to 10 differs by an ulp here), and row r multiplies
   that ulp by r. Measured with Debian's torch 1.13 on x86-64: over the first 66 rows
   6e-8 (d=16) to 7.6e-6 (d=512); over 1026 rows 4.8e-7 (d=16) to 6.1e-5 (d=512, 1024).
   No implementation outside torch can do better than this bound, as torch's own
   float32 exp is what sets the last bit.
3. Doing the arithmetic in float64 instead (the textbook formula) is off by 1.5e-5 to
   7e-5 by row 1000 at every width, d=16 included: the float32 rounding of r * f_i is
   part of the table, so an implementation must multiply in float32.
4. The table's layout: row padding_idx (1) is zero; row 0 is sin 0 = 0 | cos 0 = 1; an odd
   width has a zero last column; a token at position p (from 0) reads row p + 2.
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_reference as ref  # noqa: E402


def transformers_get_embedding(num_embeddings, embedding_dim, padding_idx=None):
    """transformers' get_embedding, transcribed statement by statement."""
    half_dim = embedding_dim // 2
    emb = math.log(10000) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=torch.int64).float() * -emb)
    emb = torch.arange(num_embeddings, dtype=torch.int64).float().unsqueeze(1) * emb.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)
    if embedding_dim % 2 == 1:
        emb = torch.cat([emb, torch.zeros(num_embeddings, 1)], dim=1)
    if padding_idx is not None:
        emb[padding_idx, :] = 0
    return emb.to(torch.get_default_dtype())


def recipe_frequencies(dim):
    half = dim // 2
    x = np.arange(half, dtype=np.float32) * np.float32(-math.log(10000) / (half - 1))
    return np.exp(x.astype(np.float64)).astype(np.float32)


def recipe_table(rows, dim, padding_idx=1):
    """FAMILIES.md's recipe, as a C++ implementation would compute it."""
    freq = recipe_frequencies(dim)
    angles = np.arange(rows, dtype=np.float32)[:, None] * freq[None, :]  # float32 products
    table = np.concatenate([np.sin(angles.astype(np.float64)), np.cos(angles.astype(np.float64))], axis=1)
    if dim % 2:
        table = np.concatenate([table, np.zeros((rows, 1))], axis=1)
    table = table.astype(np.float32)
    table[padding_idx] = 0.0
    return table


def main():
    torch.set_num_threads(1)
    rows = 1024 + 2  # NLLB's max_position_embeddings + the offset
    for dim in (15, 16, 32, 512, 1024):
        torch_table = transformers_get_embedding(rows, dim, padding_idx=1)
        ours = ref.m2m100_position_table(rows, dim, padding_idx=1)
        assert torch.equal(ours, torch_table), f"d={dim}: the oracle's table is not transformers'"

        # 2. The recipe, within one frequency ulp times the row (plus the rounding of the angle
        # and of sin/cos).
        half = dim // 2
        freq = recipe_frequencies(dim)
        torch_freq = torch.exp(torch.arange(half, dtype=torch.float32) *
                               -(math.log(10000) / (half - 1))).numpy()
        freq_ulps = np.abs(freq.view(np.int32).astype(np.int64) - torch_freq.view(np.int32).astype(np.int64))
        assert freq_ulps.max() <= 1, f"d={dim}: a frequency differs from torch's by {freq_ulps.max()} ulp"
        table = recipe_table(rows, dim)
        r = np.arange(rows, dtype=np.float64)[:, None]
        angle_bound = r * np.spacing(freq.astype(np.float32))[None, :] * freq_ulps[None, :] \
            + np.spacing((r * freq[None, :]).astype(np.float32))
        bound = np.concatenate([angle_bound, angle_bound] + ([np.zeros((rows, 1))] if dim % 2 else []), axis=1)
        error = np.abs(table.astype(np.float64) - torch_table.numpy())
        assert (error <= bound + 2.4e-7).all(), f"d={dim}: the recipe is off by {error.max()}"
        worst_early = error[:66].max()

        # 3. The float64 textbook formula is not the table.
        naive = np.arange(rows)[:, None] * np.exp(np.arange(half) * -(math.log(10000) / (half - 1)))[None, :]
        naive_error = np.abs(np.sin(naive) - torch_table.numpy()[:, :half])
        naive_error[1] = 0.0  # the padding row
        assert naive_error[1000:].max() > 1e-5, f"d={dim}: float64 arithmetic unexpectedly matches"

        # 4. Layout.
        assert not torch_table[1].any()
        assert torch.equal(torch_table[0, :half], torch.zeros(half))
        assert torch.equal(torch_table[0, half:2 * half], torch.ones(half))
        if dim % 2:
            assert not torch_table[:, -1].any()
        print(f"d={dim}: oracle == transformers; recipe within {error.max():.2e} over {rows} rows "
              f"({worst_early:.2e} over the first 66), {int((freq_ulps > 0).sum())}/{half} frequencies 1 ulp "
              f"from torch's; float64 arithmetic off by {naive_error.max():.2e}")

    # A token at position p reads row p + 2: the reference's encoder on right-padded input.
    cfg = ref.Config(family="m2m100", d_model=16, heads=2, ffn=16, vocab=12, encoder_layers=0, decoder_layers=0,
                     max_positions=8)
    model = ref.Model(cfg).eval()
    with torch.no_grad():
        model.model.shared.weight.zero_()
        ids = torch.tensor([[5, 6, 7, 2], [8, 2, 1, 1]])
        x = model.embed(model.model.encoder, ids)
        table = ref.m2m100_position_table(10, 16)
        assert torch.equal(x[0], table[2:6]) and torch.equal(x[1, :2], table[2:4]) and not x[1, 2:].any()
        y = model.embed(model.model.decoder, torch.tensor([[9]]), start=3)
        assert torch.equal(y[0, 0], table[5])
    print("ok")


if __name__ == "__main__":
    main()
