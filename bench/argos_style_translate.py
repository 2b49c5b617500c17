#!/usr/bin/env python3
"""An Argos-Translate-style client of CTranslate2's translator API, run unchanged
against CTranslate2 or Petrel: --engine picks `import ctranslate2 as engine` or
`import petrel as engine`, and everything after that is the same code.

    PYTHONPATH=build/py/bindings/python /usr/bin/python3 bench/argos_style_translate.py \
        --engine petrel MODEL.petrel --compute-type float32 [--greedy] > petrel.jsonl
    CT2_PYTHON bench/argos_style_translate.py \
        --engine ctranslate2 CT2_DIR --compute-type float32 [--greedy] > ct2.jsonl

(CT2_DIR from bench/ct2_convert_marian.py; CT2_PYTHON a Python where `import
ctranslate2` works. The tokenizers are read from --tokenizer-dir: by default the model
path when it is a directory, else tools/en-de-model.)

What it does, as Argos Translate does around ctranslate2.Translator:

* tokenizes each sentence with the model's SentencePiece source model (Debian's
  python3-sentencepiece: SentencePieceProcessor(model_file=source.spm), encoded as
  pieces) and appends "</s>", as CTranslate2's opus-mt guide passes Marian input;
* calls translator.translate_batch(tokenized, beam_size=4, num_hypotheses=4,
  length_penalty=0.2, return_scores=True, replace_unknowns=True) -- with --greedy,
  beam_size=1 and num_hypotheses=1 -- on --batch sentences per call (default 1);
* detokenizes the best hypothesis with the target SentencePiece model (decode_pieces).

The translator is made with engine.Translator(model_path, device="cpu",
compute_type=..., inter_threads=1, intra_threads=1) (--threads sets intra_threads).

Output: one JSON line per sentence on stdout (source, hypotheses as pieces, scores,
detokenized) and, on stderr's last line (and in --timing-json FILE), a JSON object
with the timing: load_s (Translator construction), translate_s (the translate_batch
calls alone), wall_s (tokenize + translate + detokenize of all sentences), cpu_s
(the process's CPU time over the same span: on a shared host it moves less than wall_s),
sentences_per_s and target_tokens_per_s over wall_s (target tokens: the best
hypotheses' pieces plus one EOS each), and source_tokens (pieces incl. "</s>").
--warmup N translates the first N sentences once before the clock starts (default 1:
one-time set-up inside either engine is not charged to the sentences).

Sentences: the first --max-sentences (default 300) lines of --input (default the
held-out tests/fixtures/en-de/test.en).
"""
import argparse
import importlib
import json
import os
import sys
import time

import sentencepiece

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_INPUT = os.path.join(ROOT, "tests", "fixtures", "en-de", "test.en")
DEFAULT_TOKENIZER_DIR = os.path.join(ROOT, "tools", "en-de-model")
ENGINES = {"ctranslate2": "ctranslate2", "petrel": "petrel"}


def read_sentences(path, limit):
    sentences = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if len(sentences) == limit:
                break
            sentences.append(line.rstrip("\n"))
    return sentences


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_path", help="CTranslate2 model directory or Petrel model file")
    parser.add_argument("--engine", choices=sorted(ENGINES), required=True)
    parser.add_argument("--compute-type", default="default",
                        help="passed to Translator(compute_type=...) (default: default)")
    parser.add_argument("--greedy", action="store_true", help="beam_size=1, num_hypotheses=1")
    parser.add_argument("--batch", type=int, default=1, help="sentences per translate_batch call")
    parser.add_argument("--threads", type=int, default=1, help="intra_threads (default 1)")
    parser.add_argument("--tokenizer-dir",
                        help="directory with source.spm and target.spm (default: model_path "
                             "when it is a directory, else tools/en-de-model)")
    parser.add_argument("--input", default=DEFAULT_INPUT)
    parser.add_argument("--max-sentences", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=1,
                        help="sentences translated once, untimed, before the clock starts")
    parser.add_argument("--timing-json", help="also write the timing object to this file")
    args = parser.parse_args()
    if args.batch < 1 or args.threads < 1 or args.warmup < 0:
        parser.error("--batch and --threads must be >= 1, --warmup >= 0")

    engine = importlib.import_module(ENGINES[args.engine])
    tokenizer_dir = args.tokenizer_dir or (
        args.model_path if os.path.isdir(args.model_path) else DEFAULT_TOKENIZER_DIR)
    source_sp = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(tokenizer_dir, "source.spm"))
    target_sp = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(tokenizer_dir, "target.spm"))
    sentences = read_sentences(args.input, args.max_sentences)

    if args.greedy:
        options = dict(beam_size=1, num_hypotheses=1)
    else:
        options = dict(beam_size=4, num_hypotheses=4)
    options.update(length_penalty=0.2, return_scores=True, replace_unknowns=True)

    def tokenize(text):
        return source_sp.encode(text, out_type=str) + ["</s>"]

    start = time.perf_counter()
    translator = engine.Translator(args.model_path, device="cpu", compute_type=args.compute_type,
                                   inter_threads=1, intra_threads=args.threads)
    load_s = time.perf_counter() - start

    if args.warmup:
        translator.translate_batch([tokenize(s) for s in sentences[:args.warmup]], **options)

    records = []
    translate_s = 0.0
    source_tokens = 0
    target_tokens = 0
    wall_start = time.perf_counter()
    cpu_start = time.process_time()
    for first in range(0, len(sentences), args.batch):
        chunk = sentences[first:first + args.batch]
        tokenized = [tokenize(s) for s in chunk]
        call_start = time.perf_counter()
        results = translator.translate_batch(tokenized, **options)
        translate_s += time.perf_counter() - call_start
        for text, pieces, result in zip(chunk, tokenized, results):
            hypotheses = [list(h) for h in result.hypotheses]
            best = hypotheses[0] if hypotheses else []
            source_tokens += len(pieces)
            target_tokens += len(best) + 1
            records.append({
                "source": text,
                "hypotheses": hypotheses,
                "scores": [float(s) for s in result.scores],
                "detokenized": target_sp.decode_pieces(best),
            })
    wall_s = time.perf_counter() - wall_start
    cpu_s = time.process_time() - cpu_start

    out = sys.stdout
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
    out.flush()

    timing = {
        "engine": args.engine,
        "engine_version": getattr(engine, "__version__", "unknown"),
        "model": args.model_path,
        "compute_type": args.compute_type,
        "mode": "greedy" if args.greedy else "beam4",
        "batch": args.batch,
        "threads": args.threads,
        "sentences": len(records),
        "source_tokens": source_tokens,
        "target_tokens": target_tokens,
        "load_s": round(load_s, 4),
        "translate_s": round(translate_s, 4),
        "wall_s": round(wall_s, 4),
        "cpu_s": round(cpu_s, 4),
        "sentences_per_s": round(len(records) / wall_s, 2) if wall_s > 0 else None,
        "target_tokens_per_s": round(target_tokens / wall_s, 1) if wall_s > 0 else None,
    }
    line = json.dumps(timing)
    print(line, file=sys.stderr)
    if args.timing_json:
        with open(args.timing_json, "w", encoding="utf-8") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
