"""An independent PyTorch forward pass of Marian's own transformer (with self-attention or
SSRU decoder layers) and of greedy decoding as bergamot-translator runs it: the second
oracle for Marian-native models, besides bergamot itself (issue #25).

Written from the source of browsermt/marian-dev at 2781d735d4a10dca876d61be587afdab2726293c
(the marian-dev submodule of browsermt/bergamot-translator 9271618e), read, not copied:

  * src/models/transformer.h: addPositionalEmbeddings (55-113) scales the embeddings by
    sqrt(dim-emb) and adds sinusoids built by src/graph/node_initializers.cpp
    sinusoidalPositionEmbeddings (215-234: frequency exp(-i*log(10000)/(d/2-1)), sin in the
    first half, cos in the second); preProcess/postProcess (165-202: ops 'd' dropout,
    'a' add the block's input, 'n' LayerNorm `<prefix>_ln_scale/_ln_bias`, '_pre' suffix
    for pre-processing; 'h' highway is not implemented here); Attention (228-260: scores
    scaled by 1/sqrt(head dim), softmax over keys), MultiHead (262-328: x*W + b for Wq, Wk,
    Wv, heads split as consecutive slices of d, then Wo, bo); LayerAttention (353-374),
    DecoderLayerSelfAttention (376-392: keys/values are all decoder inputs so far),
    LayerFFN (406-431: denseInline W1..Wn with the activation after all but the last,
    sizes from transformer-dim-ffn/-ffn-depth for encoder AND decoder - this marian-dev
    has no transformer-decoder-dim-ffn), DecoderLayerRNN (494-529: the RNN, then
    postProcess with prefix `<layer>_rnn_ffn`), EncoderTransformer::apply (536-596),
    DecoderTransformer::startState (665-687: zero SSRU state), step (696-880);
    lazyCreateOutputLayer (643-662: tied output uses `Wemb` for tied-embeddings-all or
    -src, else `decoder_Wemb`).
  * src/layers/generic.h denseInline (443-456: `<prefix>_W<i>` [in,out], `_b<i>` [1,out]),
    layerNorm (458-464: eps 1e-6); src/tensors/cpu/tensor_operators.cpp
    LayerNormalizationImpl (1102-1140: biased variance, sigma = sqrt(var + eps)).
  * src/graph/expression_operators.cpp 79-85: swish = x*sigmoid(x), gelu = x*sigmoid(1.702x).
  * src/rnn/cells.h SSRU (982-1066): x = h*W (no bias), f = h*Wf + bf, the next cell state
    highway(c, x, f) = sigmoid(f)*c + (1-sigmoid(f))*x (tensor_operators.cpp HighwayForward
    1593-1600), output relu(c); src/rnn/rnn.h SingleLayerRNN::apply: the recurrence reads
    the cell state, not the relu'd output.
  * src/models/decoder.h embeddingsFromPrediction (59-73): the first decoder input is an
    all-zero embedding (so the first step sees only the position-0 sinusoid).
  * src/layers/generic.cpp Output (245-257, 274-350): logits = h * Wt^T + b, with Wt the
    tied embedding table or `decoder_ff_logit_out_Wt` [V, d]; with a shortlist only the
    selected columns (and bias entries) are computed.
  * src/translator/beam_search.cpp search (250-515): UNK's column is suppressed unless
    allow-unk (301-308, 424-425); a hypothesis ending in EOS is final; after step t
    (0-based) the history holds t+1 steps and decoding stops, keeping the last word, once
    t+1 >= max-length-factor * batchWidth (486-494), so at most ceil(factor * W) tokens are
    made, W being the padded source width of the batch including EOS (a lone sentence's
    own length + 1). translator/history.h add/nBest: the final word of a hypothesis
    stopped by the length limit is kept.
  * src/data/shortlist.cpp BinaryShortlistGenerator::generate (257-309): the target ids
    [0, firstNum), every target id listed for every source token of the batch (EOS and
    padding included), the source ids themselves when the vocabulary is shared
    (bergamot's translation_model.cpp passes shared = source vocab == target vocab), then
    the smallest unselected ids >= firstNum until the count is a multiple of 8; sorted.
  * bergamot src/translator/text_processor.cpp wrap (110-139): a sentence longer than
    max-length-break - 1 pieces is cut into several, each with its own EOS; this
    reference translates only sentences that fit (greedy() refuses longer ones).
  * Word alignments (teacher_forced_cross_attention): src/models/transformer.h
    Attention (228-260: the weights are the softmax over the source positions, saved
    before dropout), collectOneHead (204-224: head 0, `slice(weights, -3, 0)`), step
    (810-825: the context attention of layer `transformer-guided-alignment-layer` -
    "last" = dec-depth, else a 1-based number - is saved when `alignment` is set);
    src/translator/beam_search.cpp toHyps/getAlignmentsForHypothesis (145-149, 181-224:
    the new hypothesis gets the attention row of the step that scored its word, for the
    beam entry it extends, without the batch's padding positions); hypothesis.h
    tracebackAlignment (74-83: one row per word of the hypothesis, its final EOS
    included). tools/reference/make_alignment_fixtures.py and
    tests/fixtures/alignment/README.md have the whole story.

Arithmetic is float32 as Marian's CPU float32 path (accumulation order differs, so
near-ties can resolve differently; that is the expected source of rare disagreement).

Input: weights as Marian stores them (matrices [in, out] for x*W, vectors [1, n], names
`Wemb`, `encoder_l1_self_Wq`, ...), as np.ndarray float32, and the model.yml options.
"""
import math
import struct

