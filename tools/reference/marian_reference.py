"""A compact PyTorch implementation of Hugging Face's MarianMT, M2M100 (also NLLB-200)
and mBART (also mBART-50) forward passes and of Petrel's decoding rules: the oracle
Petrel's fixtures are made with.

Marian: tensor names and semantics follow transformers' modeling_marian.py (post-LN
encoder/decoder layers, q_proj(x) * head_dim**-0.5, embed * sqrt(d_model) when
scale_embedding, concatenated sin|cos position table, tied lm_head plus
final_logits_bias). Options Hugging Face's Marian lacks but Petrel supports are
added the way BART/mBART do them: pre-LN layers with a final LayerNorm per stack
(`model.{encoder,decoder}.layer_norm`), interleaved or learned position tables.

The other families (Config(family=...)) follow, read not copied,
  * m2m100: transformers' models/m2m_100/modeling_m2m_100.py (read at
    huggingface/transformers 001400f5, the 4.5-era file, and at a 4.57-era copy,
    feisenyu/transformers_4573 9c66b221: the same computation): pre-LN layers, a final
    `layer_norm` per stack and no layernorm_embedding; ReLU; a sinusoidal table with
    tensor2tensor frequencies exp(-i*log(10000)/(d/2-1)), sin|cos concatenated, built in
    float32, row padding_idx zero; a token's row is its position + padding_idx + 1 = +2,
    counted over non-pad tokens (create_position_ids_from_input_ids); embeddings times
    sqrt(d_model) when scale_embedding (M2M100ScaledWordEmbedding); lm_head tied to the
    unscaled model.shared table; no final_logits_bias. NLLB-200 checkpoints are this model.
  * mbart: models/mbart/modeling_mbart.py (huggingface/transformers 00b676f8, 4.5x):
    learned positions read at row position + 2 (MBartLearnedPositionalEmbedding,
    max_position_embeddings + 2 rows), `layernorm_embedding` on embedding + position,
    pre-LN layers with final `layer_norm`s, GELU (exact erf form), scale_embedding from the
    config, tied lm_head plus final_logits_bias.

Cross-attention probabilities (Model.cross_attention, for word alignments) are what
transformers returns as `cross_attentions` with output_attentions=True: per decoder layer
[batch, heads, target positions, source positions], the softmax of the masked scores
(masked source positions get exactly 0); attention dropout is off in eval mode.
"""
import json
import math
import struct

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F


# What each family fixes (a Config keyword overrides it). Marian's special tokens are ids
# of its own vocabulary (computed in Config); the fairseq families use <s> 0, <pad> 1,
# </s> 2, <unk> 3 and start decoding with </s>.
FAMILY_DEFAULTS = {
    "marian": dict(normalize_before=False, activation="swish", positions="concatenated", scale_embedding=True,
                   layernorm_embedding=False, final_logits_bias=True),
    "m2m100": dict(normalize_before=True, activation="relu", positions="m2m100", scale_embedding=True,
                   layernorm_embedding=False, final_logits_bias=False, pad=1, eos=2, decoder_start=2,
                   bad_words=[]),
    "mbart": dict(normalize_before=True, activation="gelu", positions="learned", scale_embedding=True,
                  layernorm_embedding=True, final_logits_bias=True, pad=1, eos=2, decoder_start=2, bad_words=[]),
}
# The row of the position table a token at position p reads: p + POSITION_OFFSET
# (M2M100: padding_idx + 1 with padding_idx 1; mBART: MBartLearnedPositionalEmbedding's 2).
POSITION_OFFSET = {"marian": 0, "m2m100": 2, "mbart": 2}


