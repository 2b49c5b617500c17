#!/usr/bin/env python3
"""Corpus chrF and BLEU as sacreBLEU 2.x computes them with its defaults (sacrebleu is not a
Debian package, so these are written from its documented definitions; `metrics.py --self-test`
checks them on hand-computed examples).

    /usr/bin/python3 tools/reference/metrics.py HYPOTHESES REFERENCES   (one sentence a line)

chrF2 (sacreBLEU `CHRF()`: char_order 6, word_order 0, beta 2, whitespace excluded, no eps
smoothing):
  * every sentence loses all whitespace; for n = 1..6 its character n-grams are counted;
  * per order n, over the whole corpus: hyp_n = hypothesis n-grams, ref_n = reference
    n-grams, match_n = sum over sentences of the clipped matches (min of the two counts per
    n-gram);
  * precision_n = match_n / hyp_n, recall_n = match_n / ref_n for the orders where hyp_n > 0
    and ref_n > 0 (the "effective" orders); P and R are their averages over those orders;
  * chrF = 100 * (1 + beta^2) P R / (beta^2 P + R), 0 when P + R = 0 or no order is effective.

BLEU (sacreBLEU `BLEU()`: tokenizer 13a, max order 4, smoothing "exp", no lower-casing):
  * 13a tokenization (mteval-v13a): "<skipped>" removed, "-\\n" removed, newlines -> spaces,
    &quot; &amp; &lt; &gt; unescaped; then, on " line ": the symbols {|}~ [\\]^_` space
    !"#$%& ()*+ :;<=>?@ / are split off; "." and "," are split off unless both neighbours
    are digits; "-" after a digit is split off; runs of spaces collapse;
  * corpus sums of clipped n-gram matches and of hypothesis n-grams per order n = 1..4, and
    of hypothesis length c and reference length r (tokens);
  * precision_n = 100 * match_n / total_n; where match_n = 0 the "exp" smoothing uses
    100 / (2^k * total_n) for the k-th such order (k = 1, 2, ...); total_n = 0 stops the
    product there (its precision stays 0, so the score is 0);
  * brevity penalty: exp(1 - r / c) when c < r (0 when c = 0), else 1;
  * BLEU = BP * exp(mean over n = 1..4 of log precision_n), log 0 taken as -9999999999.
"""
import collections
import math
import re
import sys
from typing import List, NamedTuple

CHAR_ORDER, BETA = 6, 2
BLEU_ORDER = 4


# --- chrF ------------------------------------------------------------------------------
def char_ngrams(text: str, n: int) -> collections.Counter:
    text = "".join(text.split())
    return collections.Counter(text[i:i + n] for i in range(len(text) - n + 1))


def chrf_statistics(hypothesis: str, reference: str) -> List[int]:
    """[hyp_1, ref_1, match_1, ..., hyp_6, ref_6, match_6] for one sentence."""
    stats = []
    for n in range(1, CHAR_ORDER + 1):
        hyp, ref = char_ngrams(hypothesis, n), char_ngrams(reference, n)
        stats += [sum(hyp.values()), sum(ref.values()), sum((hyp & ref).values())]
    return stats


def chrf_from_statistics(stats: List[int]) -> float:
    factor = BETA ** 2
    precision, recall, effective = 0.0, 0.0, 0
    for n in range(CHAR_ORDER):
        hyp, ref, match = stats[3 * n:3 * n + 3]
        if hyp > 0 and ref > 0:
            precision += match / hyp
            recall += match / ref
            effective += 1
    if effective == 0:
        return 0.0
    precision, recall = precision / effective, recall / effective
    if precision + recall == 0:
        return 0.0
    return 100 * (1 + factor) * precision * recall / (factor * precision + recall)


def corpus_chrf(hypotheses: List[str], references: List[str]) -> float:
    _check_lengths(hypotheses, references)
    totals = [0] * (3 * CHAR_ORDER)
    for hyp, ref in zip(hypotheses, references):
        totals = [t + s for t, s in zip(totals, chrf_statistics(hyp, ref))]
    return chrf_from_statistics(totals)


# --- BLEU ------------------------------------------------------------------------------
_13A_RULES = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
]


def tokenize_13a(line: str) -> List[str]:
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    line = f" {line} "
    for pattern, replacement in _13A_RULES:
        line = pattern.sub(replacement, line)
    return line.split()


class Bleu(NamedTuple):
    score: float
    precisions: List[float]
    brevity_penalty: float
    hypothesis_length: int
    reference_length: int

    def __str__(self):
        p = "/".join(f"{x:.1f}" for x in self.precisions)
        return (f"BLEU = {self.score:.2f} {p} (BP = {self.brevity_penalty:.3f} "
                f"ratio = {self.hypothesis_length / max(self.reference_length, 1):.3f} "
                f"hyp_len = {self.hypothesis_length} ref_len = {self.reference_length})")


