#!/usr/bin/env python3
"""Writes Petrel's oracle fixtures: small random MarianMT-layout checkpoints
(config.json + model.safetensors [+ vocab.json]) and what the PyTorch reference
computes for them (encoder states, first-step logits, greedy and beam outputs,
teacher-forced argmax), for a right-padded batch.

    /usr/bin/python3 tools/reference/make_fixtures.py tests/fixtures/oracle [NAME ...]

Needs Debian's python3-torch; CI uses the committed output and needs no PyTorch.
"""
import json
import os
import sys

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
}


def init_weights(model, gen, eos_boost):
    """Larger than training-time init so random models make confident, distinct choices."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif "embed" in name or "shared" in name:
                p.copy_(0.15 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5)
        model.final_logits_bias.copy_(0.1 * torch.randn(model.final_logits_bias.shape, generator=gen))
        # Make EOS a real contender so finished hypotheses occur within MAX_NEW steps.
        model.final_logits_bias[0, model.cfg.eos] += eos_boost


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
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg.hf_config(), f, indent=2)
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
            "inputs": inputs,
            "max_new_tokens": MAX_NEW,
            "encoder_states": [memory[b, :len(s)].tolist() for b, s in enumerate(inputs)],
            "first_step_logits": [], "greedy": [], "teacher_forced": [],
            "beam": {"width": spec["beam"], "alpha": spec["alpha"], "results": []},
        }
        worst_cache = 0.0
        for b, s in enumerate(inputs):
            mem, msk = memory[b:b + 1], mask[b:b + 1]
            start = torch.tensor([[cfg.decoder_start]])
            expected["first_step_logits"].append(model.decode_full(start, mem, msk)[0, 0].tolist())
            out, score = ref.greedy(model, mem, msk, MAX_NEW)
            expected["greedy"].append({"ids": out, "score": score})
            tokens = [cfg.decoder_start] + out
            bad = [w[0] for w in cfg.bad_words]
            lp = ref.step_log_probs(model.decode_full(torch.tensor([tokens]), mem, msk)[0], bad)
            expected["teacher_forced"].append({"tokens": tokens, "argmax": lp.argmax(-1).tolist()})
            worst_cache = max(worst_cache, check_kv_cache(model, mem, msk, tokens))
            hyps = ref.beam_search(model, mem, msk, spec["beam"], MAX_NEW, spec["alpha"])
            expected["beam"]["results"].append([{"ids": h, "score": sc} for h, sc in hyps])
        expected["kv_cache_max_diff"] = worst_cache
        if "shortlist" in spec:
            expected["shortlist"] = shortlist_outputs(model, cfg, spec, inputs, memory, mask, d, seed)
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"{name}: greedy {[g['ids'] for g in expected['greedy']]}, kv-cache diff {worst_cache:.2e}")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/oracle"
    torch.set_num_threads(1)
    only = set(sys.argv[2:])
    for seed, (name, spec) in enumerate(CONFIGS.items()):
        if not only or name in only:
            build(name, spec, out_dir, 1000 + seed)


if __name__ == "__main__":
    main()
