#!/usr/bin/env python3
"""Trains a small Gemma-3-shaped language model ("target") and a much cheaper draft with the
same tokenizer, for speculative decoding of language models (issue #60 item 4), on real text
found on this machine, and writes both as Hugging Face Gemma 3 checkpoint directories that
petrel-convert reads.

    /usr/bin/python3 tools/reference/train_lm_pair.py STAGE [options]

Stages (each reads the previous stages' files in --work, default build/lm-pair):
  corpus    the text: the unique English msgids of the gettext catalogs (one document a
            catalog, a message a line), Debian's Python sources (/usr/lib/python3*/**/*.py)
            and the plain-text files under /usr/share/doc (not compressed, UTF-8, no markup
            extensions); files deduplicated by content, each at most 256 KiB; Python capped at
            --python-mib, docs at --doc-mib. Every 100th document is held out for validation.
            -> WORK/corpus.jsonl ({"source", "path", "text"} a line), WORK/spm_input.txt
  vocab     a SentencePiece BPE vocabulary of --vocab-size pieces in Gemma's conventions
            (lm_pair_tokenizer.py) trained by Debian's spm_train on --spm-sentences of the corpus'
            lines
            -> WORK/spm.model, WORK/tokenizer/{tokenizer.json,tokenizer_config.json}
  tokens    every document encoded by sentencepiece as <bos> ids <eos>, concatenated
            -> WORK/train.u16, WORK/val.u16 (uint16 ids)
  train     --model target|draft. The forward is tools/reference/decoder_only_reference.py's
            DecoderOnlyLM (imported; its weights are the trained parameters), so what is trained
            is exactly what the engine is checked against. Windows of --seq tokens drawn from
            train.u16 at offsets seeded by the step number, --batch windows a step, next-token
            cross entropy, AdamW (0.9, 0.95, weight decay 0.01 on matrices), linear warmup then
            inverse square root decay, gradient norm clipped at 1. Checkpoint
            WORK/<model>/checkpoint.pt every --save-minutes and at the end; the validation loss
            (32 fixed windows of val.u16) logged to WORK/<model>/log.tsv. Ends after
            --max-minutes; a later run resumes (same batches, optimizer state kept).
            The draft is trained on the same text (not distilled from the target).
  export    --model target|draft -> tools/lm-pair/<model>/: config.json, generation_config.json,
            model.safetensors (f16; config torch_dtype float16, so Gemma's embedding scale is the
            f16 rounding of sqrt(hidden), the value training used), tokenizer.json,
            tokenizer_config.json
  check     converts both with petrel-convert (the default int8 file, and an f32 one), runs
            greedy prompts with petrel-run and compares their ids with the reference's greedy
            ids (decoder_only_reference.greedy on the exported f16 weights), and compares
            petrel-run --tokenize with sentencepiece on --check-lines held-out lines
            -> WORK/check.json

Shapes (Gemma 3's layout: q/k norms, sandwich norms, gelu-tanh MLP, tied embeddings, sliding
layers with rope base 10k and global layers with 1M):
  target  hidden 384, 8 layers (layers 4 and 8 global, the rest sliding over 128 positions),
          6 query heads, 2 KV heads, head_dim 64, intermediate 1536
  draft   hidden 192, 2 layers (the second global), 3 query heads, 1 KV head, head_dim 64,
          intermediate 768

Speed: one thread (torch.set_num_threads(1)); run under `taskset -c N nice`. Debian's
python3-torch multiplies through the reference BLAS; OpenBLAS is much faster. Without
installing it system-wide (see train_firefox_student.py):
    cd build/lm-pair && apt-get download libopenblas0-pthread && dpkg-deb -x libopenblas0-pthread_*.deb openblas
    OPENBLAS_NUM_THREADS=1 LD_LIBRARY_PATH=build/lm-pair/openblas/usr/lib/x86_64-linux-gnu/openblas-pthread \\
        taskset -c 1 nice -n 19 /usr/bin/python3 tools/reference/train_lm_pair.py train --model target --max-minutes 60
Needs /usr/bin/python3 (torch, numpy, sentencepiece) and spm_train.
"""
import argparse
import glob
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import decoder_only_reference as ref  # noqa: E402
import gettext_catalogs  # noqa: E402
import lm_pair_tokenizer  # noqa: E402

