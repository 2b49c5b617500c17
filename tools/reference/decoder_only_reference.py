"""A compact PyTorch reference of Hugging Face's decoder-only causal LMs, in float32:
Gemma3ForCausalLM (`gemma3_text`), LlamaForCausalLM (`llama`, with the "linear" and
"llama3" rope scalings), Qwen2ForCausalLM (`qwen2`) and Qwen3ForCausalLM (`qwen3`), built
from a config.json dict and a state dict with Hugging Face tensor names; plus greedy
decoding as generate() does it. The oracle tools/reference/make_decoder_only_fixtures.py
makes tests/fixtures/decoder_only/ with.

Read, not copied (notes: tools/reference/decoder_only_semantics.md):
  * transformers 5.0.0.dev0 snapshot feisenyu/transformers_4573 @ 9c66b221:
    models/gemma3/configuration_gemma3.py (Gemma3TextConfig.__init__: layer_types from
    `sliding_window_pattern`, default 6, when `layer_types` is absent;
    convert_rope_params_to_dict: full_attention takes rope_theta + rope_scaling, sliding_attention
    rope_local_base_freq, never scaled) and models/gemma3/modeling_gemma3.py
    (Gemma3TextScaledWordEmbedding, Gemma3RMSNorm, Gemma3RotaryEmbedding, rotate_half,
    apply_rotary_pos_emb, repeat_kv, eager_attention_forward, Gemma3Attention,
    Gemma3DecoderLayer, Gemma3TextModel, Gemma3ForCausalLM.forward's final_logit_softcapping).
  * huggingface/transformers (index copies, 5.x dev): models/qwen3/modeling_qwen3.py @ 000c33fd
    (Qwen3RMSNorm, Qwen3Attention: q_norm/k_norm over head_dim before RoPE),
    models/qwen2/modeling_qwen2.py @ 00d4b3d2 (Qwen2Attention: q/k/v bias=True, o no bias),
    modeling_rope_utils.py (_compute_llama3_parameters, standardize_rope_params),
    masking_utils.py (sliding_window_overlay: kv_idx > q_idx - W; causal_mask_function:
    kv_idx <= q_idx), Qwen2/Qwen3 configs (sliding_window = None unless use_sliding_window;
    sliding layers are i >= max_window_layers).
  * Llama: LlamaAttention / LlamaMLP / LlamaRMSNorm as summarised in the notes
    (head_dim defaults to hidden/heads; attention_bias on q/k/v/o, mlp_bias on the MLP).

Everything runs in float32 whatever the checkpoint's dtype (bf16 weights are upcast). The one
place the checkpoint dtype enters is Gemma's embedding scale: sqrt(hidden_size) as a float32
tensor cast to config.json's `torch_dtype` (`dtype` in transformers 5 configs), as
Gemma3TextScaledWordEmbedding.forward does when the model runs in that dtype (bf16 sqrt(96) =
9.8125). Note: transformers run in float32 (4.x from_pretrained default) uses the unrounded
f32 value; Petrel's convention is "rounded to the checkpoint dtype", and expected.json records
the value used.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

FAMILIES = ("gemma3_text", "llama", "qwen2", "qwen3")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
ACTIVATIONS = {
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),  # activations.py GELUTanh
    "gelu": F.gelu,
    "silu": F.silu,
}


# --- configuration ------------------------------------------------------------------

def checkpoint_dtype(cfg):
    return cfg.get("dtype") or cfg.get("torch_dtype") or "float32"


def head_dim_of(cfg):
    if cfg["model_type"] == "gemma3_text":
        return cfg.get("head_dim", 256)  # Gemma3TextConfig default
    if cfg["model_type"] == "qwen3":
        return cfg.get("head_dim", 128)  # Qwen3Config default
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def layer_types_of(cfg):
    """Gemma3TextConfig / Qwen2Config / Qwen3Config.__init__; Llama has full layers only."""
    n = cfg["num_hidden_layers"]
    if cfg.get("layer_types"):
        return list(cfg["layer_types"])
    if cfg["model_type"] == "gemma3_text":
        pattern = cfg.get("sliding_window_pattern", 6)  # kwargs.get("sliding_window_pattern", 6)
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    if cfg["model_type"] in ("qwen2", "qwen3") and sliding_window_of(cfg) is not None:
        return ["sliding_attention" if i >= cfg.get("max_window_layers", 28) else "full_attention"
                for i in range(n)]
    return ["full_attention"] * n


def sliding_window_of(cfg):
    if cfg["model_type"] == "gemma3_text":
        assert not cfg.get("use_bidirectional_attention"), "EmbeddingGemma's mask is not modelled"
        return cfg.get("sliding_window", 4096)
    if cfg["model_type"] in ("qwen2", "qwen3"):
        return cfg.get("sliding_window") if cfg.get("use_sliding_window") else None
    return None


def rope_parameters_of(cfg):
    """{layer type: rope parameter dict}, as convert_rope_params_to_dict/standardize_rope_params
    leave them; old (rope_theta/rope_scaling at the top level) and new (rope_parameters) forms."""
    rp = cfg.get("rope_parameters")
    if cfg["model_type"] == "gemma3_text":
        if rp and set(rp) <= {"full_attention", "sliding_attention"}:
            full, sliding = dict(rp.get("full_attention", {})), dict(rp.get("sliding_attention", {}))
        else:
            full, sliding = {"rope_type": "default"}, {"rope_type": "default"}
        if cfg.get("rope_scaling"):
            full.update(cfg["rope_scaling"])  # global layers only
        full.setdefault("rope_theta", cfg.get("rope_theta", 1_000_000.0))
        sliding.setdefault("rope_theta", cfg.get("rope_local_base_freq", 10_000.0))
        types = {"full_attention": full, "sliding_attention": sliding}
    else:
        p = dict(cfg.get("rope_scaling") or rp or {})
        p.setdefault("rope_theta", cfg.get("rope_theta", 10_000.0))
        types = {"full_attention": p, "sliding_attention": p}
    for p in types.values():
        p.setdefault("rope_type", p.get("type", "default"))
        if p["rope_type"] == "llama3":
            if "original_max_position_embeddings" in cfg:  # a top-level key wins (standardize_rope_params)
                p["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
            p.setdefault("original_max_position_embeddings", cfg["max_position_embeddings"])
    return types


def rope_inv_freq(head_dim, p):
    """compute_default_rope_parameters, _compute_linear_scaling_rope_parameters and
    _compute_llama3_parameters (modeling_rope_utils.py), all in float32."""
    base = float(p["rope_theta"])
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    kind = p["rope_type"]
    if kind == "default":
        return inv_freq
    if kind == "linear":
        return inv_freq / p["factor"]
    if kind == "llama3":
        factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
        old_len = p["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old_len / low, old_len / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)  # both ends included
        return torch.where(medium, smoothed, scaled)
    raise ValueError(f"rope_type {kind!r} is not modelled")


# --- the model ----------------------------------------------------------------------

class Cache:
    """Per layer: keys and values after norm and RoPE, and their positions. Sliding layers keep
    the last W-1 entries after each step (cache_utils.DynamicSlidingWindowLayer.update); the
    step's own keys make W visible."""

    def __init__(self, n_layers):
        self.k = [None] * n_layers
        self.v = [None] * n_layers
        self.pos = [None] * n_layers
        self.length = 0