def corpus_bleu(hypotheses: List[str], references: List[str]) -> Bleu:
    _check_lengths(hypotheses, references)
    matches, totals = [0] * BLEU_ORDER, [0] * BLEU_ORDER
    hyp_len = ref_len = 0
    for hyp, ref in zip(hypotheses, references):
        h, r = tokenize_13a(hyp), tokenize_13a(ref)
        hyp_len += len(h)
        ref_len += len(r)
        for n in range(1, BLEU_ORDER + 1):
            h_ngrams = collections.Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
            r_ngrams = collections.Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
            matches[n - 1] += sum((h_ngrams & r_ngrams).values())
            totals[n - 1] += sum(h_ngrams.values())
    precisions = [0.0] * BLEU_ORDER
    smooth = 1.0
    for n in range(BLEU_ORDER):
        if totals[n] == 0:
            break
        if matches[n] == 0:
            smooth *= 2
            precisions[n] = 100.0 / (smooth * totals[n])
        else:
            precisions[n] = 100.0 * matches[n] / totals[n]
    if hyp_len == 0:
        bp = 0.0
    elif hyp_len < ref_len:
        bp = math.exp(1 - ref_len / hyp_len)
    else:
        bp = 1.0
    log_sum = sum(math.log(p) if p > 0 else -9999999999 for p in precisions)
    score = bp * math.exp(log_sum / BLEU_ORDER) if hyp_len > 0 else 0.0
    return Bleu(score, precisions, bp, hyp_len, ref_len)


def _check_lengths(hypotheses, references):
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")


# --- hand-checked examples -------------------------------------------------------------
def self_test():
    # chrF, identical: every precision and recall is 1.
    assert corpus_chrf(["ab c"], ["abc"]) == 100.0
    # chrF, "ab" vs "ac": 1-grams: hyp {a,b}, ref {a,c}, 1 match -> P1 = R1 = 1/2;
    # 2-grams: "ab" vs "ac", 0 matches -> P2 = R2 = 0; orders 3..6 have no n-grams (skipped).
    # P = R = 1/4 -> F2 = 5 * 1/16 / (4/4 + 1/4) = 25.
    assert abs(corpus_chrf(["ab"], ["ac"]) - 25.0) < 1e-9
    # chrF, hyp "a" vs ref "ab": order 1: P = 1, R = 1/2; order 2: hyp has none (skipped).
    # F2 = 5 * 0.5 / (4 + 0.5) = 55.5...
    assert abs(corpus_chrf(["a"], ["ab"]) - 100 * 2.5 / 4.5) < 1e-9
    # chrF is a corpus statistic: sums before dividing ("a"/"ab" + "ab"/"ab":
    # order 1: hyp 3, ref 4, match 3; order 2: hyp 1, ref 2, match 1 ->
    # P = (1 + 1)/2 = 1, R = (3/4 + 1/2)/2 = 5/8 -> F2 = 5 * 5/8 / (4 + 5/8) = 25/37).
    assert abs(corpus_chrf(["a", "ab"], ["ab", "ab"]) - 100 * 25 / 37) < 1e-9
    assert corpus_chrf([""], ["abc"]) == 0.0
    # 13a: punctuation split off, decimal point and thousands comma kept, dash after digit.
    assert tokenize_13a("Hello, world (3.5 MB) 1,000 5-6 &amp; x.") == \
        ["Hello", ",", "world", "(", "3.5", "MB", ")", "1,000", "5", "-", "6", "&", "x", "."]
    # BLEU, identical 4+ token sentence: 100.
    assert abs(corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat"]).score - 100) < 1e-9
    # BLEU, hyp "the cat sat on" vs ref "the cat sat on the mat": all n-grams match,
    # c = 4 < r = 6 -> BP = exp(1 - 6/4) = exp(-0.5).
    b = corpus_bleu(["the cat sat on"], ["the cat sat on the mat"])
    assert abs(b.score - 100 * math.exp(-0.5)) < 1e-9 and b.precisions == [100.0] * 4
    # BLEU with exp smoothing: hyp "a b c d" vs ref "a b x d": 1-grams 3/4, 2-grams 1/3,
    # 3-grams 0/2 -> 100/(2*2), 4-grams 0/1 -> 100/(4*1); BP 1.
    b = corpus_bleu(["a b c d"], ["a b x d"])
    expected = math.exp((math.log(75) + math.log(100 / 3) + math.log(25) + math.log(25)) / 4)
    assert abs(b.score - expected) < 1e-9, (b, expected)
    # No hypothesis tokens: 0.
    assert corpus_bleu([""], ["a b"]).score == 0.0
    print("metrics self-test: ok")


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    hyps, refs = read_lines(sys.argv[1]), read_lines(sys.argv[2])
    print(f"chrF2 = {corpus_chrf(hyps, refs):.2f}")
    print(corpus_bleu(hyps, refs))


if __name__ == "__main__":
    main()