import numpy as np
import torch

LN_EPS = 1e-6
MAX_LENGTH_BREAK = 128  # bergamot's default max-length-break (Firefox uses the same)

# Options whose non-default values change the computation and that this file does not do.
_REFUSED_IF_SET = {
    "transformer-train-positions": False,
    "transformer-no-projection": False,
    "transformer-pool": False,
    "transformer-tied-layers": [],
    "output-approx-knn": [],
    "lemma-dim-emb": 0,
    "layer-normalization": False,  # only used by the SSRU cell (gamma_, gammaf_)
    "ulr": False,
    "factors-combine": None,
}


def _opt(options, key, default=None):
    return options.get(key, default)


def check_options(options):
    """Raise ValueError on anything this reference does not implement, by name."""
    if _opt(options, "type", "transformer") != "transformer":
        raise ValueError(f"model type {options.get('type')!r} is not implemented (only transformer)")
    for key, default in _REFUSED_IF_SET.items():
        value = options.get(key, default)
        if value not in (default, None, "", [], 0, False) and value != default:
            raise ValueError(f"option {key}: {value!r} is not implemented")
    for key in ("transformer-preprocess", "transformer-postprocess", "transformer-postprocess-emb",
                "transformer-postprocess-top"):
        ops = options.get(key, "") or ""
        bad = set(ops) - {"d", "a", "n"}
        if bad:
            raise ValueError(f"option {key}: {ops!r} has operations not implemented: {sorted(bad)}")
        if key in ("transformer-preprocess", "transformer-postprocess-emb") and "a" in ops:
            raise ValueError(f"option {key}: {ops!r}: Marian aborts on 'a' in pre-processing")
    autoreg = _opt(options, "transformer-decoder-autoreg", "self-attention")
    if autoreg not in ("self-attention", "rnn"):
        raise ValueError(f"transformer-decoder-autoreg {autoreg!r} is not implemented")
    if autoreg == "rnn" and _opt(options, "dec-cell", "ssru") != "ssru":
        raise ValueError(f"dec-cell {options.get('dec-cell')!r} is not implemented (only ssru)")
    for act_key in ("transformer-ffn-activation",):
        if _opt(options, act_key, "swish") not in ("relu", "swish", "gelu"):
            raise ValueError(f"{act_key} {options.get(act_key)!r} is not one of relu, swish, gelu")
    # This marian-dev sizes the decoder's FFN with the encoder's options; a model that
    # asks for something else would be run differently by newer Marian: refuse it.
    for dec_key, enc_key in (("transformer-decoder-dim-ffn", "transformer-dim-ffn"),
                             ("transformer-decoder-ffn-depth", "transformer-ffn-depth")):
        dec = options.get(dec_key, 0) or 0
        if dec and dec != options.get(enc_key):
            raise ValueError(f"{dec_key} {dec} differs from {enc_key} {options.get(enc_key)}: "
                             "bergamot's marian-dev ignores it; not implemented")
    if options.get("transformer-heads", 1) <= 0 or options["dim-emb"] % options.get("transformer-heads", 1):
        raise ValueError("dim-emb must be a multiple of transformer-heads")


