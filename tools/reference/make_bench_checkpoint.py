#!/usr/bin/env python3
"""Writes the end-to-end benchmark's model: a Transformer-base MarianMT checkpoint
shaped like Helsinki-NLP/opus-mt-en-de (d_model 512, 6+6 layers, 8 heads, FFN 2048,
vocab 58101, swish, post-LN, scaled embeddings, tied output, final logits bias),
with random weights, in Hugging Face's layout (config.json + model.safetensors).

    /usr/bin/python3 tools/reference/make_bench_checkpoint.py build/bench/base-checkpoint

Also writes DIR-shortlist/: the same checkpoint (symlinked) plus a vocab.json and a
random lexical table lex.s2t in Marian's format (SHORTLIST_TARGETS targets per source
token), for `petrel-convert --shortlist`. Needs only numpy (Debian: python3-numpy).
See bench/README.md for the protocol.
"""
import json
import os
import struct
import sys

import numpy as np

D, LAYERS, HEADS, FFN, VOCAB, POSITIONS = 512, 6, 8, 2048, 58101, 512
PAD, EOS = VOCAB - 1, 0
SHORTLIST_TARGETS = 100


def config():
    return {
        "model_type": "marian", "architectures": ["MarianMTModel"], "d_model": D,
        "encoder_layers": LAYERS, "decoder_layers": LAYERS,
        "encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS,
        "encoder_ffn_dim": FFN, "decoder_ffn_dim": FFN, "vocab_size": VOCAB, "decoder_vocab_size": VOCAB,
        "max_position_embeddings": POSITIONS, "scale_embedding": True, "normalize_before": False,
        "activation_function": "swish", "pad_token_id": PAD, "eos_token_id": EOS,
        "decoder_start_token_id": PAD, "tie_word_embeddings": True,
        "share_encoder_decoder_embeddings": True, "bad_words_ids": [[PAD]],
    }


def norm_specs(prefix, d):
    yield f"{prefix}.weight", (d,), "gamma"
    yield f"{prefix}.bias", (d,), "beta"


def layer_specs(stack, layers, d, ffn):
    """(name, shape, kind) of one stack's layers in Hugging Face's names (Marian, M2M100
    and mBART share them); kind is weight, bias, gamma or beta. make_nllb_standin.py
    uses it too."""
    def linear(prefix, out, inp):
        yield f"{prefix}.weight", (out, inp), "weight"
        yield f"{prefix}.bias", (out,), "bias"

    for i in range(layers):
        p = f"model.{stack}.layers.{i}"
        attentions = ["self_attn"] + (["encoder_attn"] if stack == "decoder" else [])
        for a in attentions:
            for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                yield from linear(f"{p}.{a}.{proj}", d, d)
            yield from norm_specs(f"{p}.{a}_layer_norm", d)
        yield from linear(f"{p}.fc1", ffn, d)
        yield from linear(f"{p}.fc2", d, ffn)
        yield from norm_specs(f"{p}.final_layer_norm", d)


def random_values(rng, shape, kind):
    """Weights N(0, in^-1/2), biases N(0, 0.02), gammas 1 + N(0, 0.05), betas N(0, 0.05)."""
    if kind == "weight":
        return rng.normal(0, shape[-1] ** -0.5, shape)
    if kind == "bias":
        return rng.normal(0, 0.02, shape)
    if kind == "gamma":
        return 1 + rng.normal(0, 0.05, shape)
    return rng.normal(0, 0.05, shape)


def tensors(rng):
    yield "model.shared.weight", random_values(rng, (VOCAB, D), "weight")
    yield "final_logits_bias", rng.normal(0, 0.1, (1, VOCAB))
    for stack in ("encoder", "decoder"):
        for name, shape, kind in layer_specs(stack, LAYERS, D, FFN):
            yield name, random_values(rng, shape, kind)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "build/bench/base-checkpoint"
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    arrays = {name: value.astype("<f4") for name, value in tensors(rng)}
    header, offset = {}, 0
    for name in sorted(arrays):
        size = arrays[name].nbytes
        header[name] = {"dtype": "F32", "shape": list(arrays[name].shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(os.path.join(out_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name in sorted(arrays):
            f.write(arrays[name].tobytes())
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config(), f, indent=2)
    params = sum(a.size for a in arrays.values())
    print(f"wrote {out_dir}: {params / 1e6:.1f}M parameters, {offset / 2**20:.0f} MiB")
    write_shortlist_variant(out_dir, rng)


def token(i):
    return "</s>" if i == EOS else "<pad>" if i == PAD else f"w{i}"


def write_shortlist_variant(out_dir, rng):
    variant = out_dir.rstrip("/") + "-shortlist"
    os.makedirs(variant, exist_ok=True)
    for name in ("model.safetensors", "config.json"):
        link = os.path.join(variant, name)
        if not os.path.lexists(link):
            os.symlink(os.path.abspath(os.path.join(out_dir, name)), link)
    with open(os.path.join(variant, "vocab.json"), "w") as f:
        json.dump({token(i): i for i in range(VOCAB)}, f)
    targets = rng.integers(0, VOCAB, (VOCAB, SHORTLIST_TARGETS))
    probs = rng.random((VOCAB, SHORTLIST_TARGETS))
    with open(os.path.join(variant, "lex.s2t"), "w") as f:
        for s in range(VOCAB):
            src = token(s)
            f.write("".join(f"{token(t)} {src} {p:.4f}\n" for t, p in zip(targets[s], probs[s])))
    print(f"wrote {variant}: vocab.json, lex.s2t ({VOCAB * SHORTLIST_TARGETS} lines)")


if __name__ == "__main__":
    main()
