#!/usr/bin/env python3
"""Writes Petrel's oracle fixtures: small random MarianMT-layout checkpoints
(config.json + model.safetensors [+ vocab.json]) and what the PyTorch reference
computes for them (encoder states, first-step logits, greedy and beam outputs,
teacher-forced argmax), for a right-padded batch; and, under "padded", the same for
inputs holding pad ids (which transformers' generate() masks: padded_inputs).

    /usr/bin/python3 tools/reference/make_fixtures.py tests/fixtures/oracle [NAME ...]

Needs Debian's python3-torch; CI uses the committed output and needs no PyTorch.
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_reference as ref  # noqa: E402

MAX_NEW = 12
# Every option the runtime supports appears in at least one configuration.
CONFIGS = {
    "post_swish_concat_tied": dict(cfg=dict(activation="swish", positions="concatenated", scale_embedding=True),
                                   beam=3, alpha=1.0, vocab_json=True, shortlist=dict(first=4, best=3)),
    "pre_gelu_interleaved_untied": dict(cfg=dict(activation="gelu", normalize_before=True, positions="interleaved",
                                                 store_positions=True, scale_embedding=False, tie=False),
                                        beam=4, alpha=0.6),
    "post_relu_learned_unshared": dict(cfg=dict(activation="relu", positions="learned", share=False,
                                                scale_embedding=True),
                                       beam=2, alpha=1.0, convert_positions="learned"),
    "older_export_concat": dict(cfg=dict(activation="swish", positions="concatenated", store_positions=True,
                                         scale_embedding=True, encoder_layers=1, decoder_layers=3),
                                beam=3, alpha=1.0, older_export=True),
    # EOS other than 0 (as opus-mt-tc-big-fr-en), and decoding defaults in a
    # generation_config.json that wins over config.json's (transformers' rule).
    "generation_eos5": dict(cfg=dict(activation="swish", positions="concatenated", scale_embedding=True, eos=5),
                            beam=3, alpha=0.8, forced_eos=5, eos_boost=0.5,
                            config_extra=dict(num_beams=1, max_length=40, forced_eos_token_id=5),
                            generation_config=dict(num_beams=3, max_length=9, length_penalty=0.8,
                                                   early_stopping=False, forced_eos_token_id=5,
                                                   bad_words_ids=[[47]], decoder_start_token_id=47,
                                                   eos_token_id=5, pad_token_id=47)),
    # Separate source and target vocabularies (share_encoder_decoder_embeddings false,
    # decoder_vocab_size 40 of 48) and an untied output projection.
    "separate_vocab_untied": dict(cfg=dict(activation="swish", positions="concatenated", scale_embedding=True,
                                           share=False, tie=False, target_vocab=40),
                                  beam=3, alpha=1.0),
    # The shape of opus-mt's tc-big models (d_model 1024, 16 heads) at tiny depth, with
    # weights a test regenerates (50 MB as f32: not committed).
    "tc_big_d1024": dict(cfg=dict(activation="swish", positions="concatenated", scale_embedding=True,
                                  d_model=1024, heads=16, ffn=256, encoder_layers=1, decoder_layers=1, vocab=40),
                         beam=3, alpha=1.0, generated_weights=True),
}


def init_weights(model, gen, eos_boost):
    """Larger than training-time init so random models make confident, distinct choices."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if is_layer_norm(name):
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif "embed" in name or "shared" in name:
                p.copy_(0.15 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)
        if model.cfg.final_logits_bias:  # M2M100 has none (make_family_fixtures boosts EOS otherwise)
            model.final_logits_bias.copy_(0.1 * torch.randn(model.final_logits_bias.shape, generator=gen))
            # Make EOS a real contender so finished hypotheses occur within MAX_NEW steps.
            model.final_logits_bias[0, model.cfg.eos] += eos_boost


def is_layer_norm(name):
    return "layer_norm" in name or "layernorm" in name  # mBART: layernorm_embedding


