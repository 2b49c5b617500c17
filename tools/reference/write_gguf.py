#!/usr/bin/env python3
"""Converts a Hugging Face Gemma 3 text checkpoint (gemma3_text / Gemma3ForCausalLM, one
model.safetensors, bf16/f16/f32) to GGUF for llama.cpp's `gemma3` loader, then
optionally quantises it with llama.cpp's own `llama-quantize`.

    PYTHONPATH=/work/llama.cpp-src/gguf-py /usr/bin/python3 tools/reference/write_gguf.py \\
        /work/lm-standins/gemma-3-270m /work/lm-standins/gemma-3-270m/gguf \\
        --quantize /work/llama.cpp-build/bin/llama-quantize --types Q8_0 Q4_0 Q4_0-pure

writes OUT/model-BF16.gguf (or F16 with --outtype f16) and OUT/model-<TYPE>.gguf per type.
"Q4_0" is llama-quantize's default Q4_0 mix, "Q4_0-pure" is `llama-quantize --pure`
(every 2-D tensor Q4_0; see below).

Why not llama.cpp's convert_hf_to_gguf.py: it needs a real tokenizer.model and the
transformers package (not installable here). This script does what its Gemma3Model class
does (qualcomm/llama.cpp @ 10e97801, convert_hf_to_gguf.py:5745) and nothing else:
  * the same metadata keys (set_gguf_parameters): context_length, embedding_length,
    block_count, feed_forward_length, head_count(_kv), layer_norm_rms_epsilon,
    key_length/value_length = head_dim, rope.freq_base = rope_theta (global layers),
    attention.sliding_window, rope scaling (linear only), file_type;
  * the same tensor names, through gguf-py's own TensorNameMap for MODEL_ARCH.GEMMA3;
  * +1 added to every tensor whose name ends in "norm.weight" (Gemma3RMSNorm's (1 + w)),
    computed in f32 and stored as F32, as the converter does for bf16 checkpoints (it
    upcasts non-f16/f32 data first, and keeps 1-D tensors in F32);
  * no lm_head (tied: llama.cpp duplicates token_embd), no folding of sqrt(hidden) into
    token_embd (the gemma3 graph multiplies by sqrtf(n_embd) in f32 at run time);
  * query_pre_attn_scalar, layer_types and rope_local_base_freq are not stored: the loader
    hard-codes 1/sqrt(head_dim), a pattern of 6 and 10000 (checked here: must agree).
The tokenizer is synthetic (there is no real tokenizer.model): a SentencePiece-style
("llama") vocabulary of vocab_size unique pieces with scores and types -- <pad>=0, <eos>=1,
<bos>=2, <unk>=3, <mask>=4 as in Gemma, the 256 byte pieces <0x00>..<0xFF> (llama-vocab
looks up <0x0A> for the newline token), then "▁" + letters, and base-26 letter strings with
and without a leading "▁", scores falling with the id. It tokenises any text (byte fallback)
but into meaningless ids; good enough for speed benchmarks, not for text.

BF16 output: the safetensors bf16 bits are memory-mapped and written as they are.
Needs numpy and the llama.cpp snapshot's gguf-py on PYTHONPATH.
"""
import argparse
import json
import os
import string
import subprocess
import sys

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("write_gguf.py: put llama.cpp's gguf-py on PYTHONPATH (e.g. /work/llama.cpp-src/gguf-py)")

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
    T = gguf.TokenType
    pieces = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
    types = [T.CONTROL, T.CONTROL, T.CONTROL, T.UNKNOWN, T.CONTROL]
    pieces += [f"<0x{b:02X}>" for b in range(256)]
    types += [T.BYTE] * 256
    seen = set(pieces)

    def add(p):
        if len(pieces) < n and p not in seen:
            seen.add(p)
            pieces.append(p)
            types.append(T.NORMAL)

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


def write_float_gguf(src, out_path, outtype):
    cfg = json.load(open(os.path.join(src, "config.json")))
    if cfg.get("model_type") != "gemma3_text":
        sys.exit(f"write_gguf.py: model_type {cfg.get('model_type')!r}, expected gemma3_text")
    check_llama_cpp_assumptions(cfg)
    tensors = read_safetensors(os.path.join(src, "model.safetensors"))
    n_layer = cfg["num_hidden_layers"]
    hd = cfg.get("head_dim", 256)
    arch = gguf.MODEL_ARCH.GEMMA3
    ftype = {"bf16": gguf.LlamaFileType.MOSTLY_BF16, "f16": gguf.LlamaFileType.MOSTLY_F16}[outtype]

    tmp = out_path + ".tmp"
    w = gguf.GGUFWriter(tmp, gguf.MODEL_ARCH_NAMES[arch])
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(os.path.basename(os.path.normpath(src)) + " (random-weight stand-in)")
    w.add_context_length(cfg.get("max_position_embeddings", 131072))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n_layer)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg.get("num_attention_heads", 8))
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-6))
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_file_type(ftype)
    w.add_rope_freq_base(cfg.get("rope_theta", 1_000_000.0))
    w.add_sliding_window(cfg["sliding_window"])
    w.add_head_count_kv(cfg.get("num_key_value_heads", 4))
    if cfg.get("rope_scaling") is not None:
        assert cfg["rope_scaling"]["rope_type"] == "linear"
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(cfg["rope_scaling"]["factor"])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    pieces, scores, types = synthetic_vocab(cfg["vocab_size"])
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(cfg.get("bos_token_id", 2))
    eos = cfg.get("eos_token_id", 1)
    w.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)
    w.add_unk_token_id(3)
    w.add_pad_token_id(cfg.get("pad_token_id", 0))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)

    names = gguf.get_tensor_name_map(arch, n_layer)
    for name, (dtype, shape, arr) in tensors.items():
        if name == "lm_head.weight":
            sys.exit("write_gguf.py: lm_head.weight present; this script handles tied checkpoints only")
        hf = name.replace("language_model.", "")
        if hf == "model.embed_tokens.weight" and shape[0] != cfg["vocab_size"]:
            sys.exit("write_gguf.py: embedding rows != vocab_size")
        new = names.get_name(hf, try_suffixes=(".weight", ".bias"))
        if new is None:
            sys.exit(f"write_gguf.py: no GGUF name for {name}")
        if name.endswith("norm.weight"):
            w.add_tensor(new, to_f32(dtype, arr) + np.float32(1.0))
        elif len(shape) == 1:
            w.add_tensor(new, to_f32(dtype, arr))
        elif outtype == "bf16" and dtype == "BF16":
            w.add_tensor(new, arr, raw_dtype=gguf.GGMLQuantizationType.BF16)
        elif outtype == "bf16":
            w.add_tensor(new, gguf.quants.quantize(to_f32(dtype, arr), gguf.GGMLQuantizationType.BF16),
                         raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(new, to_f32(dtype, arr).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    os.replace(tmp, out_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("out_dir")
    ap.add_argument("--outtype", choices=["bf16", "f16"], default="bf16")
    ap.add_argument("--quantize", metavar="LLAMA_QUANTIZE", help="path of llama.cpp's llama-quantize")
    ap.add_argument("--types", nargs="*", default=["Q8_0", "Q4_0"],
                    help="llama-quantize types; append -pure for --pure (default: Q8_0 Q4_0)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    base = os.path.join(a.out_dir, f"model-{a.outtype.upper()}.gguf")
    write_float_gguf(a.checkpoint, base, a.outtype)
    print(f"{base}: {os.path.getsize(base) / 2**20:.1f} MiB", file=sys.stderr)
    if a.quantize:
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