MAX_FILE = 256 * 1024
DOC_SKIP_EXT = {".html", ".htm", ".xml", ".css", ".js", ".json", ".svg", ".png", ".jpg", ".gif", ".ico", ".pdf",
                ".py", ".pyc", ".c", ".h", ".sh", ".pl", ".el", ".tex", ".ps", ".eps", ".xpm", ".map", ".woff",
                ".ttf", ".zip", ".bz2", ".xz", ".gz", ".tgz", ".mo", ".po", ".pot", ".inv", ".txt.html"}
SHAPES = {
    "target": dict(hidden_size=384, num_hidden_layers=8, num_attention_heads=6, num_key_value_heads=2,
                   head_dim=64, intermediate_size=1536, global_every=4),
    "draft": dict(hidden_size=192, num_hidden_layers=2, num_attention_heads=3, num_key_value_heads=1,
                  head_dim=64, intermediate_size=768, global_every=2),
}
SLIDING_WINDOW = 128
MAX_POSITIONS = 2048
TRAIN = {"target": dict(lr=1e-3, warmup=100), "draft": dict(lr=2e-3, warmup=60)}


# --- corpus -------------------------------------------------------------------------

def text_of(path):
    """The file's text if it is UTF-8 text without control bytes other than tab, LF, CR, FF."""
    try:
        if os.path.islink(path) or not os.path.isfile(path) or os.path.getsize(path) > MAX_FILE:
            return None
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if any(c < 32 and c not in (9, 10, 12, 13) for c in raw):
        return None
    text = text.replace("\r\n", "\n").replace("\f", "\n").strip("\n")
    return text or None


def corpus_documents(python_cap, doc_cap):
    seen = set()

    def fresh(text):
        h = hashlib.sha1(text.encode()).digest()
        if h in seen:
            return False
        seen.add(h)
        return True

    # gettext: one document per catalog name, its unique English msgids (plurals too).
    by_domain, msg_seen = {}, set()
    for path, e in gettext_catalogs.messages(gettext_catalogs.catalogs()):
        domain = os.path.basename(path)
        for m in (e.msgid, e.msgid_plural):
            m = (m or "").strip()
            if m and m not in msg_seen:
                msg_seen.add(m)
                by_domain.setdefault(domain, []).append(m)
    for domain in sorted(by_domain):
        yield "gettext", domain, "\n".join(by_domain[domain])

    total = 0
    paths = sorted(set(glob.glob("/usr/lib/python3*/**/*.py", recursive=True)))
    for path in paths:
        text = text_of(path)
        if text and fresh(text):
            total += len(text.encode())
            if total > python_cap:
                break
            yield "python", path, text

    total = 0
    for path in sorted(glob.glob("/usr/share/doc/**", recursive=True)):
        name = os.path.basename(path).lower()
        if any(name.endswith(ext) for ext in DOC_SKIP_EXT):
            continue
        text = text_of(path)
        if text and len(text) > 200 and fresh(text):
            total += len(text.encode())
            if total > doc_cap:
                break
            yield "doc", path, text


def stage_corpus(a):
    os.makedirs(a.work, exist_ok=True)
    counts = {}
    with open(os.path.join(a.work, "corpus.jsonl"), "w", encoding="utf-8") as out, \
            open(os.path.join(a.work, "spm_input.txt"), "w", encoding="utf-8") as lines:
        for source, path, text in corpus_documents(a.python_mib << 20, a.doc_mib << 20):
            out.write(json.dumps({"source": source, "path": path, "text": text}, ensure_ascii=False) + "\n")
            c = counts.setdefault(source, [0, 0])
            c[0] += 1
            c[1] += len(text.encode())
            for line in text.split("\n"):
                if line.strip():
                    lines.write(line + "\n")
    with open(os.path.join(a.work, "corpus_stats.json"), "w") as f:
        json.dump({k: {"documents": v[0], "bytes": v[1]} for k, v in counts.items()}, f, indent=1)
    for k, v in counts.items():
        print(f"{k}: {v[0]} documents, {v[1] / 2**20:.1f} MiB", file=sys.stderr)


# --- vocabulary and tokens ----------------------------------------------------------

def stage_vocab(a):
    lm_pair_tokenizer.train(os.path.join(a.work, "spm_input.txt"), os.path.join(a.work, "spm"), a.vocab_size,
                            sentences=a.spm_sentences)
    sp = lm_pair_tokenizer.processor(os.path.join(a.work, "spm.model"))
    out = os.path.join(a.work, "tokenizer")
    os.makedirs(out, exist_ok=True)
    lm_pair_tokenizer.write(sp, out)
    print(f"{sp.get_piece_size()} pieces", file=sys.stderr)


