#!/usr/bin/env python3
"""Writes tests/fixtures/alignment/: word alignments (cross-attention probabilities) as
Marian/bergamot-translator return them, computed by the PyTorch references along the
target ids the committed fixtures already hold.

    /usr/bin/python3 tools/reference/make_alignment_fixtures.py [--out tests/fixtures/alignment]

Needs Debian's python3-torch and python3-yaml; the tests use the committed JSON only.
Deterministic: fixed sentence choice, one thread, no randomness.

Semantics (tests/fixtures/alignment/README.md cites the upstream source for each):
  * the alignment is one decoder layer's cross-attention, head 0, after the softmax,
    over every source position (the source EOS included). Marian: the layer
    `transformer-guided-alignment-layer` of model.yml ("last", the default, or a 1-based
    number); Hugging Face models have no such key: the last layer, head 0, as
    CTranslate2 does (alignment_layer -1, alignment_heads 1) and as bergamot does with a
    model that names no layer;
  * one row per output token, plus one for the final EOS when the output ended on EOS
    (Marian's tracebackAlignment; a hypothesis stopped by the length limit has no EOS
    row); row t is the step whose output is token t: its query is the decoder state
    after the tokens before t (the start for t = 0), teacher-forced here, which is what
    a beam search carries per hypothesis since a step depends only on its own prefix;
  * hard alignments by marian-dev src/data/alignment.cpp ConvertSoftAlignToHardAlign:
    threshold 1.0 = for each row the first source position holding the row's maximum
    (strict `<` scan), any other threshold = every (t, s) with p > threshold; either
    way sorted by source position, then target position (WordAlignment::sort). Pairs
    are written [target_index, source_index] and computed from the stored (rounded)
    values, compared as float32.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
OUT = os.path.join(FIXTURES, "alignment")
sys.path.insert(0, HERE)

import make_fixtures  # noqa: E402  (the oracle fixtures' configurations)
import marian_native  # noqa: E402
import marian_reference as ref  # noqa: E402
from marian_native_reference import MarianNativeModel  # noqa: E402

MADE_BY = "tools/reference/make_alignment_fixtures.py"
HEAD = 0
THRESHOLDS = {"1.0": 1.0, "0.2": 0.2}
SIGNIFICANT = 7
# A row whose two largest values differ by less than this, or a value this close to a
# threshold, is listed in the case's "near_ties": an engine's rounding may decide it
# differently.
NEAR = 1e-5

# Marian-native: every 16th of the 320 sentences, plus the first two whose greedy output
# stopped at the length limit (no EOS row).
NATIVE_MODELS = ("transformer", "ssru")
NATIVE_EVERY = 16
NATIVE_LIMITED = 2
NATIVE_EOS, NATIVE_UNK = 0, 1

HF_FIXTURE = "post_swish_concat_tied"


def rounded(x):
    return float(f"{float(x):.{SIGNIFICANT}g}")


def hard_alignment(rows, threshold):
    """marian-dev data/alignment.cpp ConvertSoftAlignToHardAlign on rows [t][s] (float32),
    as [target, source] pairs in its order (by source, then target)."""
    pairs = []
    if threshold == 1.0:
        for t, row in enumerate(rows):
            best = 0
            for s in range(len(row)):
                if row[best] < row[s]:
                    best = s
            pairs.append((best, t))
    else:
        limit = np.float32(threshold)
        for t, row in enumerate(rows):
            pairs.extend((s, t) for s in range(len(row)) if row[s] > limit)
    pairs.sort()
    return [[t, s] for s, t in pairs]


def near_ties(rows):
    argmax_rows, threshold_pairs = [], []
    for t, row in enumerate(rows):
        if len(row) > 1:
            top = np.sort(row)[::-1]
            if top[0] - top[1] < NEAR:
                argmax_rows.append(t)
        for s, v in enumerate(row):
            if any(th != 1.0 and abs(float(v) - th) < NEAR for th in THRESHOLDS.values()):
                threshold_pairs.append([t, s])
    return {"argmax_rows": argmax_rows, "threshold_pairs": threshold_pairs}


def make_case(source_ids, target_ids, ended_on_eos, attention, origin):
    """attention: [rows, S] float32 tensor of the chosen layer and head."""
    rows = [[rounded(v) for v in row] for row in attention.tolist()]
    as_f32 = [np.array(r, dtype=np.float32) for r in rows]
    sums = [float(r.sum()) for r in as_f32]
    assert all(abs(x - 1.0) < 1e-5 for x in sums), f"{origin}: a row does not sum to 1: {sums}"
    case = {"origin": origin, "source_ids": list(map(int, source_ids)), "target_ids": list(map(int, target_ids)),
            "ended_on_eos": bool(ended_on_eos), "alignment": rows,
            "hard": {name: hard_alignment(as_f32, th) for name, th in THRESHOLDS.items()},
            "near_ties": near_ties(as_f32)}
    assert len(rows) == len(target_ids) + (1 if ended_on_eos else 0)
    return case


def write_fixture(path, header, cases):
    """One case per line: small diffs when a case changes."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n")
        for key, value in header.items():
            f.write(f" {json.dumps(key)}: {json.dumps(value)},\n")
        f.write(' "cases": [\n')
        f.write(",\n".join("  " + json.dumps(c, separators=(",", ":")) for c in cases))
        f.write("\n ]\n}\n")