class Config:
    def __init__(self, **kw):
        self.family = kw.get("family", "marian")
        if self.family not in FAMILY_DEFAULTS:
            raise ValueError(f"unknown family {self.family!r}")
        preset = FAMILY_DEFAULTS[self.family]

        def get(key, default=None):
            return kw.get(key, preset.get(key, default))

        self.d_model = kw.get("d_model", 32)
        self.encoder_layers = kw.get("encoder_layers", 2)
        self.decoder_layers = kw.get("decoder_layers", 2)
        self.heads = kw.get("heads", 4)
        self.ffn = kw.get("ffn", 64)
        self.vocab = kw.get("vocab", 48)
        # The decoder's vocabulary (separate vocabularies: decoder_vocab_size); special
        # tokens (pad, eos, decoder start, bad words) are ids of it.
        self.target_vocab = kw.get("target_vocab", self.vocab)
        self.max_positions = kw.get("max_positions", 64)
        self.scale_embedding = get("scale_embedding")
        self.normalize_before = get("normalize_before")
        self.activation = get("activation")
        # concatenated | interleaved | learned (Marian); m2m100 (tensor2tensor sinusoid)
        self.positions = get("positions")
        self.position_offset = POSITION_OFFSET[self.family]
        self.store_positions = kw.get("store_positions", False)  # older exports store the table
        self.layernorm_embedding = get("layernorm_embedding")  # mBART: LayerNorm(embed + position)
        self.final_logits_bias = get("final_logits_bias")  # M2M100 has none
        self.tie = kw.get("tie", True)
        self.share = kw.get("share", True)
        self.pad = get("pad", self.target_vocab - 1)
        self.eos = get("eos", 0)
        self.decoder_start = get("decoder_start", self.pad)
        self.bad_words = get("bad_words", [[self.pad]])
        # Training only (as Hugging Face's `dropout`: after embedding + positions and on each
        # sub-layer's output before the residual add); no effect in eval mode or at 0.
        self.dropout = kw.get("dropout", 0.0)

    def hf_config(self):
        """config.json as transformers writes it for the family (hyper-parameters from
        this Config; the rest is what the family's released checkpoints carry)."""
        if self.family == "m2m100":
            return self._fairseq_config("m2m_100", "M2M100ForConditionalGeneration")
        if self.family == "mbart":
            return self._fairseq_config("mbart", "MBartForConditionalGeneration")
        return {
            "model_type": "marian",
            "architectures": ["MarianMTModel"],
            "d_model": self.d_model,
            "encoder_layers": self.encoder_layers,
            "decoder_layers": self.decoder_layers,
            "encoder_attention_heads": self.heads,
            "decoder_attention_heads": self.heads,
            "encoder_ffn_dim": self.ffn,
            "decoder_ffn_dim": self.ffn,
            "vocab_size": self.vocab,
            "decoder_vocab_size": self.target_vocab,
            "max_position_embeddings": self.max_positions,
            "scale_embedding": self.scale_embedding,
            "normalize_before": self.normalize_before,
            "activation_function": self.activation,
            "pad_token_id": self.pad,
            "eos_token_id": self.eos,
            "decoder_start_token_id": self.decoder_start,
            "tie_word_embeddings": self.tie,
            "share_encoder_decoder_embeddings": self.share,
            "bad_words_ids": self.bad_words,
        }

    def _fairseq_config(self, model_type, architecture):
        assert self.share and self.vocab == self.target_vocab, "M2M100 and mBART share one vocabulary"
        config = {
            "_name_or_path": f"petrel-fixture/{model_type}",
            "activation_dropout": 0.0,
            "activation_function": self.activation,
            "architectures": [architecture],
            "attention_dropout": 0.1 if model_type == "m2m_100" else 0.0,
            "bos_token_id": 0,
            "d_model": self.d_model,
            "decoder_attention_heads": self.heads,
            "decoder_ffn_dim": self.ffn,
            "decoder_layerdrop": 0.05 if model_type == "m2m_100" else 0.0,
            "decoder_layers": self.decoder_layers,
            "decoder_start_token_id": self.decoder_start,
            "dropout": 0.1,
            "encoder_attention_heads": self.heads,
            "encoder_ffn_dim": self.ffn,
            "encoder_layerdrop": 0.05 if model_type == "m2m_100" else 0.0,
            "encoder_layers": self.encoder_layers,
            "eos_token_id": self.eos,
            "init_std": 0.02,
            "is_encoder_decoder": True,
            "max_position_embeddings": self.max_positions,
            "model_type": model_type,
            "num_hidden_layers": self.encoder_layers,
            "pad_token_id": self.pad,
            "scale_embedding": self.scale_embedding,
            "torch_dtype": "float32",
            "transformers_version": "4.57.1",
            "use_cache": True,
            "vocab_size": self.vocab,
        }
        if not self.tie:
            config["tie_word_embeddings"] = False
        if model_type == "mbart":
            # mBART-50's config.json carries BART-era keys transformers' MBart ignores (its
            # structure is fixed: pre-LN, final norms, layernorm_embedding, learned positions).
            config.update({"add_bias_logits": False, "add_final_layer_norm": True, "normalize_before": True,
                           "normalize_embedding": True, "static_position_embeddings": False,
                           "classifier_dropout": 0.0, "output_past": True})
        return config