def sinusoids(start, length, dim):
    """Marian's position table rows start..start+length-1, computed in float32 like
    node_initializers.cpp sinusoidalPositionEmbeddings."""
    half = dim // 2
    increment = np.float32(math.log(np.float32(10000.0))) / (np.float32(half) - np.float32(1.0))
    out = np.zeros((length, dim), dtype=np.float32)
    i = np.arange(half, dtype=np.float32)
    for row, p in enumerate(range(start, start + length)):
        v = np.float32(p) * np.exp(i * -increment).astype(np.float32)
        out[row, :half] = np.sin(v)
        out[row, half:2 * half] = np.cos(v)
    return torch.from_numpy(out)


def shortlist_indices(src_ids_with_eos, first, lists, vocab_size, shared=True):
    """The target ids Marian's BinaryShortlistGenerator selects for one batch (here one
    sentence): sorted list."""
    selected = np.zeros(vocab_size, dtype=bool)
    selected[:min(first, vocab_size)] = True
    seen = set()
    for s in src_ids_with_eos:
        if shared:
            selected[s] = True
        if s not in seen:
            seen.add(s)
            for t in lists[s]:
                selected[t] = True
    count = int(selected.sum())
    i = first
    while i < vocab_size and count % 8:
        if not selected[i]:
            selected[i] = True
            count += 1
        i += 1
    return [int(i) for i in np.nonzero(selected)[0]]


