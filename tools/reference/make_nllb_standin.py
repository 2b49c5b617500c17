#!/usr/bin/env python3
"""Writes issue #19's NLLB benchmark model: an M2M100 checkpoint shaped like
facebook/nllb-200-distilled-600M (d_model 1024, 12+12 layers, 16 heads, FFN 4096,
vocab 256206, ReLU, pre-LN with final stack norms, sinusoidal positions made by the
engine, scaled embeddings, output tied to model.shared, no final_logits_bias), with
random weights, in Hugging Face's layout (config.json + model.safetensors).

    /usr/bin/python3 tools/reference/make_nllb_standin.py build/bench/nllb-600m-checkpoint
    /usr/bin/python3 tools/reference/make_nllb_standin.py --shape 3.3b --shards 3 build/bench/nllb-3.3b-checkpoint

--shape 3.3b gives facebook/nllb-200-3.3B's shape instead (d_model 2048, 24+24 layers,
16 heads, FFN 8192: 3.3 G parameters, ~6.6 GB of F16), to measure the converter on a
big model. --shards N splits the weights over N files as transformers saves big models
(model-0000i-of-0000N.safetensors and model.safetensors.index.json's weight_map).

Beside the weights it writes an NLLB-sized tokenizer (sentencepiece.bpe.model of 256,000
synthetic BPE pieces, the size of NLLB's, and tokenizer_config.json), so the load time
includes what a real NLLB file costs: the tokenizer's tables (pieces are made-up words,
not NLLB's; ids follow NLLB's rules, FAMILIES.md §6).

Random weights measure speed and memory, never quality. The weights are F16 (the real
checkpoint's 615 M parameters would be 2.5 GB in F32; F16 keeps this one at ~1.2 GB) and
use make_bench_checkpoint.py's scales: linear weights N(0, in^-1/2), biases N(0, 0.02),
norm gammas 1 + N(0, 0.05), betas N(0, 0.05), the table N(0, d^-1/2). Tensors are
streamed to the file a chunk at a time (peak RSS ~200 MB), in the order their names
sort, as make_bench_checkpoint.py writes them. Needs only numpy (Debian: python3-numpy).
The tensor names come from make_bench_checkpoint.py's layer_specs. Its safetensors writer
is not shared: that one holds every array in memory (F32) and writes them in one go,
this one must know the header before any data exists. See bench/README.md's "NLLB-200-distilled-600M stand-in" section.
"""
import argparse
import importlib.util
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_bench_checkpoint as bench  # noqa: E402  (the layers' tensor names, shared)

# (d_model, layers per stack, heads, FFN) of the NLLB-200 models; vocabulary and
# positions are the same in all of them.
SHAPES = {"600m": (1024, 12, 16, 4096), "3.3b": (2048, 24, 16, 8192)}
D, LAYERS, HEADS, FFN = SHAPES["600m"]
VOCAB, POSITIONS = 256206, 1024
PAD, BOS, EOS = 1, 0, 2
CHUNK_ROWS = 16384  # rows of a large matrix generated at a time (64 MB of f32 at d 1024)


def config():
    # facebook/nllb-200-distilled-600M's config.json, key for key; tie_word_embeddings is
    # that model's default (M2M100Config), written out here. torch_dtype says what is stored.
    return {
        "_name_or_path": "petrel-bench/nllb-200-%s-standin" % ("distilled-600M" if D == 1024 else "3.3B"),
        "activation_dropout": 0.0, "activation_function": "relu",
        "architectures": ["M2M100ForConditionalGeneration"], "attention_dropout": 0.1,
        "bos_token_id": BOS, "d_model": D,
        "decoder_attention_heads": HEADS, "decoder_ffn_dim": FFN, "decoder_layerdrop": 0,
        "decoder_layers": LAYERS, "decoder_start_token_id": EOS, "dropout": 0.1,
        "encoder_attention_heads": HEADS, "encoder_ffn_dim": FFN, "encoder_layerdrop": 0,
        "encoder_layers": LAYERS, "eos_token_id": EOS, "init_std": 0.02,
        "is_encoder_decoder": True, "max_length": 200, "max_position_embeddings": POSITIONS,
        "model_type": "m2m_100", "num_hidden_layers": LAYERS, "pad_token_id": PAD,
        "scale_embedding": True, "tie_word_embeddings": True,
        "tokenizer_class": "NllbTokenizer", "torch_dtype": "float16",
        "transformers_version": "4.21.0.dev0", "use_cache": True, "vocab_size": VOCAB,
    }


