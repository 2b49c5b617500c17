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
shapes and options (CONVERT_RECIPES) with random weight bytes. Three small SentencePiece
models written here (SPM_MODELS: unigram with language codes and an unused piece, BPE
with byte fallback, whitespace as suffix without escaping) seed fuzz_spm_model, with two
models spm_train trains with a small normalization rule table when Debian's
sentencepiece is installed, and make two opus-mt-shaped checkpoints (MARIAN_VARIANTS:
joint vocabulary; separate target vocabulary and tokenizer_config.json) whose converted
files and JSON files seed fuzz_model_file and fuzz_checkpoint_json. fuzz_text gets texts in many
scripts, broken UTF-8 and long paragraphs under every option byte (TEXTS), and the en-de
test split's first lines. Only the Python standard
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


def checkpoint(rng, *, shared, tied, pre_ln, learned, target_vocab=VOCAB, vocab=VOCAB):
    t = {}

    def add(name, *shape, scale=0.4, around=0.0):
        n = 1
        for s in shape:
            n *= s
        t[name] = (list(shape), [around + rng.gauss(0, scale) for _ in range(n)])

    if shared:
        add("model.shared.weight", vocab, D)
    else:
        add("model.encoder.embed_tokens.weight", vocab, D)
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


# (fuzz_checkpoint_json reads a sixth part, a sharded checkpoint's index: its seeds
# are the hand-shard-index* files.)
JSON_PARTS = ("config.json", "generation_config.json", "vocab.json", "target_vocab.json", "tokenizer_config.json")


def json_input(files):
    """fuzz_checkpoint_json's input: config.json, generation_config.json, vocab.json,
    target_vocab.json, tokenizer_config.json separated by NUL bytes, up to the last one
    present; a part before it that the checkpoint lacks is written as "{}" (a generation
    or tokenizer config with no keys; "{}" as a vocabulary is refused, which is fine)."""
    last = max(i for i, name in enumerate(JSON_PARTS) if name in files)
    return "\0".join(files.get(name, "{}") for name in JSON_PARTS[:last + 1])


# fuzz_convert's recipes (its first 14 bytes, see fuzz_convert.cpp), then weight bytes.
CONVERT_RECIPES = {
    # d 8 / 2 heads, ffn 16, vocab 12, 1+1 layers, 16 positions; tied, shared, scaled;
    # swish, int8 weights and embeddings; vocabulary and shortlist
    "int8_tied_vocab_shortlist": [7, 1, 15, 11, 0, 0, 15, 1 | 2 | 8, 2 + 3 * 2 + 9 * 2, 11, 2 | 4, 0x23, 57, 0],
    # d 16 / 4 heads, ffn 32, vocab 20, 2+2 layers, pre-LN, learned positions, logits bias,
    # untied; gelu, f32; generation defaults
    "f32_pre_learned_untied": [15, 2, 31, 19, 0, 3, 9, 4 | 16 | 32 | 64, 1, 19, 1, 0x45, 56, 0],
    # d 6 / 3 heads, ffn 7, vocab 9 / target 5, 1+2 layers, interleaved; relu, f16 weights,
    # int8 embeddings; generation defaults with forced EOS
    "f16_separate_odd_sizes": [5, 2, 6, 8, 0x80 | 4, 2, 4, 8 | 128, 0 + 3 * 1 + 9 * 2, 4 + 16 * 1, 1, 0xff, 56, 0],
    # everything 1: d 1, one head, ffn 1, vocab 1, one position (learned)
    "ones_learned": [0, 0, 0, 0, 0, 0, 0, 1 | 2 | 32 | 64, 2 + 9 * 2, 0, 0, 0, 56, 0],
    # d 70 / 7 heads, ffn 72, vocab 40, 20 positions: widths past the SIMD widths
    "int8_wide": [69, 3, 71, 39, 0, 0, 19, 1 | 2, 2 + 3 * 2 + 9 * 2, 39, 0, 0, 57, 0],
    # weights of 2^95: activations overflow to infinity, decoding stops with an error
    "overflowing_weights": [7, 1, 15, 11, 0, 0, 15, 1 | 2, 2 + 3 * 2, 11, 0, 0, 159, 0],
    # M2M100 / NLLB: d 16 / 4 heads, ffn 32, vocab 20, 2+2 layers, generated sinusoids,
    # relu, int8, a forced target-language token
    "m2m100_int8": [15, 2, 31, 19, 0, 3, 9, 1 | 8, 0 + 3 * 2 + 9 * 2, 19, 0, 0, 57, 1 | 8],
    # mBART: d 8 / 2 heads, learned positions at + 2, layernorm_embedding, logits bias, gelu, f32
    "mbart_f32": [7, 1, 15, 11, 0, 1, 15, 1 | 8 | 16, 1, 11, 1, 0x23, 56, 2],
}