def read_binary_shortlist(path):
    """Parse a `lex.*.s2t.bin` (marian-dev src/data/shortlist.cpp load 162-199) with all of
    Marian's checks; returns (first, best, lists) with lists[s] the target ids of source s."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 48:
        raise ValueError("shortlist shorter than its header")
    magic, checksum, first, best, offsets_len, lists_len = struct.unpack_from("<6Q", blob)
    if magic != 0xF11A48D5013417F5:
        raise ValueError("bad shortlist magic")
    if 48 + 8 * offsets_len + 4 * lists_len != len(blob):
        raise ValueError("shortlist size does not match its header")
    if shortlist_checksum(blob) != checksum:
        raise ValueError("shortlist checksum mismatch")
    offsets = np.frombuffer(blob, dtype="<u8", count=offsets_len, offset=48)
    targets = np.frombuffer(blob, dtype="<u4", count=lists_len, offset=48 + 8 * offsets_len)
    # contentCheck: every offset but the last < shortListsSize (so trailing empty lists
    # are refused, as Marian does), the last == shortListsSize
    if offsets_len < 1 or offsets[-1] != lists_len or np.any(offsets[:-1] >= lists_len):
        raise ValueError("shortlist offsets out of bounds")
    lists = [targets[offsets[s]:offsets[s + 1]].tolist() for s in range(offsets_len - 1)]
    return int(first), int(best), lists


def shortlist_checksum(blob):
    """util::hashMem<uint64_t, uint64_t> (marian-dev src/common/hash.h) over the 64-bit
    words from firstNum to the end of the file (a trailing partial word is not hashed)."""
    mask = (1 << 64) - 1
    seed = 0
    words = (len(blob) - 16) // 8
    for (w,) in struct.iter_unpack("<Q", blob[16:16 + 8 * words]):
        seed ^= (w + 0x9E3779B9 + ((seed << 6) & mask) + (seed >> 2)) & mask
    return seed


class MarianNativeModel:
    def __init__(self, weights, options):
        check_options(options)
        self.options = dict(options)
        self.w = {name: torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))
                  for name, value in weights.items()}
        self.d = int(options["dim-emb"])
        self.heads = int(options["transformer-heads"])
        self.enc_depth = int(options["enc-depth"])
        self.dec_depth = int(options["dec-depth"])
        self.ffn_depth = int(options.get("transformer-ffn-depth", 2))
        self.autoreg = options.get("transformer-decoder-autoreg", "self-attention")
        act = options.get("transformer-ffn-activation", "swish")
        self.act = {"relu": torch.relu,
                    "swish": lambda x: x * torch.sigmoid(x),
                    "gelu": lambda x: x * torch.sigmoid(1.702 * x)}[act]
        self.ops_pre = options.get("transformer-preprocess", "") or ""
        self.ops_post = options.get("transformer-postprocess", "dan") or ""
        self.ops_emb = options.get("transformer-postprocess-emb", "d") or ""
        self.ops_top = options.get("transformer-postprocess-top", "") or ""
        tied_all = bool(options.get("tied-embeddings-all", False))
        tied_src = bool(options.get("tied-embeddings-src", False))
        tied = bool(options.get("tied-embeddings", False))
        self.src_emb_name = "Wemb" if (tied_all or tied_src) else "encoder_Wemb"
        self.trg_emb_name = "Wemb" if (tied_all or tied_src) else "decoder_Wemb"
        if tied or tied_all:
            self.out_name, self.out_transposed = self.trg_emb_name, True
        elif "decoder_ff_logit_out_W" in self.w:  # legacy untransposed [d, V]
            self.out_name, self.out_transposed = "decoder_ff_logit_out_W", False
        else:
            self.out_name, self.out_transposed = "decoder_ff_logit_out_Wt", True
        self.out_bias = None if options.get("output-omit-bias", False) else self.w["decoder_ff_logit_out_b"]
        self.vocab_size = int(self.w[self.out_name].shape[0 if self.out_transposed else 1])
        # name -> list of max|input| of each call of that GEMM: what marian's
        # --dump-quantmult prints, from which scripts/alphas/extract_stats.py makes alphas
        self.gemm_maxabs = None

    # ---- building blocks -------------------------------------------------------------
    def _record(self, name, x):
        if self.gemm_maxabs is not None:
            self.gemm_maxabs.setdefault(name, []).append(float(x.abs().max()))

    def dense(self, x, name, bias_name=None):
        self._record(name, x)
        y = x @ self.w[name]
        if bias_name is not None:
            y = y + self.w[bias_name].reshape(-1)
        return y

    def layer_norm(self, x, prefix, suffix=""):
        scale = self.w[prefix + "_ln_scale" + suffix].reshape(-1)
        bias = self.w[prefix + "_ln_bias" + suffix].reshape(-1)
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return scale * ((x - mean) / torch.sqrt(var + LN_EPS)) + bias

    def pre_process(self, prefix, ops, x):
        for op in ops:
            if op == "n":
                x = self.layer_norm(x, prefix, "_pre")
        return x  # 'd' is dropout: nothing at inference

    def post_process(self, prefix, ops, x, prev):
        for op in ops:
            if op == "a":
                x = x + prev
            elif op == "n":
                x = self.layer_norm(x, prefix)
        return x

    def embed(self, table_name, ids, start):
        e = self.w[table_name][torch.tensor(ids, dtype=torch.long)]
        return np.float32(math.sqrt(self.d)) * e + sinusoids(start, len(ids), self.d)

    def multi_head(self, prefix, q_in, kv_in, cached_kv=None, weights_out=None):
        """q_in [T, d], kv_in [S, d]; returns [T, d] after Wo (cached_kv: precomputed (k, v)).
        weights_out: a list to which the attention probabilities [H, T, S] (after the
        softmax, per head) are appended."""
        q = self.dense(q_in, prefix + "_Wq", prefix + "_bq")
        if cached_kv is None:
            k = self.dense(kv_in, prefix + "_Wk", prefix + "_bk")
            v = self.dense(kv_in, prefix + "_Wv", prefix + "_bv")
        else:
            k, v = cached_kv
        hd = self.d // self.heads
        qh = q.reshape(-1, self.heads, hd).transpose(0, 1)   # [H, T, hd]
        kh = k.reshape(-1, self.heads, hd).transpose(0, 1)   # [H, S, hd]
        vh = v.reshape(-1, self.heads, hd).transpose(0, 1)
        scores = (qh @ kh.transpose(1, 2)) * np.float32(1.0 / math.sqrt(hd))
        weights = torch.softmax(scores, dim=-1)
        if weights_out is not None:
            weights_out.append(weights.clone())
        out = (weights @ vh).transpose(0, 1).reshape(-1, self.d)
        return self.dense(out, prefix + "_Wo", prefix + "_bo")

    def layer_attention(self, prefix, x, kv, cached_kv=None, weights_out=None):
        y = self.pre_process(prefix + "_Wo", self.ops_pre, x)
        y = self.multi_head(prefix, y, kv if cached_kv is None else None, cached_kv, weights_out)
        return self.post_process(prefix + "_Wo", self.ops_post, y, x)

    def layer_ffn(self, prefix, x):
        y = self.pre_process(prefix + "_ffn", self.ops_pre, x)
        for i in range(1, self.ffn_depth):
            y = self.act(self.dense(y, f"{prefix}_W{i}", f"{prefix}_b{i}"))
        y = self.dense(y, f"{prefix}_W{self.ffn_depth}", f"{prefix}_b{self.ffn_depth}")
        return self.post_process(prefix + "_ffn", self.ops_post, y, x)

    # ---- encoder / decoder -------------------------------------------------------------
    def encode(self, src_ids):
        """src_ids include the final EOS; returns the encoder output [S, d]."""
        with torch.no_grad():
            x = self.embed(self.src_emb_name, src_ids, 0)
            prev = x
            x = self.pre_process("encoder_emb", self.ops_emb, x)
            for i in range(1, self.enc_depth + 1):
                x = self.layer_attention(f"encoder_l{i}_self", x, x)
                x = self.layer_ffn(f"encoder_l{i}_ffn", x)
            return self.post_process("encoder_top", self.ops_top, x, prev)

    def start_state(self, context):
        """Decoder state before the first step: position 0, no history; the cross-attention
        keys/values are projected once, as Marian caches them."""
        cross = []
        for i in range(1, self.dec_depth + 1):
            p = f"decoder_l{i}_context"
            cross.append((self.dense(context, p + "_Wk", p + "_bk"), self.dense(context, p + "_Wv", p + "_bv")))
        if self.autoreg == "rnn":
            layers = [torch.zeros(1, self.d) for _ in range(self.dec_depth)]  # SSRU cell states c_0
        else:
            layers = [None] * self.dec_depth  # decoder inputs seen so far, per layer
        return {"pos": 0, "cross": cross, "layers": layers}

    def step_logits(self, state, prev_id, shortlist=None, cross_attention=None):
        """One decoder step. prev_id None at position 0 (the all-zero start embedding).
        Returns logits over the whole vocabulary, or over `shortlist` (sorted ids).
        cross_attention: a list to which each decoder layer's cross-attention
        probabilities of this step, [heads, source positions], are appended (layer 1 first)."""
        with torch.no_grad():
            pos = state["pos"]
            if prev_id is None:
                x = sinusoids(pos, 1, self.d)  # sqrt(d) * 0 + PE[pos]
            else:
                x = self.embed(self.trg_emb_name, [prev_id], pos)
            prev = x
            x = self.pre_process("decoder_emb", self.ops_emb, x)
            for i in range(self.dec_depth):
                n = i + 1
                if self.autoreg == "rnn":
                    p = f"decoder_l{n}_rnn"
                    h = self.pre_process(p, self.ops_pre, x)
                    cand = self.dense(h, p + "_W")
                    gate = torch.sigmoid(self.dense(h, p + "_Wf", p + "_bf"))
                    cell = gate * state["layers"][i] + (1 - gate) * cand
                    state["layers"][i] = cell
                    y = torch.relu(cell)
                    x = self.post_process(p + "_ffn", self.ops_post, y, x)
                else:
                    p = f"decoder_l{n}_self"
                    hist = x if state["layers"][i] is None else torch.cat([state["layers"][i], x], 0)
                    state["layers"][i] = hist
                    x = self.layer_attention(p, x, hist)
                weights = None if cross_attention is None else []
                x = self.layer_attention(f"decoder_l{n}_context", x, None, cached_kv=state["cross"][i],
                                         weights_out=weights)
                if cross_attention is not None:
                    cross_attention.append(weights[0][:, 0])
                x = self.layer_ffn(f"decoder_l{n}_ffn", x)
            x = self.post_process("decoder_top", self.ops_top, x, prev)
            state["pos"] = pos + 1
            return self.output_logits(x, shortlist)[0]

    def output_logits(self, h, shortlist=None):
        W = self.w[self.out_name]
        if not self.out_transposed:
            W = W.t()
        b = self.out_bias
        if shortlist is not None:
            idx = torch.tensor(shortlist, dtype=torch.long)
            W = W[idx]
            b = None if b is None else b.reshape(-1)[idx]
        self._record(self.out_name, h)
        y = h @ W.t()
        if b is not None:
            y = y + b.reshape(-1)
        return y

    def teacher_forced_cross_attention(self, source, target_ids, ended_on_eos):
        """The cross-attention of a decode forced along `target_ids` (the output tokens,
        without the final EOS; `source`: the source ids with their EOS).

        Returns (attention, logits): attention [rows, dec-depth, heads, len(source)], the
        softmax probabilities of every layer and head, row t from the step whose output is
        target token t (its query is the decoder state after target_ids[:t]; row 0 is the
        step from the all-zero start), one more row for the final EOS when `ended_on_eos`;
        logits [rows, vocabulary] of the same steps. This is what Marian's beam search
        carries per hypothesis (beam_search.cpp toHyps), since a step's attention depends
        only on the hypothesis' own prefix. Pick the layer Marian saves with
        alignment_layer()."""
        rows = len(target_ids) + (1 if ended_on_eos else 0)
        attention, logits = [], []
        with torch.no_grad():
            state = self.start_state(self.encode(list(source)))
            prev = None
            for t in range(rows):
                layers = []
                logits.append(self.step_logits(state, prev, cross_attention=layers))
                attention.append(torch.stack(layers))
                if t < len(target_ids):
                    prev = target_ids[t]
        if not rows:
            return torch.zeros(0, self.dec_depth, self.heads, len(source)), torch.zeros(0, self.vocab_size)
        return torch.stack(attention), torch.stack(logits)

    def alignment_layer(self):
        """The 0-based decoder layer whose cross-attention Marian returns as the alignment:
        `transformer-guided-alignment-layer` from model.yml, "last" (the default) or a
        1-based layer number (transformer.h step 815-822)."""
        value = str(self.options.get("transformer-guided-alignment-layer", "last"))
        layer = self.dec_depth - 1 if value == "last" else int(value) - 1
        if not 0 <= layer < self.dec_depth:
            raise ValueError(f"transformer-guided-alignment-layer {value}: the decoder has {self.dec_depth} layers")
        return layer

    def greedy(self, src_ids, eos, unk, max_length_factor=2.0, shortlist=None, batch_width=None,
               max_length_break=MAX_LENGTH_BREAK):
        """Beam-1 search as bergamot runs it. src_ids: SentencePiece ids without EOS.
        shortlist: None or (first, lists, shared). batch_width: the padded source width of
        the batch the sentence is in, if not alone (defaults to len(src_ids) + 1).
        Returns the target ids without the final EOS."""
        if len(src_ids) > max_length_break - 1:
            raise ValueError(f"{len(src_ids)} pieces: bergamot would split this sentence "
                             f"(max-length-break {max_length_break})")
        source = list(src_ids) + [eos]
        width = batch_width or len(source)
        limit = math.ceil(max_length_factor * width)
        selected = None
        if shortlist is not None:
            first, lists, shared = shortlist
            selected = shortlist_indices(source, first, lists, self.vocab_size, shared)
        state = self.start_state(self.encode(source))
        out, prev = [], None
        while True:
            logits = self.step_logits(state, prev, selected)
            columns = selected if selected is not None else range(self.vocab_size)
            if selected is None:
                logits[unk] = -math.inf
            elif unk in selected:
                logits[selected.index(unk)] = -math.inf
            best = int(torch.argmax(logits))
            word = columns[best]
            if word == eos:
                return out
            out.append(word)
            if len(out) >= limit:
                return out
            prev = word