# Weights a test can regenerate (fixtures too big to commit, e.g. d_model 1024): tensor k
# of the sorted names, element i = center + scale * (2u - 1), u = the top 24 bits of
# splitmix64(seed_k * 0x9E3779B97F4A7C15 + i) / 2^24, computed in double and rounded to
# f32. tests/support/test_support.cpp (generated_tensor) implements the same.
def splitmix64_uniform(seed, count):
    with np.errstate(over="ignore"):
        z = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.arange(count, dtype=np.uint64)
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)).astype(np.float64) / float(1 << 24)


def generated_weights(model, first_seed=1, scales=None):
    """Fills `model` from the generator; returns the manifest that regenerates it
    (tensor k of the sorted names gets seed first_seed + k). `scales` replaces the
    default scale of a kind of tensor: {"embedding": s, "linear": factor of the default}."""
    scales = scales or {}
    sd = ref.state_dict_for_export(model)
    manifest, values = [], {}
    for k, name in enumerate(sorted(sd)):
        shape = list(sd[name].shape)
        if is_layer_norm(name) and name.endswith("weight"):
            center, scale = 1.0, 0.3
        elif name.endswith("bias"):
            center, scale = 0.0, 0.15
        elif "embed" in name or "shared" in name:
            center, scale = 0.0, scales.get("embedding", 0.25)
        else:  # a linear layer's [out, in] weight: std about 1/sqrt(in)
            center, scale = 0.0, scales.get("linear", 1.0) * (3.0 / shape[-1]) ** 0.5
        count = int(np.prod(shape))
        seed = first_seed + k
        v = (center + scale * (2.0 * splitmix64_uniform(seed, count) - 1.0)).astype(np.float32)
        values[name] = torch.from_numpy(v.reshape(shape))
        manifest.append({"name": name, "shape": shape, "seed": seed, "center": center, "scale": scale})
    missing, unexpected = model.load_state_dict(values, strict=False)
    assert not unexpected, unexpected
    return manifest


def make_batch(cfg, gen, lengths):
    sentences = []
    for n in lengths:
        body = torch.randint(1, cfg.vocab - 1, (n - 1,), generator=gen).tolist()
        sentences.append([t if t != cfg.eos else 1 for t in body] + [cfg.eos])
    return sentences


def check_kv_cache(model, memory, mask, tokens):
    """The reference's cached step must match its own full pass."""
    full = model.decode_full(torch.tensor([tokens]), memory, mask)[0]
    cache = [None] * model.cfg.decoder_layers
    worst = 0.0
    for step, tok in enumerate(tokens):
        logits = model.decode_step(torch.tensor([tok]), step, cache, memory, mask)[0]
        worst = max(worst, float((logits - full[step]).abs().max()))
    assert worst < 1e-4, f"KV-cache step differs from the full pass by {worst}"
    return worst


def f32_list(t):
    """A float32 tensor as (nested) lists of 9 significant digits: enough to give back every
    float32 exactly, and half the text of Python's float64 repr."""
    def short(x):
        return [short(v) for v in x] if isinstance(x, list) else float(f"{x:.9g}")
    return short(t.tolist())


def padded_inputs(inputs, pad, eos):
    """The longest input with pad ids inside, which generate() masks (ref.Model.source_mask):
    two first; one after the second token; three after the first and two at the end; and
    EOS alone among pads."""
    s = max(inputs, key=len)
    return [[pad, pad] + s, s[:2] + [pad] + s[2:], s[:1] + [pad] * 3 + s[1:] + [pad] * 2, [pad, pad, eos, pad]]


def padded_outputs(model, inputs, beam, alpha, max_new, forced_eos=None, forced_bos=None):
    """The "padded" section of expected.json: for inputs holding pad ids, the encoder states
    of the tokens not masked (the rows Petrel keeps), the raw first-step logits, greedy and
    first-k beam search (with the fixture's forced tokens), all from one right-padded batch."""
    cfg = model.cfg
    assert cfg.pad != cfg.eos, "generate() masks no pad that is EOS"
    longest = max(map(len, inputs))
    ids = torch.tensor([s + [cfg.pad] * (longest - len(s)) for s in inputs])
    memory, mask = model.encode(ids)
    start = torch.tensor([[cfg.decoder_start]])
    out = {"inputs": inputs, "encoder_states": [], "first_step_logits": [], "greedy": [], "beam": []}
    for b in range(len(inputs)):
        seen = torch.nonzero(torch.isfinite(mask[b, 0, 0])).flatten()
        out["encoder_states"].append(f32_list(memory[b, seen]))
        mem, msk = memory[b:b + 1], mask[b:b + 1]
        out["first_step_logits"].append(f32_list(model.decode_full(start, mem, msk)[0, 0]))
        ids_out, score = ref.greedy(model, mem, msk, max_new, forced_eos=forced_eos, forced_bos=forced_bos)
        out["greedy"].append({"ids": ids_out, "score": score})
        hyps = ref.beam_search(model, mem, msk, beam, max_new, alpha, stop="first-k", forced_eos=forced_eos,
                               forced_bos=forced_bos)
        out["beam"].append([{"ids": h, "score": sc} for h, sc in hyps])
    return out