# ---------------------------------------------------------------- Marian-native models

def native_cases(name):
    model_path = os.path.join(FIXTURES, "marian-native", name, "model.bin")
    weights, _, yaml_text = marian_native.read_model_bin(model_path)
    options = yaml.safe_load(yaml_text)
    model = MarianNativeModel(weights, options)
    layer = model.alignment_layer()
    with open(os.path.join(FIXTURES, "marian-native", name, "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    factor = expected["max_length_factor"]
    sources, outputs = expected["source_ids"], expected["reference"]["ids"]

    def limit(i):
        return math.ceil(factor * (len(sources[i]) + 1))

    chosen = list(range(0, len(sources), NATIVE_EVERY))
    limited = [i for i in range(len(sources)) if len(outputs[i]) >= limit(i) and i not in chosen]
    chosen = sorted(chosen + limited[:NATIVE_LIMITED])
    cases = []
    for i in chosen:
        source = sources[i] + [NATIVE_EOS]
        target = outputs[i]
        ended = len(target) < limit(i)
        attention, logits = model.teacher_forced_cross_attention(source, target, ended)
        # The rows are the steps greedy search took: each step's argmax (UNK suppressed)
        # is the next output token, EOS last when it ended there.
        logits[:, NATIVE_UNK] = -math.inf
        taken = logits.argmax(-1).tolist()
        assert taken == target + ([NATIVE_EOS] if ended else []), f"{name}[{i}]: teacher forcing left greedy"
        cases.append(make_case(source, target, ended, attention[:, layer, HEAD], f"reference.ids[{i}]"))
    key = "transformer-guided-alignment-layer"
    layer_from = (f"model.yml {key}: {options[key]}" if key in options
                  else f"model.yml names no {key}: Marian's default \"last\"")
    header = {"model": f"marian-native/{name}/model.bin", "layer": layer, "head": HEAD, "made_by": MADE_BY,
              "eos": NATIVE_EOS, "layer_from": layer_from,
              "targets": f"marian-native/{name}/expected.json reference (PyTorch greedy, = bergamot float32)"}
    return header, cases


# ---------------------------------------------------------------- Hugging Face oracle model

def hf_model(directory):
    spec = make_fixtures.CONFIGS[HF_FIXTURE]
    cfg = ref.Config(**spec["cfg"])
    model = ref.Model(cfg).eval()
    tensors = ref.read_safetensors(os.path.join(directory, "model.safetensors"))
    model.load_state_dict(tensors, strict=True)
    return model


def hf_cases():
    directory = os.path.join(FIXTURES, "oracle", HF_FIXTURE)
    model = hf_model(directory)
    cfg = model.cfg
    layer = cfg.decoder_layers - 1
    with open(os.path.join(directory, "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    max_new = expected["max_new_tokens"]
    bad = [w[0] for w in cfg.bad_words]
    alpha = expected["beam"]["alpha"]

    # (source, target ids, where from, allowed ids or None, "greedy" | "beam", score)
    candidates = []
    for b, source in enumerate(expected["inputs"]):
        candidates.append((source, expected["greedy"][b]["ids"], f"greedy[{b}]", None, "greedy",
                           expected["greedy"][b]["score"]))
    for b, source in enumerate(expected["inputs"]):
        for key in ("results", "results_heuristic"):
            for k, hyp in enumerate(expected["beam"][key][b]):
                candidates.append((source, hyp["ids"], f"beam.{key}[{b}][{k}]", None, "beam", hyp["score"]))
    shortlist = expected["shortlist"]
    for b, source in enumerate(expected["inputs"]):
        allowed = shortlist["allowed"][b]
        candidates.append((source, shortlist["greedy"][b]["ids"], f"shortlist.greedy[{b}]", allowed, "greedy",
                           shortlist["greedy"][b]["score"]))
        for k, hyp in enumerate(shortlist["beam"][b]):
            candidates.append((source, hyp["ids"], f"shortlist.beam[{b}][{k}]", allowed, "beam", hyp["score"]))
    padded = expected["padded"]
    for b, source in enumerate(padded["inputs"]):
        candidates.append((source, padded["greedy"][b]["ids"], f"padded.greedy[{b}]", None, "greedy",
                           padded["greedy"][b]["score"]))

    cases, seen = [], set()
    worst_cached = 0.0
    for source, target, origin, allowed, kind, score in candidates:
        # Within max_new_tokens, a hypothesis shorter than the limit ended on EOS; one of
        # max_new tokens was stopped by the limit (this fixture forces no EOS).
        ended = len(target) < max_new
        key = (tuple(source), tuple(target), ended)
        if key in seen:
            continue
        seen.add(key)
        with torch.no_grad():
            memory, mask = model.encode(torch.tensor([source]))
            tokens = torch.tensor([[cfg.decoder_start] + target + ([cfg.eos] if ended else [])])[:, :-1]
            attention, logits = model.cross_attention(tokens, memory, mask)
            cached, _ = model.cross_attention(tokens, memory, mask, cached=True)
        worst_cached = max(worst_cached, float((attention - cached).abs().max()))
        lp = ref.step_log_probs(logits, bad, allowed)
        produced = target + ([cfg.eos] if ended else [])
        if kind == "greedy":
            assert lp.argmax(-1).tolist() == produced, f"{origin}: teacher forcing left greedy"
        total = float(lp[torch.arange(len(produced)), torch.tensor(produced)].double().sum())
        length = len(produced) if kind == "beam" else (len(target) + 1 if ended else max(len(target), 1))
        assert abs(total / length ** (alpha if kind == "beam" else 1.0) - score) < 1e-4, \
            f"{origin}: the teacher-forced score {total} does not give the fixture's {score}"
        cases.append(make_case(source, target, ended, attention[:, layer, HEAD], origin))
    assert worst_cached < 1e-5, f"cached steps differ from the full pass by {worst_cached}"
    header = {"model": f"oracle/{HF_FIXTURE}", "layer": layer, "head": HEAD, "made_by": MADE_BY,
              "eos": cfg.eos, "decoder_start": cfg.decoder_start,
              "layer_from": "Hugging Face configs name no alignment layer: the last, head 0 "
                            "(CTranslate2's default alignment_layer -1, alignment_heads 1)",
              "targets": f"oracle/{HF_FIXTURE}/expected.json greedy, beam, shortlist and padded outputs; "
                         "pad ids in a source are masked (probability 0)"}
    return header, cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    jobs = [(f"marian_native_{name}.json", lambda name=name: native_cases(name)) for name in NATIVE_MODELS]
    jobs.append((f"hf_{HF_FIXTURE}.json", hf_cases))
    for filename, job in jobs:
        header, cases = job()
        path = os.path.join(args.out, filename)
        write_fixture(path, header, cases)
        ended = sum(c["ended_on_eos"] for c in cases)
        print(f"{filename}: {len(cases)} cases ({ended} ended on EOS), layer {header['layer']}, "
              f"{os.path.getsize(path)} bytes, near ties "
              f"{sum(len(c['near_ties']['argmax_rows']) + len(c['near_ties']['threshold_pairs']) for c in cases)}")


if __name__ == "__main__":
    main()
