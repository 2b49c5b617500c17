#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/seed-*): small
valid inputs that between them reach every feature each parser knows.

    /usr/bin/python3 tests/fuzz/make_corpora.py build/release/tools/petrel-convert

Four tiny MarianMT checkpoints (d_model 8, 1+1 layers, 12 tokens, random weights from a
fixed seed) are written in the Hugging Face layout and converted with petrel-convert,
each with other options: int8 + vocabulary (word tokenizer) + shortlist, f32 pre-LN
with learned positions and an untied output, f16 with separate source/target
vocabularies and generation defaults, int8 with unshared tables and an f16 embedding.
Their model.safetensors (written in F32, F16, BF16 and F64), config.json /
generation_config.json / vocab.json, a lex.s2t and the committed small pickle fixtures
(plus, when Debian's python3-torch is installed, the first checkpoint saved by
torch.save in both formats) seed the other targets. fuzz_convert gets recipes of
shapes and options (CONVERT_RECIPES) with random weight bytes. Only the Python standard
library is needed; everything but the legacy torch.save file (whose storage keys are memory
addresses) comes out byte-identical on every run. Reproducers of fixed findings live
beside the seeds as regress-* files and are kept.
"""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")

D, HEADS, FFN, VOCAB, POSITIONS = 8, 2, 16, 12, 16
TOKENS = ["</s>", "w1", "w2", "w3", "w4", "w5", "w6", "\u00e4", "\u2581Haus", "w9", "w10", "<pad>"]


def pack(dtype, values):
    if dtype == "F32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "F64":
        return struct.pack(f"<{len(values)}d", *values)
    if dtype == "F16":
        return struct.pack(f"<{len(values)}e", *values)
    if dtype == "BF16":  # the high half of each f32
        return b"".join(struct.pack("<f", v)[2:] for v in values)
    raise ValueError(dtype)


def safetensors(tensors, dtype_of):
    """tensors: {name: (shape, values)} -> the file's bytes."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        dtype = dtype_of(name)
        blob = pack(dtype, values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def checkpoint(rng, *, shared, tied, pre_ln, learned, target_vocab=VOCAB):
    t = {}

    def add(name, *shape, scale=0.4, around=0.0):
        n = 1
        for s in shape:
            n *= s
        t[name] = (list(shape), [around + rng.gauss(0, scale) for _ in range(n)])

    if shared:
        add("model.shared.weight", VOCAB, D)
    else:
        add("model.encoder.embed_tokens.weight", VOCAB, D)
        add("model.decoder.embed_tokens.weight", target_vocab, D)
    if not tied:
        add("lm_head.weight", target_vocab, D)
    add("final_logits_bias", 1, target_vocab, scale=0.1)
    for stack in ("encoder", "decoder"):
        if learned:
            add(f"model.{stack}.embed_positions.weight", POSITIONS, D)
        if pre_ln:
            add(f"model.{stack}.layer_norm.weight", D, scale=0.1, around=1.0)
            add(f"model.{stack}.layer_norm.bias", D, scale=0.1)
        p = f"model.{stack}.layers.0"
        attentions = ["self_attn"] + (["encoder_attn"] if stack == "decoder" else [])
        for attn in attentions:
            for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                add(f"{p}.{attn}.{proj}.weight", D, D)
                add(f"{p}.{attn}.{proj}.bias", D, scale=0.1)
            add(f"{p}.{attn}_layer_norm.weight", D, scale=0.1, around=1.0)
            add(f"{p}.{attn}_layer_norm.bias", D, scale=0.1)
        add(f"{p}.fc1.weight", FFN, D)
        add(f"{p}.fc1.bias", FFN, scale=0.1)
        add(f"{p}.fc2.weight", D, FFN)
        add(f"{p}.fc2.bias", D, scale=0.1)
        add(f"{p}.final_layer_norm.weight", D, scale=0.1, around=1.0)
        add(f"{p}.final_layer_norm.bias", D, scale=0.1)
    return t


def config(**overrides):
    c = {
        "model_type": "marian", "d_model": D, "encoder_layers": 1, "decoder_layers": 1,
        "encoder_attention_heads": HEADS, "decoder_attention_heads": HEADS,
        "encoder_ffn_dim": FFN, "decoder_ffn_dim": FFN, "vocab_size": VOCAB, "decoder_vocab_size": VOCAB,
        "max_position_embeddings": POSITIONS, "scale_embedding": True, "activation_function": "swish",
        "pad_token_id": VOCAB - 1, "eos_token_id": 0, "decoder_start_token_id": VOCAB - 1,
        "tie_word_embeddings": True, "share_encoder_decoder_embeddings": True, "bad_words_ids": [[VOCAB - 1]],
    }
    c.update(overrides)
    return c


# name -> (checkpoint arguments, config overrides, generation_config, vocab.json?, lex.s2t?,
#          safetensors dtype per tensor name, petrel-convert options)
VARIANTS = {
    "int8_tied_vocab_shortlist": (
        dict(shared=True, tied=True, pre_ln=False, learned=False), {}, None, True, True,
        lambda name: "F32", ["--shortlist-first", "3", "--shortlist-best", "2"]),
    "f32_pre_learned_untied": (
        dict(shared=True, tied=False, pre_ln=True, learned=True),
        {"activation_function": "gelu", "tie_word_embeddings": False, "scale_embedding": False,
         "normalize_before": True}, None, False, False,
        lambda name: "F64" if "fc" in name else "F32",
        ["--quantize", "f32", "--embeddings", "f32", "--norm", "pre", "--positions", "learned"]),
    "f16_separate_vocab_generation": (
        dict(shared=False, tied=False, pre_ln=False, learned=False, target_vocab=10),
        {"activation_function": "relu", "decoder_vocab_size": 10, "tie_word_embeddings": False,
         "share_encoder_decoder_embeddings": False, "pad_token_id": 9, "decoder_start_token_id": 9,
         "bad_words_ids": [[9]]},
        {"num_beams": 2, "max_length": 6, "length_penalty": 0.5, "early_stopping": True, "forced_eos_token_id": 0,
         "bad_words_ids": [[9]], "decoder_start_token_id": 9, "eos_token_id": 0, "pad_token_id": 9,
         "no_repeat_ngram_size": 3},
        False, False, lambda name: "F16",
        ["--quantize", "f16", "--embeddings", "int8", "--positions", "sinusoidal-interleaved"]),
    "int8_unshared_tied_f16_embeddings": (
        dict(shared=False, tied=True, pre_ln=False, learned=False),
        {"share_encoder_decoder_embeddings": False, "scale_embedding": False}, None, False, False,
        lambda name: "BF16", ["--embeddings", "f16", "--embed-scale", "2.5"]),
}


def lex_s2t(rng):
    lines = []
    for source in TOKENS[1:-1]:
        for target in rng.sample(TOKENS[:-1], 3):
            lines.append(f"{target} {source} {rng.random():.6f}")
    lines += ["NULL w1 0.5", "w2 NULL 0.25", "unknown w3 0.1"]
    return "\n".join(lines) + "\n"


def json_input(files):
    """fuzz_checkpoint_json's input: config.json, generation_config.json, vocab.json
    separated by NUL bytes; a vocabulary without a generation config gets an empty one."""
    parts = [files["config.json"]]
    if "generation_config.json" in files or "vocab.json" in files:
        parts.append(files.get("generation_config.json", "{}"))
    if "vocab.json" in files:
        parts.append(files["vocab.json"])
    return "\0".join(parts)


# fuzz_convert's recipes (its first 13 bytes, see fuzz_convert.cpp), then weight bytes.
CONVERT_RECIPES = {
    # d 8 / 2 heads, ffn 16, vocab 12, 1+1 layers, 16 positions; tied, shared, scaled;
    # swish, int8 weights and embeddings; vocabulary and shortlist
    "int8_tied_vocab_shortlist": [7, 1, 15, 11, 0, 0, 15, 1 | 2 | 8, 2 + 3 * 2 + 9 * 2, 11, 2 | 4, 0x23, 57],
    # d 16 / 4 heads, ffn 32, vocab 20, 2+2 layers, pre-LN, learned positions, logits bias,
    # untied; gelu, f32; generation defaults
    "f32_pre_learned_untied": [15, 2, 31, 19, 0, 3, 9, 4 | 16 | 32 | 64, 1, 19, 1, 0x45, 56],
    # d 6 / 3 heads, ffn 7, vocab 9 / target 5, 1+2 layers, interleaved; relu, f16 weights,
    # int8 embeddings; generation defaults with forced EOS
    "f16_separate_odd_sizes": [5, 2, 6, 8, 0x80 | 4, 2, 4, 8 | 128, 0 + 3 * 1 + 9 * 2, 4 + 16 * 1, 1, 0xff, 56],
    # everything 1: d 1, one head, ffn 1, vocab 1, one position (learned)
    "ones_learned": [0, 0, 0, 0, 0, 0, 0, 1 | 2 | 32 | 64, 2 + 9 * 2, 0, 0, 0, 56],
    # d 70 / 7 heads, ffn 72, vocab 40, 20 positions: widths past the SIMD widths
    "int8_wide": [69, 3, 71, 39, 0, 0, 19, 1 | 2, 2 + 3 * 2 + 9 * 2, 39, 0, 0, 57],
    # weights of 2^95: activations overflow to infinity, decoding stops with an error
    "overflowing_weights": [7, 1, 15, 11, 0, 0, 15, 1 | 2, 2 + 3 * 2, 11, 0, 0, 159],
}


def write(target, name, data):
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    convert = sys.argv[1]
    for target in os.listdir(CORPUS) if os.path.isdir(CORPUS) else []:
        for name in os.listdir(os.path.join(CORPUS, target)):
            if name.startswith("seed-"):
                os.remove(os.path.join(CORPUS, target, name))
    rng = random.Random(16)
    work = tempfile.mkdtemp(prefix="petrel-corpora-")
    try:
        first_state_dict = None
        for name, (shape, overrides, generation, vocab, lex, dtype_of, options) in VARIANTS.items():
            ckpt = os.path.join(work, name)
            os.makedirs(ckpt)
            tensors = checkpoint(rng, **shape)
            first_state_dict = first_state_dict or tensors
            files = {"config.json": json.dumps(config(**overrides), indent=1)}
            if generation:
                files["generation_config.json"] = json.dumps(generation, indent=1)
            if vocab:
                files["vocab.json"] = json.dumps({t: i for i, t in enumerate(TOKENS)}, indent=1, ensure_ascii=False)
            if lex:
                files["lex.s2t"] = lex_s2t(rng)
                options = options + ["--shortlist", os.path.join(ckpt, "lex.s2t")]
            for file, text in files.items():
                with open(os.path.join(ckpt, file), "w", encoding="utf-8") as f:
                    f.write(text)
            st = safetensors(tensors, dtype_of)
            with open(os.path.join(ckpt, "model.safetensors"), "wb") as f:
                f.write(st)
            out = os.path.join(work, name + ".petrel")
            subprocess.run([convert, ckpt, "-o", out, "--quiet"] + options, check=True)
            with open(out, "rb") as f:
                write("fuzz_model_file", name + ".petrel", f.read())
            write("fuzz_safetensors", name + ".safetensors", st)
            write("fuzz_checkpoint_json", name + ".json", json_input(files))
            if lex:
                write("fuzz_shortlist", name + ".s2t", bytes([3, 1]) + files["lex.s2t"].encode())
        for name, recipe in CONVERT_RECIPES.items():
            write("fuzz_convert", name + ".recipe", bytes(recipe) + bytes(rng.randrange(256) for _ in range(2048)))
        # The oracle fixtures' JSON files as they are committed (generation_eos5 has all three kinds).
        for fixture in ("post_swish_concat_tied", "generation_eos5"):
            d = os.path.join(ROOT, "tests", "fixtures", "oracle", fixture)
            files = {}
            for f in ("config.json", "generation_config.json", "vocab.json"):
                if os.path.exists(os.path.join(d, f)):
                    with open(os.path.join(d, f), encoding="utf-8") as text:
                        files[f] = text.read()
            write("fuzz_checkpoint_json", "oracle_" + fixture + ".json", json_input(files))
            if os.path.exists(os.path.join(d, "lex.s2t")):
                with open(os.path.join(d, "lex.s2t"), "rb") as f:
                    write("fuzz_shortlist", "oracle_" + fixture + ".s2t", bytes([100, 99]) + f.read())
        # The pickle reader's small committed fixtures (valid layouts and refused ones).
        pickles = os.path.join(ROOT, "tests", "fixtures", "pickle")
        for f in sorted(os.listdir(pickles)):
            if f.endswith(".bin") and os.path.getsize(os.path.join(pickles, f)) < 8192:
                with open(os.path.join(pickles, f), "rb") as data:
                    write("fuzz_pytorch_checkpoint", f, data.read())
        try:
            import torch
        except ImportError:
            print("python3-torch not installed: no torch.save seeds for fuzz_pytorch_checkpoint")
        else:
            state = {k: torch.tensor(v, dtype=torch.float32).reshape(s) for k, (s, v) in first_state_dict.items()}
            state["model.shared.weight"] = state["model.shared.weight"].half()
            for fmt, zipped in (("zip", True), ("legacy", False)):
                path = os.path.join(CORPUS, "fuzz_pytorch_checkpoint", f"seed-tiny_model_{fmt}.bin")
                torch.save(state, path, _use_new_zipfile_serialization=zipped)
    finally:
        shutil.rmtree(work)
    for target in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, target))
        size = sum(os.path.getsize(os.path.join(CORPUS, target, f)) for f in files)
        print(f"{target}: {len(files)} files, {size} bytes")


if __name__ == "__main__":
    main()