# --- SentencePiece models (.spm: a serialized sentencepiece ModelProto) ---------------
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def pb_varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def pb_bytes(number, payload):
    payload = payload.encode() if isinstance(payload, str) else payload
    return pb_varint(number << 3 | 2) + pb_varint(len(payload)) + payload


def pb_uint(number, value):
    return pb_varint(number << 3) + pb_varint(value)


def spm_model(pieces, *, bpe=False, byte_fallback=False, suffix=False, unk_surface=None, name="identity",
              dummy_prefix=True, remove_spaces=True, escape=True):
    """pieces: [(piece, score, type)] -> a ModelProto's bytes (what spm_train writes,
    reduced to the fields Petrel reads)."""
    out = b"".join(pb_bytes(1, pb_bytes(1, p) + pb_varint(2 << 3 | 5) + struct.pack("<f", score) + pb_uint(3, t))
                   for p, score, t in pieces)
    trainer = pb_uint(3, 2 if bpe else 1) + pb_uint(24, suffix) + pb_uint(35, byte_fallback)
    if unk_surface is not None:
        trainer += pb_bytes(44, unk_surface)
    out += pb_bytes(2, trainer)
    out += pb_bytes(3, pb_bytes(1, name) + pb_uint(3, dummy_prefix) + pb_uint(4, remove_spaces) + pb_uint(5, escape))
    return out


