#!/usr/bin/env python3
"""Compares two JSON-lines outputs of bench/argos_style_translate.py (A and B: the
same sentences through two engines) line by line.

    /usr/bin/python3 bench/compare_argos_outputs.py A.jsonl B.jsonl [--names ct2 petrel]
        [--score-with CT2_MODEL_DIR] [--json SUMMARY.json]

Prints the share of lines whose best hypotheses are identical (the same pieces), the
share whose whole n-best lists are identical (same pieces, same order), then every
differing line: the source, both best hypotheses (pieces and detokenized), both
scores and their gap (B - A), and the first piece where the best hypotheses part.

--score-with DIR (needs `import ctranslate2`: run it with that Python) scores both
best hypotheses under one model with ctranslate2.Translator.score_batch (teacher
forcing, log-probabilities per target token) and prints, at the first piece where
they part, the log-probabilities of A's and B's piece after the same prefix. A gap
there near zero says the two engines stood at a near tie, where a last-bit difference
in the logits picks either; a wide gap says one of them computed something different.
"""
import argparse
import json
import sys


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def first_divergence(a, b):
    """Index of the first piece where a and b differ (len of the shorter if one is a
    prefix of the other)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def piece_at(pieces, i):
    return pieces[i] if i < len(pieces) else "</s>"


def score_divergences(model_dir, pairs):
    """For each (source pieces, hypothesis A, hypothesis B), the log-probabilities of A's
    and B's piece at their first difference under model_dir (both after the same
    prefix), from ctranslate2's score_batch."""
    import ctranslate2
    translator = ctranslate2.Translator(model_dir, device="cpu", inter_threads=1, intra_threads=1)
    sources, targets = [], []
    for source, a, b in pairs:
        sources += [source, source]
        targets += [a, b]
    results = translator.score_batch(sources, targets) if sources else []
    out = []
    for k, (_, a, b) in enumerate(pairs):
        i = first_divergence(a, b)
        # log_probs has one entry per target piece plus the final </s>.
        lp_a = results[2 * k].log_probs
        lp_b = results[2 * k + 1].log_probs
        out.append({
            "step": i,
            "logprob_a": lp_a[i] if i < len(lp_a) else None,
            "logprob_b": lp_b[i] if i < len(lp_b) else None,
            "total_a": sum(lp_a),
            "total_b": sum(lp_b),
        })
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--names", nargs=2, default=("A", "B"))
    parser.add_argument("--score-with", metavar="CT2_MODEL_DIR",
                        help="score both best hypotheses with ctranslate2's score_batch")
    parser.add_argument("--source-spm", help="source.spm to re-tokenize sources for --score-with "
                                             "(default: CT2_MODEL_DIR/source.spm)")
    parser.add_argument("--json", help="write the summary and the differing lines here")
    parser.add_argument("--quiet", action="store_true", help="summary only")
    args = parser.parse_args()
    name_a, name_b = args.names

    a_lines, b_lines = read_jsonl(args.a), read_jsonl(args.b)
    if len(a_lines) != len(b_lines):
        sys.exit("%s has %d lines, %s has %d" % (args.a, len(a_lines), args.b, len(b_lines)))
    for n, (ra, rb) in enumerate(zip(a_lines, b_lines), 1):
        if ra["source"] != rb["source"]:
            sys.exit("line %d: the sources differ" % n)

    same_best = same_nbest = same_text = 0
    diffs = []
    for n, (ra, rb) in enumerate(zip(a_lines, b_lines), 1):
        best_a = ra["hypotheses"][0] if ra["hypotheses"] else []
        best_b = rb["hypotheses"][0] if rb["hypotheses"] else []
        same_nbest += ra["hypotheses"] == rb["hypotheses"]
        same_text += ra["detokenized"] == rb["detokenized"]
        if best_a == best_b:
            same_best += 1
            continue
        score_a = ra["scores"][0] if ra["scores"] else None
        score_b = rb["scores"][0] if rb["scores"] else None
        step = first_divergence(best_a, best_b)
        diffs.append({
            "line": n,
            "source": ra["source"],
            "best_a": best_a,
            "best_b": best_b,
            "text_a": ra["detokenized"],
            "text_b": rb["detokenized"],
            "score_a": score_a,
            "score_b": score_b,
            "score_gap": (score_b - score_a) if score_a is not None and score_b is not None else None,
            "first_divergence": step,
            "piece_a": piece_at(best_a, step),
            "piece_b": piece_at(best_b, step),
            "b_best_in_a_nbest": best_b in ra["hypotheses"],
            "a_best_in_b_nbest": best_a in rb["hypotheses"],
        })

    if args.score_with and diffs:
        import os
        import sentencepiece
        sp = sentencepiece.SentencePieceProcessor(
            model_file=args.source_spm or os.path.join(args.score_with, "source.spm"))
        pairs = [(sp.encode(d["source"], out_type=str) + ["</s>"], d["best_a"], d["best_b"])
                 for d in diffs]
        for d, s in zip(diffs, score_divergences(args.score_with, pairs)):
            d["scored"] = s

    total = len(a_lines)
    summary = {
        "lines": total,
        "identical_best": same_best,
        "identical_best_pct": round(100.0 * same_best / total, 2) if total else None,
        "identical_nbest": same_nbest,
        "identical_nbest_pct": round(100.0 * same_nbest / total, 2) if total else None,
        "identical_detokenized": same_text,
        "differing_lines": [d["line"] for d in diffs],
    }
    print("%d lines: best hypothesis identical %d (%.2f%%), n-best list identical %d (%.2f%%), "
          "detokenized best identical %d" % (
              total, same_best, summary["identical_best_pct"] or 0.0, same_nbest,
              summary["identical_nbest_pct"] or 0.0, same_text))
    if not args.quiet:
        for d in diffs:
            print("\nline %d: %s" % (d["line"], d["source"]))
            print("  %-8s %s" % (name_a, d["text_a"]))
            print("  %-8s %s" % (name_b, d["text_b"]))
            gap = "%.5f" % d["score_gap"] if d["score_gap"] is not None else "n/a"
            print("  scores %s %s, %s %s, gap %s; first difference at piece %d: %r vs %r; "
                  "%s's best in %s's n-best: %s" % (
                      name_a, d["score_a"], name_b, d["score_b"], gap, d["first_divergence"],
                      d["piece_a"], d["piece_b"], name_b, name_a, d["b_best_in_a_nbest"]))
            if "scored" in d:
                s = d["scored"]
                print("  scored by %s: at piece %d log p(%r) = %s, log p(%r) = %s; "
                      "sums %.5f vs %.5f" % (args.score_with, s["step"], d["piece_a"], s["logprob_a"],
                                             d["piece_b"], s["logprob_b"], s["total_a"], s["total_b"]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"summary": summary, "differences": diffs}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