def specs():
    """(name, shape, kind) of every tensor; kind picks the distribution."""
    yield "model.shared.weight", (VOCAB, D), "weight"
    for stack in ("encoder", "decoder"):
        yield from bench.norm_specs(f"model.{stack}.layer_norm", D)
        yield from bench.layer_specs(stack, LAYERS, D, FFN)


def chunks(rng, shape, kind):
    """The tensor's values as little-endian f16 bytes, CHUNK_ROWS rows at a time."""
    rows = shape[0]
    cols = shape[1] if len(shape) > 1 else 1
    for start in range(0, rows, CHUNK_ROWS):
        n = min(CHUNK_ROWS, rows - start)
        z = rng.standard_normal((n, cols), dtype=np.float32)
        if kind == "weight":
            z *= np.float32(cols ** -0.5)
        elif kind == "bias":
            z *= np.float32(0.02)
        elif kind == "gamma":
            z = 1 + np.float32(0.05) * z
        else:  # beta
            z *= np.float32(0.05)
        yield z.astype("<f2").tobytes()


def write_tokenizer(out_dir):
    """A SentencePiece BPE model with NLLB's piece count and NLLB's tokenizer_config.json
    keys. NLLB's ids put eng_Latn at 256047 and <mask> at 256203 (FAMILIES.md §6), so
    its model has 256,000 pieces; vocab_size 256206 leaves two rows no token uses."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "make_corpora", os.path.join(here, "..", "..", "tests", "fuzz", "make_corpora.py"))
    corpora = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpora)  # its ModelProto writer (spm_model)
    pieces = 256000
    letters = "abcdefghijklmnopqrstuvwxyz"

    def word(i):
        w = ""
        while True:
            w += letters[i % 26]
            i //= 26
            if i == 0:
                return w
    normal = [("\u2581" + word(i // 2) if i % 2 == 0 else word(i // 2 + 26), -float(i), corpora.NORMAL)
              for i in range(pieces - 3)]
    with open(os.path.join(out_dir, "sentencepiece.bpe.model"), "wb") as f:
        f.write(corpora.spm_model(corpora.SPECIALS + normal, bpe=True))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "NllbTokenizer", "src_lang": "eng_Latn", "tgt_lang": "fra_Latn",
                   "legacy_behaviour": False, "clean_up_tokenization_spaces": True}, f, indent=2)


def write_safetensors(path, rng, items):
    """items (name, shape, kind) as one F16 safetensors file at path; returns its bytes of data."""
    header, offset = {}, 0
    for name, shape, _ in items:
        size = 2 * int(np.prod(shape))
        header[name] = {"dtype": "F16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name, shape, kind in items:
            written = 0
            for block in chunks(rng, shape, kind):
                f.write(block)
                written += len(block)
            assert written == header[name]["data_offsets"][1] - header[name]["data_offsets"][0], name
    os.replace(path + ".tmp", path)
    return offset


def main():
    global D, LAYERS, HEADS, FFN
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", nargs="?", default="build/bench/nllb-600m-checkpoint")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="600m")
    parser.add_argument("--shards", type=int, default=1, help="weight files (1: model.safetensors)")
    args = parser.parse_args()
    D, LAYERS, HEADS, FFN = SHAPES[args.shape]
    out_dir = args.out_dir
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    items = sorted(specs())
    if args.shards <= 1:
        data = write_safetensors(os.path.join(out_dir, "model.safetensors"), rng, items)
    else:  # consecutive runs of the sorted tensors, of about equal bytes, as transformers' max_shard_size does
        total = sum(2 * int(np.prod(shape)) for _, shape, _ in items)
        groups, size = [[]], 0
        for item in items:
            if groups[-1] and size >= total * len(groups) / args.shards and len(groups) < args.shards:
                groups.append([])
            groups[-1].append(item)
            size += 2 * int(np.prod(item[1]))
        weight_map, data = {}, 0
        for i, group in enumerate(groups):
            shard = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
            data += write_safetensors(os.path.join(out_dir, shard), rng, group)
            weight_map.update({name: shard for name, _, _ in group})
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": data}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config(), f, indent=2)
    write_tokenizer(out_dir)
    print(f"wrote {out_dir}: {len(items)} tensors, {data // 2 / 1e6:.1f}M parameters, "
          f"{data / 2**20:.0f} MiB (F16) in {max(1, args.shards)} file(s)")


if __name__ == "__main__":
    main()