def shortlist_outputs(model, cfg, spec, inputs, memory, mask, d, seed):
    """Writes a random lexical table (lex.s2t, Marian's format, with NULL and unknown
    tokens to skip) and the greedy/beam outputs restricted to each sentence's shortlist."""
    gen = torch.Generator().manual_seed(seed + 500)

    def name_of(i):
        return "</s>" if i == cfg.eos else "<pad>" if i == cfg.pad else f"w{i}"

    lines = []
    for s in range(cfg.vocab):
        targets = torch.randperm(cfg.vocab, generator=gen)[:6].tolist()
        probs = torch.rand(6, generator=gen).tolist()
        lines += [f"{name_of(t)} {name_of(s)} {p:.6f}" for t, p in zip(targets, probs)]
        lines.append(f"NULL {name_of(s)} 0.5")
    lines.append("w1 unknown-token 0.9")
    with open(os.path.join(d, "lex.s2t"), "w") as f:
        f.write("\n".join(lines) + "\n")
    token_ids = {name_of(i): i for i in range(cfg.vocab)}
    sl = spec["shortlist"]
    always, table = ref.shortlist_table(lines, token_ids, sl["first"], sl["best"], cfg.eos)
    bad = [w[0] for w in cfg.bad_words]
    out = {"file": "lex.s2t", "first": sl["first"], "best": sl["best"], "allowed": [], "greedy": [], "beam": []}
    for b, s in enumerate(inputs):
        allowed = ref.shortlist_allowed(always, table, s, bad)
        mem, msk = memory[b:b + 1], mask[b:b + 1]
        ids, score = ref.greedy(model, mem, msk, MAX_NEW, allowed=allowed)
        hyps = ref.beam_search(model, mem, msk, spec["beam"], MAX_NEW, spec["alpha"], allowed=allowed)
        out["allowed"].append(allowed)
        out["greedy"].append({"ids": ids, "score": score})
        out["beam"].append([{"ids": h, "score": sc} for h, sc in hyps])
    return out