def sinusoidal_table(n_pos, dim, interleaved):
    """Hugging Face Marian's table (float64, then f32); interleaved = the paper's layout."""
    enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)])
    out = np.zeros((n_pos, dim))
    if interleaved:
        out[:, 0::2] = np.sin(enc[:, 0::2])
        out[:, 1::2] = np.cos(enc[:, 1::2])
    else:
        half = dim // 2
        out[:, :half] = np.sin(enc[:, 0::2])
        out[:, half:] = np.cos(enc[:, 1::2])
    return torch.tensor(out, dtype=torch.float32)


def m2m100_position_table(rows, dim, padding_idx=1):
    """M2M100's (fairseq's) sinusoid: frequency i = exp(-i * log(10000) / (dim/2 - 1)),
    row r = [sin(r * f_0..f_{h-1}) | cos(r * f_0..f_{h-1})], a zero column when dim is odd,
    row padding_idx all zero. Every step in float32 as torch does it (the frequencies, the
    products r * f_i and sin/cos), which matters: rounding r * f_i to float32 moves the
    value by up to ~3e-5 at r ~ 1000 (check_m2m100_positions.py pins this)."""
    half = dim // 2
    step = math.log(10000) / (half - 1)
    inv_freq = torch.exp(torch.arange(half, dtype=torch.float32) * -step)
    angles = torch.arange(rows, dtype=torch.float32)[:, None] * inv_freq[None, :]
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if dim % 2:
        table = torch.cat([table, torch.zeros(rows, 1)], dim=1)
    table[padding_idx] = 0.0
    return table


def activation(name):
    return {"swish": F.silu, "silu": F.silu, "relu": F.relu, "gelu": F.gelu}[name]


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg.d_model
        self.heads = cfg.heads
        self.head_dim = d // cfg.heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)
        # A list while Model.cross_attention records: each call appends its probabilities
        # [B, H, Tq, Tk] (after the softmax). Not a parameter: the state dict is unchanged.
        self.recorded = None

    def split(self, x):  # [B, T, d] -> [B, H, T, hd]
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, kv, mask):
        """mask: additive, broadcastable to [B, H, Tq, Tk]."""
        q = self.split(self.q_proj(x) * self.scaling)
        k = self.split(self.k_proj(kv))
        v = self.split(self.v_proj(kv))
        scores = q @ k.transpose(-1, -2) + mask
        probs = torch.softmax(scores, dim=-1)
        if self.recorded is not None:
            self.recorded.append(probs.detach().clone())
        out = probs @ v
        b, h, t, hd = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, h * hd))


