#!/usr/bin/env python3
"""Writes Petrel's decoder-only LM fixtures: small random Hugging Face-shaped checkpoints
(config.json, generation_config.json, model.safetensors or index + shards) and what
decoder_only_reference.py computes for them (expected.json), with self-checks that run
every time:

  * the KV-cache incremental forward equals the full forward (max |diff| <= 1e-5 times
    max(1, max |logit|); the worst is 9e-7), and greedy by full recompute gives the same ids;
  * an independent float64 NumPy implementation (complex-number RoPE, per-head loops,
    explicit visible-key sets, its own llama3 inv_freq and bf16 rounding of the Gemma scale)
    gives the same logits (max |diff| <= 1e-4) -- torch 1.13 has no
    F.scaled_dot_product_attention, so this stands in for it;
  * llama3: the float32 inv_freq equals a float64 re-derivation, and all three bands
    (kept, smoothed, divided by factor) occur;
  * the written files load back (ref.load: shards, bf16) to the same greedy ids and logits;
  * gemma3: a sliding layer's output at position i does not move at all when key i-W changes
    (token at i-W for layer 0, hidden row i-W for every sliding layer) but does when key
    i-W+1 changes; a full layer does see key i-W.

Random weights are drawn from torch.Generator(seed); the seed is the first one from the
fixture's `seed` on whose model every greedy choice wins by >= MARGIN, every 16-token output
has >= 5 distinct ids and none more than 6 times, prompt 2 runs 16 tokens without EOS and
another prompt stops at EOS after >= 2 tokens. Running the script twice gives identical files
(on this machine's torch 1.13; another BLAS may move a last float32 bit).

    /usr/bin/python3 tools/reference/make_decoder_only_fixtures.py tests/fixtures/decoder_only [NAME ...]

expected.json: prompts (3; lengths 1, 5, 11); greedy (generated ids, prompt excluded, stopping
after an EOS of eos_token_ids, which is kept, or after max_new_tokens); prompt_logits (every
position of prompt 2, the longest); last_logits (each prompt's last position);
step_logits[t] (prompt 2: the logits greedy[2][t] was chosen from, teacher-forced along
greedy[2], so step_logits[0] == last_logits[2]); greedy_ignore_eos (16 ids per prompt, EOS
not stopping). Floats have 9 significant digits.
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_only_reference as ref  # noqa: E402

MAX_NEW = 16
PROMPT_LENGTHS = (1, 5, 11)
MARGIN = 0.005  # top-1 minus top-2 logit at every greedy choice (f32 rounding is ~1e-5)
GENERATOR = "tools/reference/make_decoder_only_fixtures.py"

COMMON = dict(attention_dropout=0.0, initializer_range=0.02, use_cache=True)

FIXTURES = {
    # Explicit layer_types that the (underscored, unread) pattern would not give; GQA 4:2;
    # head_dim 16 != 48/4; query_pre_attn_scalar 24 != head_dim; window 6; two thetas.
    "gemma3_f32": dict(
        seed=1000, dtype="F32", init=dict(post=6.0, final=2.0, embed=0.5),
        config=dict(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", hidden_size=48,
                    intermediate_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=16, query_pre_attn_scalar=24, vocab_size=128, max_position_embeddings=512,
                    rms_norm_eps=1e-6, rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling=None,
                    sliding_window=6, _sliding_window_pattern=6,
                    layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                    final_logit_softcapping=None, attn_logit_softcapping=None, attention_bias=False,
                    hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, bos_token_id=2,
                    eos_token_id=1, pad_token_id=0, torch_dtype="float32", **COMMON),
        generation=dict(bos_token_id=2, eos_token_id=[1, 106], pad_token_id=0),
        expect_layer_types="SFS"),
    # bf16 weights; no layer_types: sliding_window_pattern 3 gives S S F S; MQA 4:1;
    # sqrt(56) = 7.483 -> bf16 7.46875; linear rope scaling (global layers only); softcap 5.
    "gemma3_bf16": dict(
        seed=2000, dtype="BF16", init=dict(post=6.0, final=3.0, embed=0.5),
        config=dict(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", hidden_size=56,
                    intermediate_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=1,
                    head_dim=16, query_pre_attn_scalar=20, vocab_size=128, max_position_embeddings=512,
                    rms_norm_eps=1e-6, rope_theta=1000000.0, rope_local_base_freq=10000.0,
                    rope_scaling={"rope_type": "linear", "factor": 2.0}, sliding_window=6,
                    sliding_window_pattern=3, final_logit_softcapping=5.0, attn_logit_softcapping=None,
                    attention_bias=False, hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True,
                    bos_token_id=2, eos_token_id=1, pad_token_id=0, torch_dtype="bfloat16", **COMMON),
        generation=dict(bos_token_id=2, eos_token_id=1, pad_token_id=0),
        expect_layer_types="SSFS"),
    # llama3 rope scaling (original_max_position_embeddings 64, so a short sequence spans all
    # three bands), GQA 4:2, untied lm_head, eps 1e-5, two shards + index.
    "llama3": dict(
        seed=3000, dtype="F32", shards=2,
        config=dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=64, intermediate_size=64,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                    vocab_size=128, max_position_embeddings=512, rms_norm_eps=1e-5, rope_theta=10000.0,
                    rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 64, "rope_type": "llama3"},
                    attention_bias=False, mlp_bias=False, hidden_act="silu", tie_word_embeddings=False,
                    bos_token_id=1, eos_token_id=2, pad_token_id=None, pretraining_tp=1, torch_dtype="float32",
                    **COMMON),
        generation=dict(bos_token_id=1, eos_token_id=[2, 5]),
        expect_layer_types="FF"),
    # q/k/v biases, GQA 4:2, tied; sliding_window 4 present but use_sliding_window false.
    "qwen2": dict(
        seed=4000, dtype="F32",
        config=dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=48, intermediate_size=64,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=12,
                    vocab_size=120, max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=1000000.0,
                    rope_scaling=None, use_sliding_window=False, sliding_window=4, max_window_layers=1,
                    hidden_act="silu", tie_word_embeddings=True, bos_token_id=3, eos_token_id=4,
                    pad_token_id=None, torch_dtype="float32", **COMMON),
        generation=dict(bos_token_id=3, eos_token_id=[4, 3], pad_token_id=4),
        expect_layer_types="FF"),
    # q/k RMSNorm (plain w), head_dim 16 != 48/4, GQA 4:2, untied.
    "qwen3": dict(
        seed=5000, dtype="F32",
        config=dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=48, intermediate_size=64,
                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                    vocab_size=136, max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=1000000.0,
                    rope_scaling=None, use_sliding_window=False, sliding_window=None, max_window_layers=2,
                    attention_bias=False, hidden_act="silu", tie_word_embeddings=False, bos_token_id=5,
                    eos_token_id=6, pad_token_id=None, torch_dtype="float32", **COMMON),
        generation=dict(bos_token_id=5, eos_token_id=[6, 7]),
        expect_layer_types="FF"),
}


# --- weights ------------------------------------------------------------------------

def tensor_shapes(cfg):
    h, hd = cfg["hidden_size"], ref.head_dim_of(cfg)
    q, kv, inter = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd, cfg["intermediate_size"]
    family = cfg["model_type"]
    shapes = {"model.embed_tokens.weight": (cfg["vocab_size"], h), "model.norm.weight": (h,)}
    if not cfg["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (cfg["vocab_size"], h)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
                       p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
                       p + "mlp.gate_proj.weight": (inter, h), p + "mlp.up_proj.weight": (inter, h),
                       p + "mlp.down_proj.weight": (h, inter),
                       p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,)})
        if family == "qwen2":
            shapes.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)})
        if family in ("gemma3_text", "qwen3"):
            shapes.update({p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)})
        if family == "gemma3_text":
            shapes.update({p + "pre_feedforward_layernorm.weight": (h,),
                           p + "post_feedforward_layernorm.weight": (h,)})
    return shapes


def random_state(cfg, seed, eos_ids, post=2.0, final=3.0, embed=1.0):
    """Larger than training-time init so random models make confident, varied choices. Norm
    weights are random: Gemma's w (used as 1+w) ~ 0.3 N(0,1), but its post-attention and
    post-feedforward norms ~ 2 + 0.3 N(0,1) and the final norm ~ 3 + 0.3 N(0,1), so the layers
    outweigh the scaled (tied) embedding and a random model does not just repeat its input;
    Llama/Qwen w ~ 1 + 0.2 N(0,1). The EOS rows of the output table are scaled up so EOS is a
    real contender."""
    gen = torch.Generator().manual_seed(seed)
    gemma = cfg["model_type"] == "gemma3_text"
    state = {}
    for name, shape in sorted(tensor_shapes(cfg).items()):
        r = torch.randn(shape, generator=gen)
        if name.endswith("norm.weight"):
            if not gemma:
                state[name] = 1.0 + 0.2 * r
            elif name == "model.norm.weight":
                state[name] = final + 0.3 * r
            elif "post_" in name:
                state[name] = post + 0.3 * r
            else:
                state[name] = 0.3 * r
        elif name.endswith("bias"):
            state[name] = 0.3 * r
        elif name == "model.embed_tokens.weight" and gemma:
            state[name] = embed * r / shape[1] ** 0.5
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            state[name] = 0.5 * r
        else:
            state[name] = 1.5 * r / shape[1] ** 0.5
    out = state["model.embed_tokens.weight" if cfg["tie_word_embeddings"] else "lm_head.weight"]
    for e in eos_ids:
        out[e] *= 1.3
    return state


def prompts_for(cfg, seed, eos_ids):
    gen = torch.Generator().manual_seed(seed + 7)
    allowed = [i for i in range(1, cfg["vocab_size"]) if i not in eos_ids]
    return [[allowed[int(j)] for j in torch.randint(len(allowed), (n,), generator=gen)] for n in PROMPT_LENGTHS]


def margin(logits):
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def acceptable(model, prompts, eos_ids):
    """(ok, why) for the seed search: see the module docstring."""
    stopped = False
    for n, prompt in enumerate(prompts):
        free, steps = ref.greedy(model, prompt, MAX_NEW)
        if min(margin(s) for s in steps) < MARGIN:
            return False, "a close call"
        if len(set(free)) < 5 or max(free.count(t) for t in free) > 6:
            return False, "repetitive"
        out, _ = ref.greedy(model, prompt, MAX_NEW, eos_ids)
        if n == 2 and len(out) < MAX_NEW:
            return False, "prompt 2 stops early"
        stopped |= 2 <= len(out) < MAX_NEW
    return (True, "") if stopped else (False, "no EOS")


# --- an independent float64 implementation ---------------------------------------------

def bf16_round(x):
    """float64 -> float32 -> bfloat16 (round to nearest even) -> float64, on the bits."""
    bits = np.array([x], dtype=np.float32).view(np.uint32)[0]
    bits = (int(bits) + 0x7FFF + ((int(bits) >> 16) & 1)) >> 16 << 16
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def llama3_inv_freq_f64(head_dim, theta, rs):
    """Llama 3.1's rule restated: wavelength < L/high kept, > L/low divided by factor, the band
    between (both ends) interpolated by s = (L/wavelength - low)/(high - low)."""
    out = []
    for j in range(head_dim // 2):
        f = theta ** (-2.0 * j / head_dim)
        wl = 2 * math.pi / f
        length, low, high = rs["original_max_position_embeddings"], rs["low_freq_factor"], rs["high_freq_factor"]
        if wl < length / high:
            out.append((f, "kept"))
        elif wl > length / low:
            out.append((f / rs["factor"], "divided"))
        else:
            s = (length / wl - low) / (high - low)
            out.append(((1 - s) * f / rs["factor"] + s * f, "smoothed"))
    return out


def independent_logits(spec, state, ids):
    cfg = spec["config"]
    gemma = cfg["model_type"] == "gemma3_text"
    w = {k: v.double().numpy() for k, v in state.items()}
    h, heads, kvh, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    sliding = [c == "S" for c in spec["expect_layer_types"]]

    def norm(x, name):
        r = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
        return r * (1 + w[name]) if gemma else r * w[name]

    def lin(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    def thetas(is_sliding):
        if cfg.get("rope_scaling") and cfg["rope_scaling"]["rope_type"] == "llama3":
            return np.array([f for f, _ in llama3_inv_freq_f64(hd, cfg["rope_theta"], cfg["rope_scaling"])])
        base = cfg["rope_local_base_freq"] if is_sliding else cfg["rope_theta"]
        f = np.array([base ** (-2.0 * j / hd) for j in range(hd // 2)])
        if not is_sliding and cfg.get("rope_scaling") and cfg["rope_scaling"]["rope_type"] == "linear":
            f = f / cfg["rope_scaling"]["factor"]
        return f

    def rotate(x, pos, f):  # x [T, hd]: pairs (j, j + hd/2) as complex numbers
        z = (x[:, :hd // 2] + 1j * x[:, hd // 2:]) * np.exp(1j * np.outer(pos, f))
        return np.concatenate([z.real, z.imag], axis=1)

    def gelu_tanh(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    def silu(x):
        return x / (1 + np.exp(-x))

    n = len(ids)
    pos = np.arange(n)
    x = w["model.embed_tokens.weight"][ids]
    if gemma:
        s = math.sqrt(h)
        x = x * (bf16_round(s) if cfg["torch_dtype"] == "bfloat16" else float(np.float32(s)))
    scale = cfg["query_pre_attn_scalar"] ** -0.5 if gemma else hd ** -0.5
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = norm(x, p + "input_layernorm.weight")
        q, k, v = lin(a, p + "self_attn.q_proj"), lin(a, p + "self_attn.k_proj"), lin(a, p + "self_attn.v_proj")
        f = thetas(sliding[i])
        out = np.zeros((n, heads * hd))
        for head in range(heads):
            g = head // (heads // kvh)
            qh, kh, vh = q[:, head * hd:(head + 1) * hd], k[:, g * hd:(g + 1) * hd], v[:, g * hd:(g + 1) * hd]
            if p + "self_attn.q_norm.weight" in w:
                qh, kh = norm(qh, p + "self_attn.q_norm.weight"), norm(kh, p + "self_attn.k_norm.weight")
            qh, kh = rotate(qh, pos, f), rotate(kh, pos, f)
            for t in range(n):
                first = max(0, t - cfg["sliding_window"] + 1) if sliding[i] else 0
                sc = kh[first:t + 1] @ qh[t] * scale
                e = np.exp(sc - sc.max())
                out[t, head * hd:(head + 1) * hd] = (e / e.sum()) @ vh[first:t + 1]
        o = lin(out, p + "self_attn.o_proj")
        act = gelu_tanh if gemma else silu
        if gemma:
            x = x + norm(o, p + "post_attention_layernorm.weight")
            m = norm(x, p + "pre_feedforward_layernorm.weight")
            m = lin(act(lin(m, p + "mlp.gate_proj")) * lin(m, p + "mlp.up_proj"), p + "mlp.down_proj")
            x = x + norm(m, p + "post_feedforward_layernorm.weight")
        else:
            x = x + o
            m = norm(x, p + "post_attention_layernorm.weight")
            x = x + lin(act(lin(m, p + "mlp.gate_proj")) * lin(m, p + "mlp.up_proj"), p + "mlp.down_proj")
    head_w = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    logits = norm(x, "model.norm.weight") @ head_w.T
    cap = cfg.get("final_logit_softcapping") if gemma else None
    return np.tanh(logits / cap) * cap if cap else logits


# --- self-checks -------------------------------------------------------------------

def check_kv_cache(model, prompts):
    """Relative to the largest |logit| (float32 rounding of sums in another order)."""
    worst = 0.0
    for prompt in prompts:
        out, steps = ref.greedy(model, prompt, MAX_NEW)
        full = model.forward(prompt + out[:-1])[len(prompt) - 1:]
        worst = max(worst, float((torch.stack(steps) - full).abs().max() / max(1.0, float(full.abs().max()))))
        assert ref.greedy(model, prompt, MAX_NEW, use_cache=False)[0] == out, "recompute changes greedy ids"
    assert worst <= 1e-5, f"KV-cache forward differs from the full forward by {worst} (relative)"
    return worst


def check_independent(spec, state, model, prompts):
    ids = prompts[2] + ref.greedy(model, prompts[2], MAX_NEW)[0]
    diff = float(np.abs(independent_logits(spec, state, ids) - model.forward(ids).double().numpy()).max())
    assert diff <= 1e-4, f"the float64 NumPy implementation differs by {diff}"
    return diff


def check_llama3_rope(model, cfg):
    mine = model.inv_freq["full_attention"].double().numpy()
    theirs = llama3_inv_freq_f64(cfg["head_dim"], cfg["rope_theta"], cfg["rope_scaling"])
    assert np.allclose(mine, [f for f, _ in theirs], rtol=1e-6, atol=0), (mine, theirs)
    bands = {b for _, b in theirs}
    assert bands == {"kept", "smoothed", "divided"}, bands


def check_sliding(model, ids):
    """Key i-W is invisible to query i in a sliding layer, key i-W+1 is visible."""
    window = model.window
    i = len(ids) - 1
    j = i - window
    assert j >= 1
    base = model.layer_outputs(ids)
    # Layer 0 (sliding): a different token at j; then at j+1.
    assert model.layer_types[0] == "sliding_attention"
    for where, should_change in ((j, False), (j + 1, True)):
        other = list(ids)
        other[where] = ids[where] % (model.cfg["vocab_size"] - 1) + 1
        moved = float((model.layer_outputs(other)[0][i] - base[0][i]).abs().max())
        assert moved > 1e-4 if should_change else moved == 0.0, (where, moved)
    # Every layer: perturb its input row j (then j+1) and look at its output row i.
    pos = torch.arange(len(ids))
    inputs = [model.embed(torch.tensor(ids))] + base[:-1]
    for layer, x in enumerate(inputs):
        for where in (j, j + 1):
            y = x.clone()
            y[where] += 1.0
            moved = float((model.layer(layer, y, pos)[i] - model.layer(layer, x, pos)[i]).abs().max())
            sliding = model.layer_types[layer] == "sliding_attention"
            assert moved > 1e-4 if where == j + 1 or not sliding else moved == 0.0, (layer, where, moved)


def check_round_trip(d, expected):
    """The written directory (shards, bf16) loads back to a model with the same outputs."""
    cfg, gen, state = ref.load(d)
    model = ref.DecoderOnlyLM(cfg, state)
    eos_ids = ref.eos_ids_of(cfg, gen)
    assert eos_ids == expected["eos_token_ids"]
    for prompt, out in zip(expected["prompts"], expected["greedy"]):
        assert ref.greedy(model, prompt, MAX_NEW, eos_ids)[0] == out
    assert f32_list(model.forward(expected["prompts"][2])) == expected["prompt_logits"]


# --- output ------------------------------------------------------------------------

def f32_list(t):
    def short(x):
        return [short(v) for v in x] if isinstance(x, list) else float(f"{x:.9g}")
    return short(t.float().tolist())


def write_checkpoint(d, spec, state):
    for old in os.listdir(d):
        if old.endswith(".safetensors") or old == "model.safetensors.index.json":
            os.remove(os.path.join(d, old))
    shards = spec.get("shards", 1)
    if shards == 1:
        ref.write_safetensors(os.path.join(d, "model.safetensors"), state, spec["dtype"])
        return
    # As the Hub shards: whole tensors, in name order, about equal parts.
    def order(k):  # embedding, layers by index, final norm and head
        if k.startswith("model.layers."):
            return 1, int(k.split(".")[2]), k
        return (0 if "embed" in k else 2), 0, k
    names = sorted(state, key=order)
    total = sum(state[k].numel() for k in names)
    parts, acc = [[] for _ in range(shards)], 0
    for k in names:
        parts[min(shards - 1, acc * shards // total)].append(k)
        acc += state[k].numel()
    weight_map, size = {}, 0
    for n, part in enumerate(parts):
        fname = f"model-{n + 1:05d}-of-{shards:05d}.safetensors"
        size += ref.write_safetensors(os.path.join(d, fname), {k: state[k] for k in part}, spec["dtype"])
        weight_map.update({k: fname for k in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": size}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")


def make(name, out_dir):
    spec = FIXTURES[name]
    cfg = spec["config"]
    eos_ids = ref.eos_ids_of(cfg, spec["generation"])
    seed = spec["seed"]
    while True:
        state = random_state(cfg, seed, eos_ids, **spec.get("init", {}))
        if spec["dtype"] == "BF16":  # the reference sees what the checkpoint holds
            state = {k: v.to(torch.bfloat16).float() for k, v in state.items()}
        model = ref.DecoderOnlyLM(cfg, state)
        prompts = prompts_for(cfg, seed, eos_ids)
        ok, why = acceptable(model, prompts, eos_ids)
        if ok:
            break
        seed += 1
    assert "".join(t[0].upper() for t in model.layer_types) == spec["expect_layer_types"], model.layer_types

    worst_cache = check_kv_cache(model, prompts)
    worst_numpy = check_independent(spec, state, model, prompts)
    if cfg["model_type"] == "llama":
        check_llama3_rope(model, cfg)
    if cfg["model_type"] == "gemma3_text":
        check_sliding(model, prompts[2] + ref.greedy(model, prompts[2], MAX_NEW)[0][:4])

    greedy = [ref.greedy(model, p, MAX_NEW, eos_ids) for p in prompts]
    expected = {
        "name": name,
        "model_type": cfg["model_type"],
        "checkpoint_dtype": cfg["torch_dtype"],
        "embed_scale": float(f"{float(model.embed_scale):.9g}") if model.embed_scale is not None else None,
        "prompts": prompts,
        "max_new_tokens": MAX_NEW,
        "greedy": [g[0] for g in greedy],
        "prompt_logits": f32_list(model.forward(prompts[2])),
        "last_logits": [f32_list(model.forward(p)[-1]) for p in prompts],
        "step_logits": [f32_list(s) for s in greedy[2][1]],
        "greedy_ignore_eos": [ref.greedy(model, p, MAX_NEW)[0] for p in prompts],
        "eos_token_ids": eos_ids,
        "generator": GENERATOR,
    }
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(spec["generation"], f, indent=2)
        f.write("\n")
    write_checkpoint(d, spec, state)
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(expected, f)
        f.write("\n")
    check_round_trip(d, expected)
    print(f"{name}: seed {seed}, greedy {expected['greedy']}, kv-cache diff {worst_cache:.1e}, "
          f"float64 diff {worst_numpy:.1e}")


def main(argv):
    if not argv:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    names = argv[1:] or list(FIXTURES)
    for name in names:
        make(name, argv[0])


if __name__ == "__main__":
    main(sys.argv[1:])