def build(name, spec, out_dir, seed):
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    cfg = ref.Config(**spec["cfg"])
    model = ref.Model(cfg).eval()
    init_weights(model, gen, spec.get("eos_boost", 1.0))
    manifest = generated_weights(model) if spec.get("generated_weights") else None
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({**cfg.hf_config(), **spec.get("config_extra", {})}, f, indent=2)
    if "generation_config" in spec:
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump(spec["generation_config"], f, indent=2)
    forced_eos = spec.get("forced_eos")  # the model's forced_eos_token_id applies to every search
    if manifest is not None:  # too big to commit: the test regenerates model.safetensors
        with open(os.path.join(d, "generated_weights.json"), "w") as f:
            json.dump(manifest, f, indent=1)
    else:
        ref.write_safetensors(os.path.join(d, "model.safetensors"),
                              ref.state_dict_for_export(model, spec.get("older_export", False)))
    if spec.get("vocab_json"):
        vocab = {("</s>" if i == cfg.eos else "<pad>" if i == cfg.pad else f"w{i}"): i for i in range(cfg.vocab)}
        with open(os.path.join(d, "vocab.json"), "w") as f:
            json.dump(vocab, f, indent=1)

    inputs = make_batch(cfg, gen, [7, 4, 1])
    longest = max(map(len, inputs))
    ids = torch.tensor([s + [cfg.pad] * (longest - len(s)) for s in inputs])
    with torch.no_grad():
        memory, mask = model.encode(ids, [len(s) for s in inputs])
        expected = {
            "name": name,
            "convert_positions": spec.get("convert_positions", "auto"),
            # A pre-LN model of type marian is converted with --norm pre (the converter
            # does not take the structure from config keys transformers ignores).
            "convert_norm": "pre" if cfg.normalize_before else "auto",
            "inputs": inputs,
            "max_new_tokens": MAX_NEW,
            "encoder_states": [memory[b, :len(s)].tolist() for b, s in enumerate(inputs)],
            "first_step_logits": [], "greedy": [], "teacher_forced": [],
            # results: stop once `width` have finished (early_stopping=True); results_heuristic:
            # Hugging Face's default rule (early_stopping=False).
            "beam": {"width": spec["beam"], "alpha": spec["alpha"], "results": [], "results_heuristic": []},
        }
        worst_cache = 0.0
        for b, s in enumerate(inputs):
            mem, msk = memory[b:b + 1], mask[b:b + 1]
            start = torch.tensor([[cfg.decoder_start]])
            expected["first_step_logits"].append(model.decode_full(start, mem, msk)[0, 0].tolist())
            out, score = ref.greedy(model, mem, msk, MAX_NEW, forced_eos=forced_eos)
            expected["greedy"].append({"ids": out, "score": score})
            tokens = [cfg.decoder_start] + out
            bad = [w[0] for w in cfg.bad_words]
            lp = ref.step_log_probs(model.decode_full(torch.tensor([tokens]), mem, msk)[0], bad)
            expected["teacher_forced"].append({"tokens": tokens, "argmax": lp.argmax(-1).tolist()})
            worst_cache = max(worst_cache, check_kv_cache(model, mem, msk, tokens))
            for key, stop in (("results", "first-k"), ("results_heuristic", "heuristic")):
                hyps = ref.beam_search(model, mem, msk, spec["beam"], MAX_NEW, spec["alpha"], stop=stop,
                                       forced_eos=forced_eos)
                expected["beam"][key].append([{"ids": h, "score": sc} for h, sc in hyps])
        expected["kv_cache_max_diff"] = worst_cache
        if "generation_config" in spec:  # what decoding with the checkpoint's own defaults gives
            g = spec["generation_config"]
            stop = "first-k" if g.get("early_stopping") else "heuristic"
            max_new = g["max_length"] - 1
            expected["generation"] = {"greedy": [], "beam": [], "num_beams": g["num_beams"],
                                      "max_new_tokens": max_new, "length_penalty": g["length_penalty"],
                                      "beam_stop": stop, "forced_eos_id": g["forced_eos_token_id"]}
            for b in range(len(inputs)):
                mem, msk = memory[b:b + 1], mask[b:b + 1]
                out, score = ref.greedy(model, mem, msk, max_new, g["length_penalty"], forced_eos=forced_eos)
                expected["generation"]["greedy"].append({"ids": out, "score": score})
                hyps = ref.beam_search(model, mem, msk, g["num_beams"], max_new, g["length_penalty"], stop=stop,
                                       forced_eos=forced_eos)
                expected["generation"]["beam"].append([{"ids": h, "score": sc} for h, sc in hyps])
        if "shortlist" in spec:
            expected["shortlist"] = shortlist_outputs(model, cfg, spec, inputs, memory, mask, d, seed)
        expected["padded"] = padded_outputs(model, padded_inputs(inputs, cfg.pad, cfg.eos), spec["beam"],
                                            spec["alpha"], MAX_NEW, forced_eos=forced_eos)
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"{name}: greedy {[g['ids'] for g in expected['greedy']]}, kv-cache diff {worst_cache:.2e}")


# --- an opus-mt-shaped checkpoint with text: source.spm, target.spm, vocab.json -------
MARIAN_TEXT = "marian_text"
SPM_MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures",
                          "sentencepiece", "models")
TEXT_INPUTS = [
    "Open the file",
    ">>fra<< Save changes?",
    "Cannot open %s: permission denied",
    "Line one </s> line two <unk>",
    "  spaces   around  ",
    "数据 Daten 데이터",
    "",
]