SPECIALS = [("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL)]
WORDS = ["\u2581the", "\u2581Haus", "\u2581is", "\u2581small", "\u2581\u00e4", "\u6570\u636e", "ing", "er"]
LETTERS = ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["H", "\u00e4", "\u6570", "\u636e"]

# name -> a small model exercising one set of features
SPM_MODELS = {
    # unigram: words, letters, a language code, an unused piece
    "unigram_udf_unused": spm_model(
        SPECIALS + [(">>fra<<", 0.0, USER_DEFINED), (">>deu<<", 0.0, USER_DEFINED)]
        + [(w, -2.0 - i / 4, NORMAL) for i, w in enumerate(WORDS)]
        + [(c, -6.0 - i / 8, NORMAL) for i, c in enumerate(LETTERS)] + [("\u2581unused", -3.0, UNUSED)]),
    # BPE with byte fallback: every <0xNN> piece, merges by score
    "bpe_bytes": spm_model(
        SPECIALS + [(f"<0x{b:02X}>", 0.0, BYTE) for b in range(256)]
        + [(w, -1.0 - i, NORMAL) for i, w in enumerate(["\u2581t", "he", "\u2581the", "in", "ing", "\u2581H", "aus"])]
        + [(c, -20.0 - i, NORMAL) for i, c in enumerate(LETTERS)], bpe=True, byte_fallback=True),
    # whitespace as a suffix, spaces not escaped, no dummy prefix, extra spaces kept, own unk surface
    "unigram_suffix_noescape": spm_model(
        SPECIALS + [(w, -2.0 - i, NORMAL) for i, w in enumerate(["the ", "Haus ", "is ", " ", "  "])]
        + [(c, -6.0 - i / 8, NORMAL) for i, c in enumerate(LETTERS[1:])],
        suffix=True, escape=False, dummy_prefix=False, remove_spaces=False, unk_surface="<?>"),
}


def trained_spm_models(work):
    """spm_train's own output with a small charsmap (a custom normalization rule table:
    full-width letters, a ligature, a circled digit, the ideographic space), unigram with
    byte fallback and a user-defined symbol, and BPE; {} without Debian's sentencepiece."""
    if not shutil.which("spm_train"):
        print("sentencepiece (spm_train) not installed: no trained .spm seeds for fuzz_spm_model")
        return {}
    rng = random.Random(97)
    words = ["the", "house", "is", "small", "Haus", "klein", "ist", "das", "\uff21\uff22", "\ufb01le", "\u2460", "data"]
    with open(os.path.join(work, "train.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(" ".join(rng.choice(words) for _ in range(6)) for _ in range(300)) + "\n")
    with open(os.path.join(work, "rules.tsv"), "w") as f:
        f.write("FF21\t41\nFF22\t42\nFB01\t66 69\n2460\t31\n3000\t20\n")
    models = {}
    # Relative paths: the trainer spec records them, and the bytes must not depend on the directory.
    for name, flags in (("trained_unigram_rules_bytes", ["--vocab_size=300", "--byte_fallback=true",
                                                         "--user_defined_symbols=>>fra<<"]),
                        ("trained_bpe_rules", ["--model_type=bpe", "--vocab_size=60"])):
        subprocess.run(["spm_train", "--input=train.txt", "--model_prefix=" + name, "--normalization_rule_tsv=rules.tsv",
                        "--num_threads=1", "--hard_vocab_limit=false", "--minloglevel=2"] + flags,
                       cwd=work, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(work, name + ".model"), "rb") as f:
            models[name] = f.read()
    return models


def spm_pieces(model):
    """The piece strings of a ModelProto written by spm_model (field 1, field 1 inside)."""
    pieces, at = [], 0

    def varint():
        nonlocal at
        value, shift = 0, 0
        while True:
            byte = model[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while at < len(model):
        tag = varint()
        length = varint()
        body = model[at:at + length]
        at += length
        if tag == (1 << 3 | 2):
            assert body[0] == 0x0A
            pieces.append(body[2:2 + body[1]].decode())
    return pieces


# Opus-mt-shaped checkpoints (source.spm, target.spm, vocab.json [+ target_vocab.json,
# tokenizer_config.json]) converted by petrel-convert: model files with a Marian tokenizer.
MARIAN_VARIANTS = {
    # one vocabulary: every piece of both models, unigram source, BPE target with byte fallback
    "marian_shared": ("unigram_udf_unused", "bpe_bytes", False, None),
    # separate target vocabulary, no clean-up, the source vocabulary lacking two pieces (<unk> for them)
    "marian_separate": ("unigram_suffix_noescape", "unigram_udf_unused", True,
                        {"clean_up_tokenization_spaces": False}),
}


def marian_seeds(convert, work):
    rng = random.Random(1613)
    for name, (source, target, separate, tokenizer_config) in MARIAN_VARIANTS.items():
        ckpt = os.path.join(work, name)
        os.makedirs(ckpt)
        source_pieces, target_pieces = spm_pieces(SPM_MODELS[source]), spm_pieces(SPM_MODELS[target])
        if separate:
            vocab = [p for p in source_pieces if p not in ("Haus ", "z")] + ["<pad>"]
            target_vocab = target_pieces + ["<pad>"]
        else:
            vocab = source_pieces + [p for p in target_pieces if p not in source_pieces] + ["<pad>"]
            target_vocab = vocab
        overrides = {"vocab_size": len(vocab), "decoder_vocab_size": len(target_vocab),
                     "pad_token_id": len(target_vocab) - 1, "decoder_start_token_id": len(target_vocab) - 1,
                     "eos_token_id": target_vocab.index("</s>"), "bad_words_ids": [[len(target_vocab) - 1]]}
        if separate:
            overrides.update(tie_word_embeddings=False, share_encoder_decoder_embeddings=False)
        files = {"config.json": json.dumps(config(**overrides), indent=1),
                 "vocab.json": json.dumps({t: i for i, t in enumerate(vocab)}, indent=1, ensure_ascii=False)}
        if separate:
            files["target_vocab.json"] = json.dumps({t: i for i, t in enumerate(target_vocab)}, indent=1,
                                                    ensure_ascii=False)
        if tokenizer_config is not None:
            files["tokenizer_config.json"] = json.dumps(tokenizer_config)
        for file, text in files.items():
            with open(os.path.join(ckpt, file), "w", encoding="utf-8") as f:
                f.write(text)
        for file, model in (("source.spm", SPM_MODELS[source]), ("target.spm", SPM_MODELS[target])):
            with open(os.path.join(ckpt, file), "wb") as f:
                f.write(model)
        tensors = checkpoint(rng, shared=not separate, tied=not separate, pre_ln=False, learned=False,
                             target_vocab=len(target_vocab), vocab=len(vocab))
        with open(os.path.join(ckpt, "model.safetensors"), "wb") as f:
            f.write(safetensors(tensors, lambda _: "F32"))
        out = os.path.join(work, name + ".petrel")
        subprocess.run([convert, ckpt, "-o", out, "--quiet"], check=True)
        with open(out, "rb") as f:
            write("fuzz_model_file", name + ".petrel", f.read())
        write("fuzz_checkpoint_json", name + ".json", json_input(files))


# Decoder-only language models (format 1.7): the oracle fixtures of
# tools/reference/make_decoder_only_fixtures.py converted, each kind of layer (sliding
# windows, q/k norms, biases, soft cap, GQA) at int8 or int4, and their config.json /
# generation_config.json for the converter's checks.
LM_SEEDS = {"gemma3_f32": "int8", "gemma3_bf16": "int4", "llama3": "int8", "qwen2": "int4", "qwen3": "f16"}


# fuzz_convert_lm's recipes (its first 13 bytes, see fuzz_convert_lm.cpp), then weight bytes:
# each family, tied and not, GQA, sliding windows, soft cap, RoPE scalings, int4/int8/f16.
LM_RECIPES = {
    "gemma_sliding_softcap_int4": [0 | 4 | 8, 47, 3, 2, 7, 0x82, 33, 50, 30, 5 | 64, 3 | 8, 30, 2 | 16],
    "gemma_types_f16": [0, 9, 1, 0, 2, 2 | 0x80 | 8, 5, 9, 7, 2, 1 | 4, 36, 3],
    "llama3_untied_int8": [1 | 16, 64, 5, 1, 11, 1, 70, 61, 39, 128 + 3, 2 | 8, 40, 6],
    "qwen2_bias_tied": [2 | 4, 17, 2, 1, 3, 3 | 0x80, 17, 13, 12, 1, 2, 39, 0],
    "qwen3_qk_norm_odd_sizes": [3, 1, 3, 0, 0, 0, 1, 2, 1, 0, 0, 41, 2 | 4],
    "odd_head_dim_refused": [1, 30, 2, 0, 0x80 | 4, 0, 10, 10, 10, 0, 0, 40, 0],
}


def lm_seeds(convert, work):
    for name, dtype in LM_SEEDS.items():
        ckpt = os.path.join(ROOT, "tests", "fixtures", "decoder_only", name)
        out = os.path.join(work, "lm-" + name + ".petrel")
        subprocess.run([convert, ckpt, "-o", out, "--quiet", "--quantize", dtype, "--embeddings", dtype], check=True)
        with open(out, "rb") as f:
            write("fuzz_model_file", "lm-" + name + ".petrel", f.read())
        files = {}
        for f in ("config.json", "generation_config.json"):
            with open(os.path.join(ckpt, f), encoding="utf-8") as text:
                files[f] = text.read()
        write("fuzz_checkpoint_json", "lm-" + name + ".json", json_input(files))


# fuzz_text's inputs: a control byte (bit 0 model, bit 1 beam, bit 2 streamed text,
# bit 3 sentence splitting), then the text.
TEXTS = {
    "plain": (0, "Open the file."),
    "sentences_split": (8 | 1, "Dr. Smith went to the U.S. yesterday. It rained! Did it? \u00abYes.\u00bb Version 2.0 is out."),
    "language_code_beam": (2, ">>fra<< Save the document </s> before closing"),
    "scripts_streamed": (4 | 1, "Gr\u00fc\u00dfe \u6570\u636e\u3002\u6d4b\u8bd5\uff01 \u041f\u0440\u0438\u0432\u0435\u0442 "
                                "\u0928\u092e\u0938\u094d\u0924\u0947\u0964 \u0645\u0631\u062d\u0628\u0627\u061f"),
    "rewritten_chars": (1 | 2 | 4, "\uff21\uff22\uff23 \ufb01le \u2460\u3000x\u200b \u2581 \u00a0tab\there"),
    "empty": (8, ""),
    "blank_split": (8 | 1, "   \n\t  "),
    "long_paragraph_split": (8 | 2, " ".join(["The quick brown fox jumps over the lazy dog."] * 40)),
    "long_paragraph": (1, " ".join(["Ein sehr langer Satz ohne Ende und ohne Punkt"] * 30)),
}
BROKEN_TEXTS = {  # bytes that are no UTF-8
    "broken_utf8": (4 | 8, b"caf\xc3 \xff\xfe \xed\xa0\x80 ok. Next \xe2\x96 one."),
    "nul_bytes": (1 | 2, b"a\x00b </s>\x00<unk> <pad>"),
}


def text_seeds():
    for name, (control, text) in TEXTS.items():
        write("fuzz_text", name + ".txt", bytes([control]) + text.encode())
    for name, (control, data) in BROKEN_TEXTS.items():
        write("fuzz_text", name + ".txt", bytes([control]) + data)
    # Real messages (the en-de test split), one per model and option set.
    with open(os.path.join(ROOT, "tests", "fixtures", "en-de", "test.en"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f][:16]
    for i, line in enumerate(lines):
        write("fuzz_text", f"en_de_test_{i:02}.txt", bytes([i]) + line.encode())


# Reproducers of fixed findings (regress-*), written by
#     /usr/bin/python3 tests/fuzz/make_corpora.py --regressions
# and kept when the seeds are rewritten; each stays under ~1 MB.
def regressions():
    return {
        # Two pieces sharing a 499,000-byte prefix: the trie's sort recursed once per 8
        # shared bytes and overflowed the stack (SIGSEGV); now the reader refuses pieces
        # over kMaxPieceBytes and the sort is iterative.
        ("fuzz_spm_model", "long_shared_prefix.spm"): spm_model(
            [("<unk>", 0.0, UNKNOWN), ("a" * 499000 + "b", -1.0, NORMAL), ("a" * 499000 + "c", -1.0, NORMAL)]),
        # BPE with UNUSED pieces: the model's own text "<unk><unk>xyQ xy" (fuzz_spm_model
        # encodes its pieces joined) split the first "xy" at the last one's bytes and
        # merged unknown pieces as if adjacent, reading past the normalized text.
        ("fuzz_spm_model", "bpe_unused_split.spm"): spm_model(
            [("<unk>", 0.0, UNKNOWN)] + [(c, -3.0, NORMAL) for c in "<unk>"]
            + [("xy", -1.0, UNUSED), ("Q\u2581xy", -2.0, UNUSED), ("\u2581", -1.0, NORMAL)], bpe=True),
        # A line of '>' (control byte 0: model 0, no options): MarianTokenizer's
        # ">>.+<<" search rescanned the line for every ">>" (7.2 s at 160,000 bytes).
        ("fuzz_text", "gt_run.txt"): b"\x00" + b">" * 1000000,
        # Sentence splitting (control byte 8) of periods each followed by EM SPACE and a
        # capital: the word before each period was scanned back to an ASCII space.
        ("fuzz_text", "periods_em_space.txt"): b"\x08" + "Ab.\u2003".encode() * 50000 + b"End",
        # A piece longer than kMaxPieceBytes inside a model file: refused at load.
        ("fuzz_model_file", "long_piece.petrel"): stretched_piece_model(),
    }


def stretched_piece_model():
    """seed-marian_shared.petrel with the length of its SentencePiece piece "▁unused"
    stretched over the metadata that follows, up to a NUL past kMaxPieceBytes (4096):
    a piece the loader must refuse by name (the FlatBuffers verifier accepts it)."""
    with open(os.path.join(CORPUS, "fuzz_model_file", "seed-marian_shared.petrel"), "rb") as f:
        data = bytearray(f.read())
    end = 4 + struct.unpack("<I", data[:4])[0]
    piece = "\u2581unused".encode()
    entry = struct.pack("<I", len(piece)) + piece + b"\0"
    if entry not in data:
        # Since format 1.6 the converter stores a tokenizer's strings as spans of one blob:
        # the committed regress-long_piece.petrel was made from a [string] table (<= 1.5).
        sys.exit("stretched_piece_model: the seed holds no [string] piece table (format >= 1.6); "
                 "keep the committed regress-long_piece.petrel")
    at = data.index(entry) + 4
    length = next(n for n in range(4097, end - at) if data[at + n] == 0)
    data[at - 4:at] = struct.pack("<I", length)
    return bytes(data)


def write_regressions():
    for (target, name), data in regressions().items():
        with open(os.path.join(CORPUS, target, "regress-" + name), "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())


def write(target, name, data):
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    if sys.argv[1:] == ["--regressions"]:
        write_regressions()
        return
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
        marian_seeds(convert, work)
        lm_seeds(convert, work)
        lm_rng = random.Random(2811)
        for name, recipe in LM_RECIPES.items():
            write("fuzz_convert_lm", name + ".recipe", bytes(recipe) + bytes(lm_rng.randrange(256) for _ in range(4096)))
        for name, model in list(SPM_MODELS.items()) + list(trained_spm_models(work).items()):
            write("fuzz_spm_model", name + ".spm", model)
        text_seeds()
        for name, recipe in CONVERT_RECIPES.items():
            write("fuzz_convert", name + ".recipe", bytes(recipe) + bytes(rng.randrange(256) for _ in range(2048)))
        # The oracle fixtures' JSON files as they are committed (generation_eos5 has all three kinds).
        for fixture in ("post_swish_concat_tied", "generation_eos5", "m2m100_tiny", "mbart50_tiny", "nllb_d1024"):
            d = os.path.join(ROOT, "tests", "fixtures", "oracle", fixture)
            files = {}
            for f in ("config.json", "generation_config.json", "vocab.json", "tokenizer_config.json"):
                if os.path.exists(os.path.join(d, f)):
                    with open(os.path.join(d, f), encoding="utf-8") as text:
                        files[f] = text.read()
            write("fuzz_checkpoint_json", "oracle_" + fixture + ".json", json_input(files))
            if fixture in ("m2m100_tiny", "mbart50_tiny"):  # the families' model files (int8)
                out = os.path.join(work, fixture + ".petrel")
                subprocess.run([convert, d, "-o", out, "--quiet"], check=True)
                with open(out, "rb") as f:
                    write("fuzz_model_file", "oracle_" + fixture + ".petrel", f.read())
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
