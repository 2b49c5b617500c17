#!/usr/bin/env python3
"""The PyTorch oracle's outputs for the first N sentences of the en-de test split, for
the tests that hold Petrel to the real model (tests/test_en_de.cpp): greedy translations
(ids and text, generate()'s settings: the checkpoint's forced EOS, up to 255 new tokens)
and the teacher-forced argmax along each translation (for int8/int4 agreement).

    /usr/bin/python3 tools/reference/make_en_de_fixture.py [MODEL_DIR] [N]
        (default tools/en-de-model 200; writes tests/fixtures/en-de/sample.json)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eval_en_de  # noqa: E402
import marian_reference as ref  # noqa: E402
import metrics  # noqa: E402
from marian_tokenizer import MarianTokenizer  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


@torch.no_grad()
def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tools", "en-de-model")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    torch.set_num_threads(2)
    model, tok = eval_en_de.load_model(model_dir), MarianTokenizer(model_dir)
    cfg = model.cfg
    bad = [w[0] for w in cfg.bad_words]
    sources = metrics.read_lines(os.path.join(ROOT, "tests", "fixtures", "en-de", "test.en"))[:count]
    references = metrics.read_lines(os.path.join(ROOT, "tests", "fixtures", "en-de", "test.de"))[:count]
    sentences, texts = [], []
    for text in sources:
        ids = tok.encode(text)
        memory, mask = model.encode(torch.tensor([ids]), [len(ids)])
        out, score = ref.greedy(model, memory, mask, 255, forced_eos=eval_en_de.forced_eos(model))
        tokens = [cfg.decoder_start] + out
        lp = ref.step_log_probs(model.decode_full(torch.tensor([tokens]), memory, mask)[0], bad)
        texts.append(tok.decode(out))
        sentences.append({"source": text, "ids": ids, "output_ids": out, "score": score, "output_text": texts[-1],
                          "argmax": lp.argmax(-1).tolist()})
    out = {"model": "tools/en-de-model", "sentences": sentences,
           "chrf": metrics.corpus_chrf(texts, references), "references": references}
    path = os.path.join(ROOT, "tests", "fixtures", "en-de", "sample.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"wrote {path}: {count} sentences, PyTorch greedy chrF2 {out['chrf']:.2f}")


if __name__ == "__main__":
    main()
