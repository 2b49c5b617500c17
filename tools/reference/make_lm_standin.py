#!/usr/bin/env python3
"""Writes a random-weight stand-in for a small Gemma 3 text checkpoint in Hugging Face's
layout (config.json, generation_config.json, model.safetensors in bf16), for the
decoder-only benchmarks of issue #28 (Petrel against llama.cpp).

    /usr/bin/python3 tools/reference/make_lm_standin.py gemma-3-270m /work/lm-standins/gemma-3-270m
    /usr/bin/python3 tools/reference/make_lm_standin.py gemma-3-1b   /work/lm-standins/gemma-3-1b

Shapes and config values: tools/reference/decoder_only_semantics.md §8 (270M: the
unsloth copy in jina-ai/mlx-retrieval gemma-3-270m-mlx/config.json @ 3e1919ac, whose
keys and order this file reproduces; 1B: hub copies quoted there). No official google
file was available, and no trained weights: the weight scales below are a choice, not a
measurement.

Weights (all drawn from N(0, std^2), then rounded to bf16 round-to-nearest-even):
  * model.embed_tokens.weight  std 0.03. The model multiplies it by sqrt(hidden)
    (25.3 / 33.9), so the first residual stream has RMS ~0.8-1.0.
  * q/k/v/gate/up_proj         std 1/sqrt(hidden)       (fan-in scaling, keeps RMS ~1)
  * o_proj                     std 1/sqrt(heads*head_dim)
  * down_proj                  std 1/sqrt(intermediate)
  * every RMSNorm weight w     N(0, 0.05^2); Gemma 3 applies (1 + w), so gains are
                               1 +- 0.05. q_norm/k_norm the same.
These are in the 0.02-0.05 range typical of trained projections; they are not calibrated
against the real checkpoints. For speed benchmarks only the shapes and dtypes matter.

Deterministic: each tensor gets its own numpy Generator seeded with (seed, crc32(name)),
so a tensor does not depend on the order of the others. Memory stays modest: tensors are
generated and written one at a time, the embedding in blocks of rows. Needs numpy only.
"""
import argparse
import json
import os
import struct
import sys
import zlib

import numpy as np

SHAPES = {
    # hidden, layers, heads, kv_heads, head_dim, intermediate
    "gemma-3-270m": dict(hidden_size=640, num_hidden_layers=18, num_attention_heads=4,
                         num_key_value_heads=1, head_dim=256, intermediate_size=2048),
    "gemma-3-1b": dict(hidden_size=1152, num_hidden_layers=26, num_attention_heads=4,
                       num_key_value_heads=1, head_dim=256, intermediate_size=6912),
}
VOCAB = 262144
EMBED_STD = 0.03
NORM_STD = 0.05


def config(shape):
    s = SHAPES[shape]
    layers = s["num_hidden_layers"]
    return {
        "_sliding_window_pattern": 6,
        "architectures": ["Gemma3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_logit_softcapping": None,
        "bos_token_id": 2,
        "eos_token_id": 1,
        "final_logit_softcapping": None,
        "head_dim": s["head_dim"],
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": s["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": s["intermediate_size"],
        "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                        for i in range(layers)],
        "max_position_embeddings": 32768,
        "model_type": "gemma3_text",
        "num_attention_heads": s["num_attention_heads"],
        "num_hidden_layers": layers,
        "num_key_value_heads": s["num_key_value_heads"],
        "pad_token_id": 0,
        "query_pre_attn_scalar": 256,
        "rms_norm_eps": 1e-06,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": 512,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.55.2",
        "use_bidirectional_attention": False,
        "use_cache": True,
        "vocab_size": VOCAB,
        "petrel_standin": "random weights, tools/reference/make_lm_standin.py",
    }


def generation_config():
    # The base gemma-3-270m generation_config.json (semantics notes §8).
    return {"bos_token_id": 2, "do_sample": True,
            "eos_token_id": 1, "max_length": 32768, "pad_token_id": 0, "top_k": 64,
            "top_p": 0.95, "transformers_version": "4.55.2"}


def tensor_specs(shape):
    """(name, shape, std) in Gemma3ForCausalLM's names; tied head, so no lm_head."""
    s = SHAPES[shape]
    d, f, hd = s["hidden_size"], s["intermediate_size"], s["head_dim"]
    q, kv = s["num_attention_heads"] * hd, s["num_key_value_heads"] * hd
    yield "model.embed_tokens.weight", (VOCAB, d), EMBED_STD
    for i in range(s["num_hidden_layers"]):
        p = f"model.layers.{i}"
        yield f"{p}.input_layernorm.weight", (d,), "norm"
        yield f"{p}.self_attn.q_proj.weight", (q, d), d ** -0.5
        yield f"{p}.self_attn.k_proj.weight", (kv, d), d ** -0.5
        yield f"{p}.self_attn.v_proj.weight", (kv, d), d ** -0.5
        yield f"{p}.self_attn.o_proj.weight", (d, q), q ** -0.5
        yield f"{p}.self_attn.q_norm.weight", (hd,), "norm"
        yield f"{p}.self_attn.k_norm.weight", (hd,), "norm"
        yield f"{p}.post_attention_layernorm.weight", (d,), "norm"
        yield f"{p}.pre_feedforward_layernorm.weight", (d,), "norm"
        yield f"{p}.mlp.gate_proj.weight", (f, d), d ** -0.5
        yield f"{p}.mlp.up_proj.weight", (f, d), d ** -0.5
        yield f"{p}.mlp.down_proj.weight", (d, f), f ** -0.5
        yield f"{p}.post_feedforward_layernorm.weight", (d,), "norm"
    yield "model.norm.weight", (d,), "norm"


def to_bf16(x):
    """float32 array -> uint16 bf16 bits, round to nearest even (finite inputs)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + (0x7FFF + ((u >> 16) & 1))) >> 16).astype(np.uint16)


def blocks(name, shape, std, seed, rows_per_block=8192):
    """Yields the tensor's bf16 bits in row blocks."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    if std == "norm":
        yield to_bf16(rng.standard_normal(shape, dtype=np.float32) * NORM_STD)
        return
    rows = shape[0]
    for r in range(0, rows, rows_per_block):
        n = min(rows_per_block, rows - r)
        yield to_bf16(rng.standard_normal((n,) + tuple(shape[1:]), dtype=np.float32) * np.float32(std))


def write(shape, out_dir, seed):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config(shape), f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(generation_config(), f, indent=2)
        f.write("\n")

    specs = list(tensor_specs(shape))
    header, offset = {"__metadata__": {"format": "pt", "petrel_seed": str(seed)}}, 0
    for name, shp, _ in specs:
        nbytes = 2 * int(np.prod(shp))
        header[name] = {"dtype": "BF16", "shape": list(shp), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path = os.path.join(out_dir, "model.safetensors")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, shp, std in specs:
            for b in blocks(name, shp, std, seed):
                f.write(b.tobytes())
    os.replace(tmp, path)
    params = sum(int(np.prod(s)) for _, s, _ in specs)
    print(f"{out_dir}: {shape}, {len(specs)} tensors, {params / 1e6:.1f} M parameters, "
          f"{os.path.getsize(path) / 2**20:.1f} MiB", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=28)
    a = ap.parse_args()
    write(a.shape, a.out_dir, a.seed)


if __name__ == "__main__":
    main()
