#!/usr/bin/env python3
"""Converts a Hugging Face Gemma 3 text checkpoint (gemma3_text / Gemma3ForCausalLM, one
model.safetensors, bf16/f16/f32) to GGUF for llama.cpp's `gemma3` loader, with the GGUF
writer of tools/reference/gguf_file.py (numpy only: llama.cpp's gguf-py is not needed), then
optionally quantises it further with llama.cpp's own `llama-quantize`.

    /usr/bin/python3 tools/reference/write_gguf.py \\
        /work/lm-standins/gemma-3-270m /work/lm-standins/gemma-3-270m/gguf --outtype bf16 q8_0 \\
        [--quantize /work/llama.cpp-build/bin/llama-quantize --types Q4_0 Q4_0-pure]

writes OUT/model-<OUTTYPE>.gguf per --outtype (BF16, F16, F32, Q8_0: every 2-D tensor in that
type, 1-D tensors F32 -- for Q8_0 what `llama-quantize ... Q8_0` makes) and, with
--quantize, OUT/model-<TYPE>.gguf per --types from the first --outtype. "Q4_0" is
llama-quantize's default Q4_0 mix, "Q4_0-pure" is `llama-quantize --pure` (every 2-D
tensor Q4_0).

Why not llama.cpp's convert_hf_to_gguf.py: it needs a SentencePiece tokenizer.model and the
transformers package (not installable here). This script does what its Gemma3Model class
does (convert_hf_to_gguf.py, class Gemma3Model) and nothing else:
  * the same metadata keys (set_gguf_parameters): context_length, embedding_length,
    block_count, feed_forward_length, head_count(_kv), layer_norm_rms_epsilon,
    key_length/value_length = head_dim, rope.freq_base = rope_theta (global layers),
    attention.sliding_window, rope scaling (linear only), file_type;
  * the same tensor names (gguf-py's TensorNameMap for MODEL_ARCH.GEMMA3, written out in
    GGUF_NAMES below as llama.cpp's src/llama-arch.cpp spells them);
  * +1 added to every tensor whose name ends in "norm.weight" (Gemma3RMSNorm's (1 + w)),
    computed in f32 and stored as F32 (the converter keeps 1-D tensors in F32);
  * no lm_head (tied: llama.cpp duplicates token_embd), no folding of sqrt(hidden) into
    token_embd (the gemma3 graph multiplies by sqrtf(n_embd) in f32 at run time);
  * query_pre_attn_scalar, layer_types and rope_local_base_freq are not stored: the loader
    hard-codes 1/sqrt(head_dim), a pattern of 6 and 10000 (checked here: must agree).

The tokenizer. With tokenizer.json and tokenizer_config.json in the checkpoint directory
(Hugging Face's Gemma 3 tokenizer: a BPE model over SentencePiece pieces with byte
fallback), it is written as llama.cpp's SentencePiece ("llama") vocabulary the way
_set_vocab_sentencepiece + SpecialVocab would write it from the real tokenizer.model:
  * pieces by id as they are ("\u2581" for the space), <0xXX> byte pieces typed BYTE,
    <pad>/<eos>/<bos> CONTROL, <unk> UNKNOWN, everything else NORMAL;
  * a piece's score: minus the rank of the first merge that makes it (0 for pieces no merge
    makes). llama.cpp's SPM tokenizer merges the adjacent pair whose concatenation has the
    highest score; the Hugging Face merges list was made from tokenizer.model's scores
    (every split of a piece, ranked by the piece's score), so both orders agree;
  * tokenizer_config.json's added_tokens_decoder overrides type and score as the converter
    does: special (or "<unused..>", "<mask>", "<|..|>") -> CONTROL, else USER_DEFINED with
    "\u2581" turned back into spaces; score -1000;
  * bos/eos/unk/pad ids, add_bos_token/add_eos_token and chat_template from
    tokenizer_config.json; add_space_prefix false (Gemma3Model.set_vocab).
Without tokenizer.json the vocabulary is synthetic: a SentencePiece-style vocabulary of
vocab_size unique pieces with scores and types -- <pad>=0, <eos>=1, <bos>=2, <unk>=3, <mask>=4
as in Gemma, the 256 byte pieces <0x00>..<0xFF> (llama-vocab looks up <0x0A> for the newline
token), then "\u2581" + letters, and base-26 letter strings with and without a leading
"\u2581", scores falling with the id. It tokenises any text (byte fallback) but into
meaningless ids; good enough for speed benchmarks, not for text.

BF16 output of a bf16 checkpoint: the safetensors bits are memory-mapped and written as they
are. Needs numpy only.
"""
import argparse
import json
import os
import string
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_file as gf  # noqa: E402