def is_val(index):
    return index % 100 == 99


def stage_tokens(a):
    sp = lm_pair_tokenizer.processor(os.path.join(a.work, "spm.model"))
    parts = {"train": [], "val": []}
    with open(os.path.join(a.work, "corpus.jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            ids = [2] + sp.encode(json.loads(line)["text"]) + [1]
            parts["val" if is_val(i) else "train"].append(np.asarray(ids, dtype=np.uint16))
    for name, arrays in parts.items():
        data = np.concatenate(arrays)
        data.tofile(os.path.join(a.work, f"{name}.u16"))
        print(f"{name}: {len(arrays)} documents, {data.size} tokens", file=sys.stderr)


# --- the model ----------------------------------------------------------------------

def config_of(model, vocab_size):
    s = SHAPES[model]
    n = s["num_hidden_layers"]
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_size": s["hidden_size"],
        "intermediate_size": s["intermediate_size"],
        "num_hidden_layers": n,
        "num_attention_heads": s["num_attention_heads"],
        "num_key_value_heads": s["num_key_value_heads"],
        "head_dim": s["head_dim"],
        "query_pre_attn_scalar": s["head_dim"],
        "vocab_size": vocab_size,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": None,
        "sliding_window": SLIDING_WINDOW,
        "_sliding_window_pattern": s["global_every"],
        "layer_types": ["full_attention" if (i + 1) % s["global_every"] == 0 else "sliding_attention"
                        for i in range(n)],
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "hidden_activation": "gelu_pytorch_tanh",
        "tie_word_embeddings": True,
        "bos_token_id": 2,
        "eos_token_id": 1,
        "pad_token_id": 0,
        "torch_dtype": "float16",
        "initializer_range": 0.02,
        "use_cache": True,
    }


def generation_config():
    return {"bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0, "do_sample": False, "max_length": 512}


def init_state(cfg, seed):
    """{HF name: float32 Parameter}: matrices N(0, 0.02^2) (the output projections of each
    residual branch divided by sqrt(2 layers), as GPT-2 does), RMSNorm weights 0 (gain 1+w)."""
    g = torch.Generator().manual_seed(seed)
    d, f, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    n = cfg["num_hidden_layers"]
    shapes = {"model.embed_tokens.weight": (cfg["vocab_size"], d), "model.norm.weight": (d,)}
    for i in range(n):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,),
            p + "pre_feedforward_layernorm.weight": (d,), p + "post_feedforward_layernorm.weight": (d,),
            p + "self_attn.q_proj.weight": (q, d), p + "self_attn.k_proj.weight": (kv, d),
            p + "self_attn.v_proj.weight": (kv, d), p + "self_attn.o_proj.weight": (d, q),
            p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
            p + "mlp.gate_proj.weight": (f, d), p + "mlp.up_proj.weight": (f, d), p + "mlp.down_proj.weight": (d, f),
        })
    state = {}
    for name in sorted(shapes):
        shape = shapes[name]
        if len(shape) == 1:
            t = torch.zeros(shape)
        else:
            std = 0.02 / math.sqrt(2 * n) if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
            t = torch.randn(shape, generator=g) * std
        state[name] = torch.nn.Parameter(t)
    return state


def batch_loss(model, windows):
    """Mean next-token cross entropy over windows [B, seq+1] (the reference runs one sequence
    at a time)."""
    losses = []
    for w in windows:
        logits = model.forward(w[:-1])
        losses.append(F.cross_entropy(logits, w[1:], reduction="sum"))
    return torch.stack(losses).sum() / (windows.shape[0] * (windows.shape[1] - 1))


def windows_at(data, starts, seq):
    return torch.from_numpy(np.stack([data[s:s + seq + 1].astype(np.int64) for s in starts]))


def lr_at(step, peak, warmup):
    return peak * min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