class DecoderOnlyLM:
    def __init__(self, cfg, state):
        self.cfg = cfg
        self.family = cfg["model_type"]
        if self.family not in FAMILIES:
            raise ValueError(f"model_type {self.family!r} is not modelled")
        self.gemma = self.family == "gemma3_text"
        self.hidden = cfg["hidden_size"]
        self.n_layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        self.head_dim = head_dim_of(cfg)
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        act = cfg.get("hidden_activation" if self.gemma else "hidden_act",
                      "gelu_pytorch_tanh" if self.gemma else "silu")
        self.act = ACTIVATIONS[act]
        # Gemma3Attention: query_pre_attn_scalar**-0.5; the others head_dim**-0.5.
        self.scaling = cfg.get("query_pre_attn_scalar", 256) ** -0.5 if self.gemma else self.head_dim ** -0.5
        self.embed_scale = None
        if self.gemma:  # torch.tensor(hidden**0.5) (float32), cast to the weights' dtype
            self.embed_scale = torch.tensor(self.hidden ** 0.5).to(DTYPES[checkpoint_dtype(cfg)]).float()
        self.layer_types = layer_types_of(cfg)
        self.window = sliding_window_of(cfg)
        self.inv_freq = {t: rope_inv_freq(self.head_dim, p) for t, p in rope_parameters_of(cfg).items()}
        self.softcap = cfg.get("final_logit_softcapping") if self.gemma else None
        self.w = {k: v.float() for k, v in state.items()}
        tie = cfg.get("tie_word_embeddings", self.gemma)  # default True for Gemma 3 only
        self.lm_head = self.w["model.embed_tokens.weight"] if tie else self.w["lm_head.weight"]
        if self.family == "qwen2":
            assert "model.layers.0.self_attn.q_proj.bias" in self.w, "Qwen2 has q/k/v biases"

    def new_cache(self):
        return Cache(self.n_layers)

    def norm(self, x, name):
        """Gemma3RMSNorm: x*rsqrt(mean(x^2)+eps)*(1+w); Llama/Qwen RMSNorm: w*(x*rsqrt(...))."""
        w = self.w[name]
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return y * (1.0 + w) if self.gemma else w * y

    def linear(self, x, name):
        return F.linear(x, self.w[name + ".weight"], self.w.get(name + ".bias"))

    def rope(self, x, pos, layer_type):
        """x [heads, T, head_dim]; rotate-half, angles pos*inv_freq in float32."""
        freqs = pos.float()[:, None] * self.inv_freq[layer_type][None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * emb.cos() + rotated * emb.sin()

    def attention(self, i, x, pos, cache):
        p = f"model.layers.{i}.self_attn."
        t = x.shape[0]
        q = self.linear(x, p + "q_proj").view(t, self.heads, self.head_dim).transpose(0, 1)
        k = self.linear(x, p + "k_proj").view(t, self.kv_heads, self.head_dim).transpose(0, 1)
        v = self.linear(x, p + "v_proj").view(t, self.kv_heads, self.head_dim).transpose(0, 1)
        if p + "q_norm.weight" in self.w:  # Gemma 3, Qwen3: one weight over head_dim, before RoPE
            q, k = self.norm(q, p + "q_norm.weight"), self.norm(k, p + "k_norm.weight")
        layer_type = self.layer_types[i]
        q, k = self.rope(q, pos, layer_type), self.rope(k, pos, layer_type)
        window = self.window if layer_type == "sliding_attention" else None
        kpos = pos
        if cache is not None:
            if cache.k[i] is not None:
                k, v = torch.cat((cache.k[i], k), dim=1), torch.cat((cache.v[i], v), dim=1)
                kpos = torch.cat((cache.pos[i], pos))
            keep = -(window - 1) if window is not None else 0
            cache.k[i], cache.v[i], cache.pos[i] = k[:, keep:], v[:, keep:], kpos[keep:]
        group = self.heads // self.kv_heads  # repeat_kv: query head h reads KV head h // group
        k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
        scores = torch.matmul(q, k.transpose(1, 2)) * self.scaling
        visible = kpos[None, :] <= pos[:, None]  # causal_mask_function
        if window is not None:
            visible &= kpos[None, :] > pos[:, None] - window  # sliding_window_overlay
        scores = scores.masked_fill(~visible, float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.linear(out.transpose(0, 1).reshape(t, self.heads * self.head_dim), p + "o_proj")

    def mlp(self, i, x):
        p = f"model.layers.{i}.mlp."
        return self.linear(self.act(self.linear(x, p + "gate_proj")) * self.linear(x, p + "up_proj"), p + "down_proj")

    def layer(self, i, x, pos, cache=None):
        p = f"model.layers.{i}."
        if self.gemma:  # Gemma3DecoderLayer: the post-norms come before the residual adds
            x = x + self.norm(self.attention(i, self.norm(x, p + "input_layernorm.weight"), pos, cache),
                              p + "post_attention_layernorm.weight")
            return x + self.norm(self.mlp(i, self.norm(x, p + "pre_feedforward_layernorm.weight")),
                                 p + "post_feedforward_layernorm.weight")
        x = x + self.attention(i, self.norm(x, p + "input_layernorm.weight"), pos, cache)
        return x + self.mlp(i, self.norm(x, p + "post_attention_layernorm.weight"))

    def embed(self, ids):
        x = F.embedding(ids, self.w["model.embed_tokens.weight"])
        return x * self.embed_scale if self.gemma else x

    def forward(self, ids, cache=None):
        """Logits [len(ids), vocab] of ids that follow the cache's tokens (positions go on from
        cache.length; no cache: the whole sequence from position 0)."""
        ids = torch.as_tensor(ids, dtype=torch.long)
        start = cache.length if cache is not None else 0
        pos = torch.arange(start, start + ids.shape[0])
        x = self.embed(ids)
        for i in range(self.n_layers):
            x = self.layer(i, x, pos, cache)
        logits = F.linear(self.norm(x, "model.norm.weight"), self.lm_head)
        if self.softcap is not None:  # Gemma3ForCausalLM.forward
            logits = torch.tanh(logits / self.softcap) * self.softcap
        if cache is not None:
            cache.length += ids.shape[0]
        return logits

    def layer_outputs(self, ids):
        """Every layer's output for the whole sequence (for the self-checks)."""
        ids = torch.as_tensor(ids, dtype=torch.long)
        pos = torch.arange(ids.shape[0])
        x, outs = self.embed(ids), []
        for i in range(self.n_layers):
            x = self.layer(i, x, pos)
            outs.append(x)
        return outs


# --- greedy decoding (generate() with do_sample=False, num_beams=1) --------------------------

def first_argmax(logits):
    """The first index among ties, as torch.argmax documents."""
    return int(torch.nonzero(logits == logits.max())[0, 0])


def greedy(model, prompt, max_new_tokens, eos_ids=(), use_cache=True):
    """(generated ids, the logits each was chosen from). Stops after an id of eos_ids (which is
    kept, as generate() keeps it) or after max_new_tokens. use_cache=False recomputes the whole
    sequence at every step."""
    cache = model.new_cache() if use_cache else None
    seq = list(prompt)
    logits = model.forward(seq, cache)[-1]
    out, steps = [], []
    while True:
        steps.append(logits)
        tok = first_argmax(logits)
        out.append(tok)
        seq.append(tok)
        if tok in eos_ids or len(out) == max_new_tokens:
            return out, steps
        logits = model.forward([tok], cache)[-1] if use_cache else model.forward(seq)[-1]


# --- checkpoints --------------------------------------------------------------------

def write_safetensors(path, tensors, dtype="F32"):
    """tensors {name: tensor} as one safetensors file, "F32" or "BF16" (round to nearest even,
    torch's .to(bfloat16)), names sorted, with Hugging Face's {"format": "pt"} metadata."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        if dtype == "BF16":
            data = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            data = t.float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)
    return offset


def read_safetensors(path):
    """{name: float32 tensor} from F32/F16/BF16 safetensors."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack_from("<Q", raw)
    header = json.loads(raw[8:8 + n])
    tensors = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        data = raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
        if e["dtype"] == "BF16":
            values = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            values = np.frombuffer(data, dtype={"F32": "<f4", "F16": "<f2"}[e["dtype"]]).astype(np.float32)
        tensors[name] = torch.from_numpy(values.reshape(e["shape"]).copy())
    return tensors


def load(directory):
    """(config dict, generation config dict or {}, state dict) of a Hugging Face checkpoint
    directory: model.safetensors, or model.safetensors.index.json's shards."""
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    gen = {}
    if os.path.exists(os.path.join(directory, "generation_config.json")):
        with open(os.path.join(directory, "generation_config.json")) as f:
            gen = json.load(f)
    index = os.path.join(directory, "model.safetensors.index.json")
    state = {}
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        for shard in sorted(set(weight_map.values())):
            state.update(read_safetensors(os.path.join(directory, shard)))
        assert set(state) == set(weight_map), "shards and weight_map disagree"
    else:
        state = read_safetensors(os.path.join(directory, "model.safetensors"))
    return cfg, gen, state


def eos_ids_of(cfg, gen):
    """generation_config.json's eos_token_id (int or list), else config.json's."""
    eos = gen.get("eos_token_id", cfg.get("eos_token_id"))
    if eos is None:
        return []
    return list(eos) if isinstance(eos, list) else [eos]