class Layer(nn.Module):
    def __init__(self, cfg, decoder):
        super().__init__()
        d = cfg.d_model
        self.pre = cfg.normalize_before
        self.act = activation(cfg.activation)
        self.dropout = cfg.dropout
        self.self_attn = Attention(cfg)
        self.self_attn_layer_norm = nn.LayerNorm(d)
        if decoder:
            self.encoder_attn = Attention(cfg)
            self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, cfg.ffn)
        self.fc2 = nn.Linear(cfg.ffn, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def block(self, x, norm, fn):
        drop = lambda h: F.dropout(h, self.dropout, self.training)  # noqa: E731
        if self.pre:
            return x + drop(fn(norm(x)))
        return norm(x + drop(fn(x)))

    def forward(self, x, self_kv, self_mask, memory=None, memory_mask=None):
        """self_kv(x_normed) gives the keys/values input for self-attention (the
        cache-aware caller passes the history)."""
        x = self.block(x, self.self_attn_layer_norm, lambda h: self.self_attn(h, self_kv(h), self_mask))
        if memory is not None:
            x = self.block(x, self.encoder_attn_layer_norm, lambda h: self.encoder_attn(h, memory, memory_mask))
        return self.block(x, self.final_layer_norm, lambda h: self.fc2(self.act(self.fc1(h))))


class Stack(nn.Module):
    def __init__(self, cfg, decoder):
        super().__init__()
        self.layers = nn.ModuleList([Layer(cfg, decoder) for _ in range(cfg.decoder_layers if decoder else cfg.encoder_layers)])
        if cfg.normalize_before:
            self.layer_norm = nn.LayerNorm(cfg.d_model)
        if cfg.layernorm_embedding:
            self.layernorm_embedding = nn.LayerNorm(cfg.d_model)
        if not cfg.share:
            self.embed_tokens = nn.Embedding(cfg.target_vocab if decoder else cfg.vocab, cfg.d_model)
        if cfg.positions == "learned":
            self.embed_positions = nn.Embedding(cfg.max_positions + cfg.position_offset, cfg.d_model)
        self.is_decoder = decoder


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.model = nn.Module()
        assert cfg.share is False or cfg.vocab == cfg.target_vocab, "a shared table needs one vocabulary"
        self.model.shared = nn.Embedding(cfg.vocab, cfg.d_model)
        self.model.encoder = Stack(cfg, False)
        self.model.decoder = Stack(cfg, True)
        if not cfg.tie:
            self.lm_head = nn.Linear(cfg.d_model, cfg.target_vocab, bias=False)
        if cfg.final_logits_bias:
            self.register_buffer("final_logits_bias", torch.zeros(1, cfg.target_vocab))
        self.cfg = cfg
        self.embed_scale = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0
        if cfg.positions == "m2m100":
            self.position_table = m2m100_position_table(cfg.max_positions + cfg.position_offset, cfg.d_model, cfg.pad)
        elif cfg.positions != "learned":
            self.position_table = sinusoidal_table(cfg.max_positions, cfg.d_model, cfg.positions == "interleaved")
        # M2M100 gives a decoder input equal to pad the all-zero row (see positions); the
        # fixtures check that never happens, so the engine need not copy that corner.
        self.decoder_pad_inputs = 0

    # --- pieces -----------------------------------------------------------------
    def embed_tokens(self, stack):
        return self.model.shared if self.cfg.share else stack.embed_tokens

    def output_weight(self):
        if not self.cfg.tie:
            return self.lm_head.weight
        return self.embed_tokens(self.model.decoder).weight

    def positions(self, stack, ids, start):
        """Position vectors for ids [B, T] at positions start.. (the rows they read)."""
        cfg = self.cfg
        length = ids.shape[1]
        if cfg.positions == "m2m100":
            pad = cfg.pad
            not_pad = ids.ne(pad).long()
            if stack.is_decoder:
                # generate() feeds one token at a time with a cache: row step + 2, or the
                # padding row for a pad token (create_position_ids_from_input_ids on one id).
                rows = (torch.arange(start, start + length)[None, :] + 1) * not_pad + pad
                self.decoder_pad_inputs += int((not_pad == 0).sum())
            else:  # non-pad tokens count 1, 2, ...; right padding gives position + 2
                rows = torch.cumsum(not_pad, dim=1) * not_pad + pad
            return self.position_table[rows]
        first = start + cfg.position_offset
        if cfg.positions == "learned":
            return stack.embed_positions.weight[first:first + length]
        return self.position_table[first:first + length]

    def embed(self, stack, ids, start=0):
        x = self.embed_tokens(stack)(ids) * self.embed_scale
        x = x + self.positions(stack, ids, start)
        if self.cfg.layernorm_embedding:
            x = stack.layernorm_embedding(x)
        return F.dropout(x, self.cfg.dropout, self.training)

    def finish(self, stack, x):
        return stack.layer_norm(x) if self.cfg.normalize_before else x

    # --- encoder ----------------------------------------------------------------
    def source_mask(self, ids):
        """Which tokens of ids [B, L] the encoder and the cross-attention see: the mask
        transformers' generate() builds when given none (generation/utils.py
        `_prepare_attention_mask_for_generation`, 4.4x-4.57): ids != pad_token_id, so a pad
        anywhere in an input is masked, unless pad is also EOS (then nothing is)."""
        cfg = self.cfg
        if cfg.pad == cfg.eos:
            return torch.ones(ids.shape, dtype=torch.bool)
        return ids.ne(cfg.pad)

    def encode(self, ids, lengths=None):
        """ids: [B, L], pads anywhere (a right-padded batch among them); returns states
        [B, L, d] and the additive key mask (source_mask). `lengths`, for a right-padded
        batch, also masks each row's tail (the tokenizer's attention_mask: the same mask
        unless pad is EOS). The positions are the family's over the whole row: an index
        (Marian, mBART) or a count of the tokens that are not pads (M2M100)."""
        b, l = ids.shape
        valid = self.source_mask(ids)
        if lengths is not None:
            valid = valid & (torch.arange(l)[None, :] < torch.tensor(lengths)[:, None])
        mask = torch.zeros(b, 1, 1, l).masked_fill(~valid[:, None, None, :], float("-inf"))
        x = self.embed(self.model.encoder, ids)
        for layer in self.model.encoder.layers:
            x = layer(x, lambda h: h, mask)
        return self.finish(self.model.encoder, x), mask

    # --- decoder: full pass and cached step ----------------------------------------
    def logits_from_hidden(self, h):
        logits = h @ self.output_weight().T
        return logits + self.final_logits_bias[0] if self.cfg.final_logits_bias else logits

    def decode_full(self, tokens, memory, memory_mask):
        """tokens [B, T] (starting with decoder_start) -> logits [B, T, V]."""
        t = tokens.shape[1]
        causal = torch.full((t, t), float("-inf")).triu(1)
        x = self.embed(self.model.decoder, tokens)
        for layer in self.model.decoder.layers:
            x = layer(x, lambda h: h, causal, memory, memory_mask)
        return self.logits_from_hidden(self.finish(self.model.decoder, x))

    def cross_attention(self, tokens, memory, memory_mask, cached=False):
        """Teacher-forced cross-attention: tokens [1, T] (starting with decoder_start), as
        decode_full. Returns (attention [T, layers, heads, S], logits [T, V]): row t is
        the step whose input is tokens[t], i.e. the one that predicts the token after it,
        every layer and head after the softmax, over all S source positions (masked ones
        0). cached=True runs the steps one at a time with decode_step's cache instead of
        one full pass (the same numbers up to rounding)."""
        modules = [layer.encoder_attn for layer in self.model.decoder.layers]
        for m in modules:
            m.recorded = []
        try:
            with torch.no_grad():
                if cached:
                    cache = [None] * self.cfg.decoder_layers
                    logits = torch.stack([self.decode_step(tokens[:, t], t, cache, memory, memory_mask)[0]
                                          for t in range(tokens.shape[1])])
                    per_layer = [torch.cat(m.recorded, dim=2) for m in modules]  # steps along Tq
                else:
                    logits = self.decode_full(tokens, memory, memory_mask)[0]
                    per_layer = [m.recorded[0] for m in modules]
        finally:
            for m in modules:
                m.recorded = None
        attention = torch.stack([p[0] for p in per_layer])  # [layers, H, T, S]
        return attention.permute(2, 0, 1, 3).contiguous(), logits

    def decode_step(self, token, step, cache, memory, memory_mask):
        """One position with a self-attention cache (a list per layer of the
        normalised-or-raw inputs seen so far). Returns logits [B, V]."""
        x = self.embed(self.model.decoder, token[:, None], start=step)
        for i, layer in enumerate(self.model.decoder.layers):
            def self_kv(h, i=i):
                cache[i] = h if cache[i] is None else torch.cat([cache[i], h], dim=1)
                return cache[i]
            x = layer(x, self_kv, torch.zeros(1), memory, memory_mask)
        return self.logits_from_hidden(self.finish(self.model.decoder, x))[:, 0]


# --- decoding rules (the exact semantics) -----------------------------------
def step_log_probs(logits, bad_ids, allowed=None):
    """log-softmax over the vocabulary, or over the `allowed` ids only (a shortlist:
    the others get -inf), then bad words are masked."""
    if allowed is None:
        lp = torch.log_softmax(logits, dim=-1)
    else:
        lp = torch.full_like(logits, float("-inf"))
        lp[..., allowed] = torch.log_softmax(logits[..., allowed], dim=-1)
    if bad_ids:
        lp[..., bad_ids] = float("-inf")
    return lp


def shortlist_table(lex_lines, token_ids, first, best, eos):
    """Marian's lexical table ("TARGET SOURCE PROB" lines) -> (always ids, {source id:
    its `best` most likely target ids}); NULL and unknown tokens are skipped."""
    pairs = {}
    for line in lex_lines:
        target, source, prob = line.split()
        if source == "NULL" or target == "NULL" or source not in token_ids or target not in token_ids:
            continue
        key = (token_ids[source], token_ids[target])
        pairs[key] = max(pairs.get(key, 0.0), float(prob))
    by_source = {}
    for (s, t), p in pairs.items():
        by_source.setdefault(s, []).append((-p, t))
    table = {s: [t for _, t in sorted(c)[:best]] for s, c in by_source.items()}
    always = sorted(set(range(first)) | {eos})
    return always, table


def shortlist_allowed(always, table, source_ids, bad_ids):
    """What one sentence may produce: always + its source tokens' candidates + the bad
    words (which take part in the normalisation and are masked after it)."""
    allowed = set(always) | set(bad_ids)
    for s in source_ids:
        allowed |= set(table.get(s, []))
    return sorted(allowed)


def force_token(lp, token):
    """What transformers' ForcedBOS/ForcedEOSTokenLogitsProcessor leave: 0 for `token`,
    -inf for every other id (so a forced step adds nothing to a hypothesis' score)."""
    forced = torch.full_like(lp, float("-inf"))
    forced[..., token] = 0.0
    return forced


def apply_forced(lp, step, max_new, forced_bos, forced_eos):
    """generate()'s forced tokens: forced_bos_token_id at the first generated position
    (cur_len 1: right after decoder_start), forced_eos_token_id at the last one
    (cur_len max_length - 1); where both apply, EOS (the later processor) wins."""
    if forced_bos is not None and step == 0:
        lp = force_token(lp, forced_bos)
    if forced_eos is not None and step == max_new - 1:
        lp = force_token(lp, forced_eos)
    return lp


def greedy(model, memory, memory_mask, max_new, alpha=1.0, allowed=None, forced_eos=None, forced_bos=None):
    """One sentence (batch of 1). Returns (ids without start/EOS, normalised score).
    `forced_eos`: forced (scored 0) at the last step, as in beam_search; `forced_bos`:
    forced (scored 0) at the first step (a target-language token: it is part of the
    returned ids and of the length)."""
    cfg = model.cfg
    bad = [w[0] for w in cfg.bad_words]
    cache = [None] * cfg.decoder_layers
    token = torch.tensor([cfg.decoder_start])
    out, score = [], 0.0
    for step in range(max_new):
        lp = step_log_probs(model.decode_step(token, step, cache, memory, memory_mask), bad, allowed)[0]
        lp = apply_forced(lp, step, max_new, forced_bos, forced_eos)
        nxt = int(torch.argmax(lp))
        score += float(lp[nxt])
        if nxt == cfg.eos:
            return out, score / (len(out) + 1) ** alpha
        out.append(nxt)
        token = torch.tensor([nxt])
    return out, score / max(len(out), 1) ** alpha


def beam_search(model, memory, memory_mask, beam, max_new, alpha=1.0, allowed=None, stop="first-k",
                forced_eos=None, forced_bos=None):
    """One sentence. Returns the best `beam` finished hypotheses [(ids, normalised score)],
    best first.

    Hugging Face's beam search (transformers 4.57, generation/utils.py `_beam_search`),
    one sentence at a time: each step ranks the 2*beam best extensions of the live
    hypotheses; an EOS among the best `beam` of them finishes a hypothesis (score /
    length^alpha, the EOS counted); the best `beam` non-EOS extensions live on; the
    finished set keeps the best `beam`. At the length limit the best `beam` extensions
    finish, EOS or not. `stop`: "first-k" ends the search once `beam` hypotheses have
    finished (early_stopping=True); "heuristic" (early_stopping=False, Hugging Face's
    default) goes on while the best live hypothesis, normalised by its length so far,
    beats the worst finished one. `forced_eos`: this token is forced (scored 0) at the
    last step, as the ForcedEOSTokenLogitsProcessor does; `forced_bos`: this token is
    forced (scored 0) at the first step (ForcedBOSTokenLogitsProcessor), so one hypothesis
    lives after it; it counts in the length like any generated token.
    Equal scores rank the lower token id, then the lower hypothesis first (torch.topk
    leaves their order unspecified)."""
    cfg = model.cfg
    bad = [w[0] for w in cfg.bad_words]
    live = [([], 0.0)]
    finished = []

    def add_finished(ids, score):
        if len(finished) < beam:
            finished.append((ids, score))
            return
        worst = min(range(len(finished)), key=lambda i: finished[i][1])
        if score > finished[worst][1]:
            finished[worst] = (ids, score)

    for step in range(max_new):
        last = step == max_new - 1
        cands = []
        for h_index, (ids, score) in enumerate(live):
            tokens = torch.tensor([[cfg.decoder_start] + ids])
            lp = step_log_probs(model.decode_full(tokens, memory, memory_mask)[0, -1], bad, allowed)
            lp = apply_forced(lp, step, max_new, forced_bos, forced_eos)
            # Only a hypothesis' 2*beam best tokens can be among the 2*beam best candidates;
            # every token whose total ties the 2*beam-th best total is kept, so the sort below
            # sees exactly the candidates a scan of the whole vocabulary would rank first.
            # Masked (-inf) tokens are never candidates.
            finite = int(torch.isfinite(lp).sum())
            if finite == 0:
                continue
            kth_total = score + float(torch.topk(lp, min(2 * beam, finite)).values[-1])
            totals = score + lp.double()
            for tok in torch.nonzero(totals >= kth_total).flatten().tolist():
                cands.append((score + float(lp[tok]), tok, h_index))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        new_live = []
        for rank, (score, tok, h_index) in enumerate(cands[:2 * beam]):
            ids = live[h_index][0]
            normalised = score / (step + 1) ** alpha
            if tok == cfg.eos or last:
                if rank < beam:  # a lower-ranked EOS is skipped
                    add_finished(ids if tok == cfg.eos else ids + [tok], normalised)
            elif len(new_live) < beam:
                new_live.append((ids + [tok], score))
        live = new_live
        if not live or last:
            break
        if len(finished) == beam:
            if stop == "first-k":
                break
            if not live[0][1] / (step + 1) ** alpha > min(f[1] for f in finished):
                break
    finished.sort(key=lambda f: -f[1])
    return finished


# --- checkpoint writing ------------------------------------------------------------
def state_dict_for_export(model, older_export=False):
    """Hugging Face's names. Tied tables are saved once, as model.shared.weight;
    an `older_export` also stores tied copies and the position tables."""
    cfg = model.cfg
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    if cfg.store_positions and cfg.positions != "learned":
        # M2M100's module keeps its table as `weights` (max_position_embeddings + 2 rows);
        # transformers does not save it, fairseq-converted checkpoints may hold it.
        name = "weights" if cfg.family == "m2m100" else "weight"
        for stack in ("encoder", "decoder"):
            sd[f"model.{stack}.embed_positions.{name}"] = model.position_table.clone()
    if older_export:
        if cfg.share:
            sd["model.encoder.embed_tokens.weight"] = sd["model.shared.weight"].clone()
            sd["model.decoder.embed_tokens.weight"] = sd["model.shared.weight"].clone()
        if cfg.tie:
            sd["lm_head.weight"] = model.output_weight().detach().clone()
    if not cfg.share:
        # Hugging Face keeps model.shared even when the stacks have their own tables;
        # Petrel's converter reads the decoder's own table then, so drop the unused one.
        del sd["model.shared.weight"]
    return sd


def write_safetensors(path, tensors, dtype="F32"):
    """dtype: "F32", or "F16" (IEEE half, round to nearest even) for a smaller checkpoint."""
    numpy_type = {"F32": "<f4", "F16": "<f2"}[dtype]
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].numpy().astype(numpy_type).tobytes()
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """{name: f32 tensor} from a safetensors file of F32/F16/BF16 tensors (what
    write_safetensors and Hugging Face write)."""
    with open(path, "rb") as f:
        raw = f.read()
    (header_size,) = struct.unpack_from("<Q", raw)
    header = json.loads(raw[8:8 + header_size])
    base = 8 + header_size
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        data = raw[base + start:base + end]
        if entry["dtype"] == "BF16":
            halves = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
            values = halves.view(np.float32)
        else:
            values = np.frombuffer(data, dtype={"F32": "<f4", "F16": "<f2"}[entry["dtype"]]).astype(np.float32)
        tensors[name] = torch.from_numpy(values.reshape(entry["shape"]).copy())
    return tensors