def corpus_lines(count):
    """Real lines from the SentencePiece fixtures' corpus (gettext messages, many scripts)."""
    import lzma
    path = os.path.join(SPM_MODELS, "..", "corpus.txt.xz")
    with lzma.open(path, "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    step = max(1, len(lines) // count)
    return [lines[i] for i in range(0, len(lines), step)][:count]


def build_marian_text(out_dir, seed):
    """A random model whose vocabulary is opus-mt's shape: "</s>" 0, "<unk>" 1, the
    pieces of source.spm (a unigram nmt_nfkc model) and target.spm (a BPE model with byte
    fallback and >>xx<< language codes), every 7th source-only piece left out (so it
    encodes as <unk>), "<pad>" last. Expected: what tools/reference/marian_tokenizer.py
    (MarianTokenizer, transformers 4.22-4.33 rules) gives for real lines, and the text of
    the oracle's greedy translations of a few inputs."""
    import shutil
    import sentencepiece as spm
    import marian_tokenizer as mt
    d = os.path.join(out_dir, MARIAN_TEXT)
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(SPM_MODELS, "unigram_nfkc.spm"), os.path.join(d, "source.spm"))
    shutil.copy(os.path.join(SPM_MODELS, "bpe_identity_bytes_udf.spm"), os.path.join(d, "target.spm"))
    source = spm.SentencePieceProcessor(model_file=os.path.join(d, "source.spm"))
    target = spm.SentencePieceProcessor(model_file=os.path.join(d, "target.spm"))
    specials = {"<unk>", "<s>", "</s>"}
    target_pieces = [target.id_to_piece(i) for i in range(target.get_piece_size())]
    source_pieces = [source.id_to_piece(i) for i in range(source.get_piece_size())]
    tokens, seen = ["</s>", "<unk>"], {"</s>", "<unk>"}
    for i, p in enumerate(source_pieces):
        if p in specials or p in seen or (i % 7 == 0 and p not in target_pieces):
            continue
        tokens.append(p)
        seen.add(p)
    for p in target_pieces:
        if p not in specials and p not in seen:
            tokens.append(p)
            seen.add(p)
    tokens.append("<pad>")
    vocab = {t: i for i, t in enumerate(tokens)}
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=0)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"source_lang": "en", "target_lang": "de", "model_max_length": 512}, f)

    torch.manual_seed(seed)
    cfg = ref.Config(d_model=32, heads=4, ffn=64, encoder_layers=2, decoder_layers=2, vocab=len(tokens),
                     max_positions=64, eos=0, pad=len(tokens) - 1)
    model = ref.Model(cfg).eval()
    manifest = generated_weights(model)
    with open(os.path.join(d, "generated_weights.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg.hf_config(), f, indent=2)

    tok = mt.MarianTokenizer(d)
    lines = corpus_lines(2000)
    expected = {"name": MARIAN_TEXT, "rules": "transformers 4.22-4.33 MarianTokenizer (marian_tokenizer.py)",
                "convert_positions": "auto", "convert_norm": "auto",
                "tokenizer": [{"text": t, "pieces": tok.tokenize(t) + ["</s>"], "ids": tok.encode(t),
                               "decoded": tok.decode(tok.encode(t))} for t in TEXT_INPUTS + lines],
                "translations": []}
    with torch.no_grad():
        for text in TEXT_INPUTS:
            ids = tok.encode(text)
            memory, mask = model.encode(torch.tensor([ids]), [len(ids)])
            out, score = ref.greedy(model, memory, mask, MAX_NEW)
            expected["translations"].append({"text": text, "ids": ids, "output_ids": out, "score": score,
                                             "output_text": tok.decode(out)})
    with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False)
    print(f"{MARIAN_TEXT}: vocabulary {len(tokens)}, {len(expected['tokenizer'])} tokenizer lines, "
          f"translations {[t['output_text'] for t in expected['translations']]}")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/oracle"
    torch.set_num_threads(1)
    only = set(sys.argv[2:])
    for seed, (name, spec) in enumerate(CONFIGS.items()):
        if not only or name in only:
            build(name, spec, out_dir, 1000 + seed)
    if not only or MARIAN_TEXT in only:
        build_marian_text(out_dir, 2000)


if __name__ == "__main__":
    main()