def stage_train(a):
    torch.set_num_threads(1)
    work = os.path.join(a.work, a.model)
    os.makedirs(work, exist_ok=True)
    ckpt_path = os.path.join(work, "checkpoint.pt")
    train = np.fromfile(os.path.join(a.work, "train.u16"), dtype=np.uint16)
    val = np.fromfile(os.path.join(a.work, "val.u16"), dtype=np.uint16)
    vocab = lm_pair_tokenizer.processor(os.path.join(a.work, "spm.model")).get_piece_size()
    cfg = config_of(a.model, vocab)
    state = init_state(cfg, seed=60 if a.model == "target" else 61)
    decay = [p for n, p in state.items() if p.dim() == 2]
    no_decay = [p for n, p in state.items() if p.dim() == 1]
    hp = TRAIN[a.model]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=hp["lr"], betas=(0.9, 0.95), eps=1e-8)
    step, tokens, elapsed = 0, 0, 0.0
    if os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        assert ck["config"] == cfg and ck["seq"] == a.seq and ck["batch"] == a.batch, "shape or batch changed"
        with torch.no_grad():
            for n, p in state.items():
                p.copy_(ck["state"][n])
        opt.load_state_dict(ck["optimizer"])
        step, tokens, elapsed = ck["step"], ck["tokens"], ck["elapsed"]
        print(f"resumed at step {step} ({tokens} tokens, {elapsed / 60:.1f} min)", file=sys.stderr)
    model = ref.DecoderOnlyLM(cfg, state)
    assert all(model.w[n] is p for n, p in state.items()), "the reference must use the parameters themselves"
    params = sum(p.numel() for p in state.values())
    print(f"{a.model}: {params / 1e6:.2f} M parameters", file=sys.stderr)
    val_starts = np.random.default_rng(0).integers(0, val.size - a.seq - 1, size=32)
    val_windows = windows_at(val, val_starts, a.seq)
    log_path = os.path.join(work, "log.tsv")
    if not os.path.exists(log_path):
        with open(log_path, "w") as f:
            f.write("step\ttokens\tminutes\ttrain_loss\tval_loss\tlr\n")

    def save(train_loss):
        with torch.no_grad():
            v = float(batch_loss(model, val_windows[:8] if a.quick_val else val_windows))
        with open(log_path, "a") as f:
            lr = lr_at(step, hp["lr"], hp["warmup"])
            f.write(f"{step}\t{tokens}\t{elapsed / 60:.1f}\t{train_loss:.4f}\t{v:.4f}\t{lr:.2e}\n")
        tmp = ckpt_path + ".tmp"
        torch.save({"config": cfg, "seq": a.seq, "batch": a.batch, "step": step, "tokens": tokens,
                    "elapsed": elapsed, "state": {n: p.detach().clone() for n, p in state.items()},
                    "optimizer": opt.state_dict()}, tmp)
        os.replace(tmp, ckpt_path)
        print(f"step {step} tokens {tokens} train {train_loss:.3f} val {v:.3f} ({elapsed / 60:.1f} min)",
              file=sys.stderr, flush=True)

    start = time.time()
    run_start_elapsed = elapsed
    last_save, recent = time.time(), []
    while True:
        rng = np.random.default_rng([a.seed, step])
        windows = windows_at(train, rng.integers(0, train.size - a.seq - 1, size=a.batch), a.seq)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, hp["lr"], hp["warmup"])
        loss = batch_loss(model, windows)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(state.values()), 1.0)
        opt.step()
        step += 1
        tokens += windows.numel() - windows.shape[0]
        recent.append(float(loss))
        elapsed = run_start_elapsed + time.time() - start
        done = time.time() - start > a.max_minutes * 60
        if done or time.time() - last_save > a.save_minutes * 60:
            save(sum(recent) / len(recent))
            recent, last_save = [], time.time()
        if done:
            return


# --- export -------------------------------------------------------------------------