ST_DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}


def read_safetensors(path):
    """name -> (dtype string, shape, memmap of the raw data)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = ST_DTYPES[info["dtype"]]
        start, end = info["data_offsets"]
        count = (end - start) // np.dtype(dt).itemsize
        arr = np.memmap(path, dtype=dt, mode="r", offset=base + start, shape=(count,))
        out[name] = (info["dtype"], tuple(info["shape"]), arr.reshape(info["shape"]))
    return out


def to_f32(dtype, arr):
    if dtype == "BF16":
        return (np.asarray(arr, dtype=np.uint32) << 16).view(np.float32)
    return np.asarray(arr, dtype=np.float32)


def synthetic_vocab(n):
    """(pieces, scores, types): unique SentencePiece-style pieces, ids as in Gemma for the
    specials (pad 0, eos 1, bos 2, unk 3, mask 4)."""
    pieces = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
    types = [gf.TOKEN_CONTROL, gf.TOKEN_CONTROL, gf.TOKEN_CONTROL, gf.TOKEN_UNKNOWN, gf.TOKEN_CONTROL]
    pieces += [f"<0x{b:02X}>" for b in range(256)]
    types += [gf.TOKEN_BYTE] * 256
    seen = set(pieces)

    def add(p):
        if len(pieces) < n and p not in seen:
            seen.add(p)
            pieces.append(p)
            types.append(gf.TOKEN_NORMAL)

    add("\u2581")
    for c in string.printable.strip():
        add(c)
        add("\u2581" + c)
    letters = string.ascii_lowercase
    length = 2
    while len(pieces) < n:
        # all base-26 strings of this length, with and without the word-start marker
        idx = [0] * length
        while len(pieces) < n:
            w = "".join(letters[i] for i in idx)
            add("\u2581" + w)
            add(w)
            k = length - 1
            while k >= 0 and idx[k] == 25:
                idx[k] = 0
                k -= 1
            if k < 0:
                break
            idx[k] += 1
        length += 1
    assert len(pieces) == n and len(set(pieces)) == n
    scores = [0.0] * 261 + [-float(i) for i in range(n - 261)]
    return pieces, scores, [int(t) for t in types]


def looks_special(token):
    """convert_hf_to_gguf.py's does_token_look_special: added tokens some models (Gemma among
    them) leave unmarked that ought to be control tokens."""
    return (token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (token.startswith("<|") and token.endswith("|>"))
            or (token.startswith("<\uff5c") and token.endswith("\uff5c>"))
            or (token.startswith("<unused") and token.endswith(">")))


def hf_sentencepiece_vocab(src, n_vocab):
    """The tokenizer of tokenizer.json + tokenizer_config.json as the SentencePiece vocabulary
    convert_hf_to_gguf.py writes from tokenizer.model (see the module docstring):
    (pieces, scores, types, special ids and flags)."""
    tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    tcfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
    model = tok["model"]
    if model.get("type") != "BPE" or not model.get("byte_fallback"):
        sys.exit("write_gguf.py: tokenizer.json is not a byte-fallback BPE model (Gemma's)")
    vocab = model["vocab"]
    if len(vocab) != n_vocab or sorted(vocab.values()) != list(range(n_vocab)):
        sys.exit(f"write_gguf.py: tokenizer.json's vocab holds {len(vocab)} ids, config.json's vocab_size is {n_vocab}")
    pieces = [""] * n_vocab
    for piece, i in vocab.items():
        pieces[i] = piece
    first_merge = {}
    for rank, merge in enumerate(model["merges"]):
        a, b = merge.split(" ", 1) if isinstance(merge, str) else merge
        first_merge.setdefault(a + b, rank)
    scores = [-float(first_merge.get(p, 0)) for p in pieces]
    types = []
    for p in pieces:
        if len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            types.append(gf.TOKEN_BYTE)
        elif p in ("<pad>", "<eos>", "<bos>"):
            types.append(gf.TOKEN_CONTROL)
        elif p == "<unk>":
            types.append(gf.TOKEN_UNKNOWN)
        else:
            types.append(gf.TOKEN_NORMAL)
    for key, data in tcfg.get("added_tokens_decoder", {}).items():
        i = int(key)
        if i >= n_vocab:  # e.g. <image_soft_token> = 262144, past the text model's vocabulary
            continue
        content = data["content"]
        if data.get("special") or looks_special(content):
            types[i] = gf.TOKEN_CONTROL
        else:
            content = content.replace("\u2581", " ")  # the converter pre-normalises user-defined spaces
            types[i] = gf.TOKEN_USER_DEFINED
        scores[i] = -1000.0
        pieces[i] = content

    def token_id(name):
        t = tcfg.get(name)
        if isinstance(t, dict):
            t = t.get("content")
        return vocab.get(t) if t is not None else None

    special = {k: token_id(k + "_token") for k in ("bos", "eos", "unk", "pad")}
    special["add_bos"] = bool(tcfg.get("add_bos_token", True))
    special["add_eos"] = bool(tcfg.get("add_eos_token", False))
    special["chat_template"] = tcfg.get("chat_template")
    return pieces, scores, types, special


def check_llama_cpp_assumptions(cfg):
    """llama.cpp's gemma3 loader ignores these keys and hard-codes their values
    (src/llama-model.cpp load_hparams); refuse a checkpoint it would run differently."""
    problems = []
    hd = cfg.get("head_dim", 256)
    if cfg.get("query_pre_attn_scalar", hd) != hd:
        problems.append(f"query_pre_attn_scalar {cfg['query_pre_attn_scalar']} != head_dim {hd}")
    if cfg.get("rope_local_base_freq", 10000.0) != 10000.0:
        problems.append("rope_local_base_freq != 10000")
    lt = cfg.get("layer_types")
    if lt is not None:
        want = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(len(lt))]
        if lt != want:
            problems.append("layer_types is not 'every 6th layer full'")
    if cfg.get("attn_logit_softcapping") is not None:
        problems.append("attn_logit_softcapping is set")
    if cfg.get("hidden_activation", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
        problems.append("hidden_activation is not gelu_pytorch_tanh")
    if not cfg.get("tie_word_embeddings", True):
        problems.append("untied lm_head (not handled by this script)")
    if problems:
        sys.exit("write_gguf.py: llama.cpp would not compute what transformers does: " + "; ".join(problems))


# Hugging Face name (after "model.") -> GGUF name, as llama.cpp's LLM_TENSOR_NAMES for gemma3.
GGUF_NAMES = {
    "embed_tokens": "token_embd",
    "norm": "output_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_name(hf_name, n_layer):
    """model.layers.N.<x>.weight -> blk.N.<y>.weight; model.<x>.weight -> <y>.weight."""
    if not hf_name.startswith("model.") or not hf_name.endswith(".weight"):
        return None
    stem = hf_name[len("model."):-len(".weight")]
    if stem.startswith("layers."):
        _, layer, rest = stem.split(".", 2)
        if not layer.isdigit() or int(layer) >= n_layer or rest not in GGUF_NAMES or rest in ("embed_tokens", "norm"):
            return None
        return f"blk.{int(layer)}.{GGUF_NAMES[rest]}.weight"
    if stem in ("embed_tokens", "norm"):
        return GGUF_NAMES[stem] + ".weight"
    return None


def write_gguf(src, out_path, outtype):
    """One GGUF file: 2-D tensors as `outtype` (bf16, f16, f32, q8_0), 1-D tensors F32."""
    cfg = json.load(open(os.path.join(src, "config.json")))
    if cfg.get("model_type") != "gemma3_text":
        sys.exit(f"write_gguf.py: model_type {cfg.get('model_type')!r}, expected gemma3_text")
    check_llama_cpp_assumptions(cfg)
    tensors = read_safetensors(os.path.join(src, "model.safetensors"))
    n_layer = cfg["num_hidden_layers"]
    hd = cfg.get("head_dim", 256)
    gtype = outtype.upper()
    arch = "gemma3"

    w = gf.GGUFWriter(arch)
    w.add_string("general.type", "model")
    w.add_string("general.name", os.path.basename(os.path.normpath(src)) + " (random-weight stand-in)")
    w.add_uint32(f"{arch}.context_length", cfg.get("max_position_embeddings", 131072))
    w.add_uint32(f"{arch}.embedding_length", cfg["hidden_size"])
    w.add_uint32(f"{arch}.block_count", n_layer)
    w.add_uint32(f"{arch}.feed_forward_length", cfg["intermediate_size"])
    w.add_uint32(f"{arch}.attention.head_count", cfg.get("num_attention_heads", 8))
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", cfg.get("rms_norm_eps", 1e-6))
    w.add_uint32(f"{arch}.attention.key_length", hd)
    w.add_uint32(f"{arch}.attention.value_length", hd)
    w.add_uint32("general.file_type", gf.FILE_TYPES[gtype])
    w.add_float32(f"{arch}.rope.freq_base", cfg.get("rope_theta", 1_000_000.0))
    w.add_uint32(f"{arch}.attention.sliding_window", cfg["sliding_window"])
    w.add_uint32(f"{arch}.attention.head_count_kv", cfg.get("num_key_value_heads", 4))
    if cfg.get("rope_scaling") is not None:
        if cfg["rope_scaling"].get("rope_type") != "linear":
            sys.exit("write_gguf.py: only linear rope scaling is handled")
        w.add_string(f"{arch}.rope.scaling.type", "linear")
        w.add_float32(f"{arch}.rope.scaling.factor", cfg["rope_scaling"]["factor"])
    w.add_uint32("general.quantization_version", 2)

    n_vocab = cfg["vocab_size"]
    if os.path.isfile(os.path.join(src, "tokenizer.json")):
        pieces, scores, types, special = hf_sentencepiece_vocab(src, n_vocab)
    else:
        pieces, scores, types = synthetic_vocab(n_vocab)
        eos = cfg.get("eos_token_id", 1)
        special = {"bos": cfg.get("bos_token_id", 2), "eos": eos[0] if isinstance(eos, list) else eos,
                   "unk": 3, "pad": cfg.get("pad_token_id", 0), "add_bos": True, "add_eos": False,
                   "chat_template": None}
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_string("tokenizer.ggml.pre", "default")
    w.add_array("tokenizer.ggml.tokens", gf.STRING, pieces)
    w.add_array("tokenizer.ggml.scores", gf.FLOAT32, scores)
    w.add_array("tokenizer.ggml.token_type", gf.INT32, types)
    for key, gguf_key in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("unk", "unknown_token_id"),
                          ("pad", "padding_token_id")):
        if special.get(key) is not None:
            w.add_uint32(f"tokenizer.ggml.{gguf_key}", special[key])
    w.add_bool("tokenizer.ggml.add_bos_token", special["add_bos"])
    w.add_bool("tokenizer.ggml.add_eos_token", special["add_eos"])
    w.add_bool("tokenizer.ggml.add_space_prefix", False)
    if special.get("chat_template"):
        w.add_string("tokenizer.chat_template", special["chat_template"])

    for name, (dtype, shape, arr) in tensors.items():
        if name == "lm_head.weight":
            sys.exit("write_gguf.py: lm_head.weight present; this script handles tied checkpoints only")
        hf = name.replace("language_model.", "")
        if hf == "model.embed_tokens.weight" and shape[0] != n_vocab:
            sys.exit("write_gguf.py: embedding rows != vocab_size")
        new = gguf_name(hf, n_layer)
        if new is None:
            sys.exit(f"write_gguf.py: no GGUF name for {name}")
        if name.endswith("norm.weight"):
            w.add_tensor(new, shape, "F32", lambda d=dtype, a=arr: to_f32(d, a) + np.float32(1.0))
        elif len(shape) == 1 or gtype == "F32":
            w.add_tensor(new, shape, "F32", lambda d=dtype, a=arr: to_f32(d, a))
        elif gtype == "BF16":
            w.add_tensor(new, shape, "BF16",
                         lambda d=dtype, a=arr: np.asarray(a) if d == "BF16" else gf.f32_to_bf16_bits(to_f32(d, a)))
        elif gtype == "F16":
            w.add_tensor(new, shape, "F16", lambda d=dtype, a=arr: to_f32(d, a).astype(np.float16))
        else:
            w.add_tensor(new, shape, "Q8_0", lambda d=dtype, a=arr: quantize_rows_q8_0(to_f32_rows(d, a)))
    tmp = out_path + ".tmp"
    w.write(tmp)
    os.replace(tmp, out_path)


def to_f32_rows(dtype, arr, rows=8192):
    """A 2-D tensor as f32 row blocks: the 262,144 x 640 embedding is 0.7 GB in f32 at once."""
    for r in range(0, arr.shape[0], rows):
        yield to_f32(dtype, arr[r:r + rows])


def quantize_rows_q8_0(blocks):
    return b"".join(gf.quantize_q8_0(b).tobytes() for b in blocks)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("out_dir")
    ap.add_argument("--outtype", nargs="+", choices=["bf16", "f16", "f32", "q8_0"], default=["bf16"],
                    help="GGUF files written directly (default: bf16)")
    ap.add_argument("--quantize", metavar="LLAMA_QUANTIZE", help="path of llama.cpp's llama-quantize")
    ap.add_argument("--types", nargs="*", default=["Q8_0", "Q4_0"],
                    help="llama-quantize types, from the first --outtype; append -pure for --pure (default: Q8_0 Q4_0)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    written = []
    for t in a.outtype:
        path = os.path.join(a.out_dir, f"model-{t.upper()}.gguf")
        write_gguf(a.checkpoint, path, t)
        written.append(path)
        print(f"{path}: {os.path.getsize(path) / 2**20:.1f} MiB", file=sys.stderr)
    if a.quantize:
        base = written[0]
        for t in a.types:
            qtype, pure = (t[:-5], True) if t.endswith("-pure") else (t, False)
            out = os.path.join(a.out_dir, f"model-{t}.gguf")
            cmd = [a.quantize] + (["--pure"] if pure else []) + [base, out, qtype, str(a.threads)]
            print("+ " + " ".join(cmd), file=sys.stderr)
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            with open(out + ".quantize.log", "w") as f:
                f.write(r.stdout)
            if r.returncode != 0:
                sys.exit(f"write_gguf.py: llama-quantize failed ({r.returncode}), see {out}.quantize.log")
            print(f"{out}: {os.path.getsize(out) / 2**20:.1f} MiB", file=sys.stderr)


if __name__ == "__main__":
    main()