def stage_export(a):
    ck = torch.load(os.path.join(a.work, a.model, "checkpoint.pt"))
    out = os.path.join(a.out, a.model)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(ck["config"], f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(generation_config(), f, indent=2)
        f.write("\n")
    f16 = {n: t.to(torch.float16) for n, t in ck["state"].items()}
    write_f16_safetensors(os.path.join(out, "model.safetensors"), f16,
                          {"format": "pt", "petrel_step": str(ck["step"]), "petrel_tokens": str(ck["tokens"])})
    sp = lm_pair_tokenizer.processor(os.path.join(a.work, "spm.model"))
    lm_pair_tokenizer.write(sp, out)
    print(f"{out}: step {ck['step']}, {ck['tokens']} tokens", file=sys.stderr)


def write_f16_safetensors(path, tensors, metadata):
    import struct
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        data = tensors[name].contiguous().numpy().astype("<f2").tobytes()
        header[name] = {"dtype": "F16", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


# --- check --------------------------------------------------------------------------

PROMPTS = ["def main(", "import os\nimport sys\n\n\ndef ", "The following packages", "Could not open file"]


def stage_check(a):
    convert = os.path.join(a.build, "tools", "petrel-convert")
    run = os.path.join(a.build, "tools", "petrel-run")
    sp = lm_pair_tokenizer.processor(os.path.join(a.work, "spm.model"))
    report = {}
    for model in ("target", "draft"):
        src = os.path.join(a.out, model)
        cfg, gen, weights = ref.load(src)
        lm = ref.DecoderOnlyLM(cfg, weights)
        references = []
        with torch.no_grad():
            for prompt in PROMPTS:
                ids, _ = ref.greedy(lm, [2] + sp.encode(prompt), 32, eos_ids=[1])
                references.append(ids)
        entry = {}
        # The default conversion (int8 weights, what a user gets) and an f32 one, whose greedy
        # ids should be the reference's (the f16 weights computed in f32 by both).
        for kind, flags in (("int8", []), ("f32", ["--quantize", "f32", "--embeddings", "f32"])):
            dst = os.path.join(a.work, f"{model}.petrel" if kind == "int8" else f"{model}.{kind}.petrel")
            p = subprocess.run([convert, src, "-o", dst] + flags, capture_output=True, text=True)
            e = entry[kind] = {"convert_rc": p.returncode, "convert_stderr": p.stderr[-2000:], "samples": []}
            if p.returncode != 0:
                continue
            for prompt, ids in zip(PROMPTS, references):
                r = subprocess.run([run, dst, "--prompt", prompt, "--greedy", "--max-new-tokens", "32", "--json"],
                                   capture_output=True, text=True)
                sample = {"prompt": prompt, "rc": r.returncode, "stderr": r.stderr[-1000:],
                          "reference_text": sp.decode([i for i in ids if i != 1])}
                try:
                    hyp = json.loads(r.stdout)["results"][0]["hypotheses"][0]
                    sample["engine_text"] = hyp["text"]
                    same = 0
                    while same < min(len(ids), len(hyp["ids"])) and ids[same] == hyp["ids"][same]:
                        same += 1
                    sample["ids_equal_to_reference"] = hyp["ids"] == ids
                    sample["common_prefix_ids"] = same
                except (ValueError, LookupError, TypeError):
                    sample["engine_stdout"] = r.stdout[-2000:]
                e["samples"].append(sample)
        report[model] = entry
    # Tokenizer agreement: held-out lines, engine (--tokenize --json-lines) vs sentencepiece.
    dst = os.path.join(a.work, "target.petrel")
    if os.path.exists(dst):
        lines = []
        with open(os.path.join(a.work, "corpus.jsonl"), encoding="utf-8") as f:
            for i, line in enumerate(f):
                if is_val(i):
                    lines += [s for s in json.loads(line)["text"].split("\n") if s.strip()]
        rng = random.Random(60)
        lines = rng.sample(lines, min(a.check_lines, len(lines)))
        path = os.path.join(a.work, "tokenize_lines.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run([run, dst, "--tokenize", "--input", path, "--json-lines"], capture_output=True, text=True)
        outs = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
        agree, first_diff = 0, None
        for text, o in zip(lines, outs):
            expected = [2] + sp.encode(text)
            got = o.get("ids")
            if got == expected:
                agree += 1
            elif first_diff is None:
                first_diff = {"text": text, "sentencepiece": expected, "engine": got, "engine_out": o}
        report["tokenize"] = {"lines": len(lines), "outputs": len(outs), "agree": agree, "rc": r.returncode,
                              "stderr": r.stderr[-1000:], "first_difference": first_diff}
    with open(os.path.join(a.work, "check.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, ensure_ascii=False, indent=1)
    print(json.dumps(report, ensure_ascii=False)[:6000])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["corpus", "vocab", "tokens", "train", "export", "check"])
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "lm-pair"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tools", "lm-pair"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--model", choices=sorted(SHAPES), default="target")
    ap.add_argument("--python-mib", type=int, default=48)
    ap.add_argument("--doc-mib", type=int, default=16)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--spm-sentences", type=int, default=400_000, help="lines spm_train samples")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=60)
    ap.add_argument("--max-minutes", type=float, default=30)
    ap.add_argument("--save-minutes", type=float, default=5)
    ap.add_argument("--quick-val", action="store_true", help="validate on 8 windows, not 32")
    ap.add_argument("--check-lines", type=int, default=2000)
    a = ap.parse_args()
    {"corpus": stage_corpus, "vocab": stage_vocab, "tokens": stage_tokens, "train": stage_train,
     "export": stage_export, "check": stage_check}[a.stage](a)


if __name__ == "__main__":
    main()
