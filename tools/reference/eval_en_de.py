#!/usr/bin/env python3
"""Translation quality of an English -> German MarianMT checkpoint, PyTorch side.

    # translate with the oracle (f32) and score against the references
    python3 tools/reference/eval_en_de.py translate tools/en-de-model \\
        --source tests/fixtures/en-de/test.en --reference tests/fixtures/en-de/test.de \\
        --beam 4 --output build/en-de/test.beam4.de
    # score any hypothesis file (e.g. Petrel's output) against the references
    python3 tools/reference/eval_en_de.py score HYPOTHESES tests/fixtures/en-de/test.de

`translate` loads config.json + model.safetensors (f16/f32 weights, computed in f32) into
marian_reference's Model, encodes each line with marian_tokenizer (MarianTokenizer's rules),
decodes one sentence at a time with marian_reference's `greedy` (--beam 1) or `beam_search`
(--beam N, length penalty --alpha, default 1.0 as generate()'s), at most --max-new tokens
(default 255: generate()'s max_length 256 counts the decoder start token), and turns the ids
into text with the target SentencePiece model. Scores are corpus chrF2 and BLEU (13a) as
metrics.py defines them.
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see train_en_de.py
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_reference as ref  # noqa: E402
from marian_tokenizer import MarianTokenizer  # noqa: E402
import metrics  # noqa: E402


def forced_eos(model):
    """The checkpoint's forced_eos_token_id (generate() forces it at the last step)."""
    return getattr(model, "forced_eos_token_id", None)


def load_model(model_dir):
    """marian_reference's Model from a Hugging Face MarianMT checkpoint directory."""
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    if c.get("model_type") != "marian":
        raise ValueError(f"{model_dir}/config.json: model_type {c.get('model_type')!r}, expected 'marian'")
    cfg = ref.Config(d_model=c["d_model"], encoder_layers=c["encoder_layers"], decoder_layers=c["decoder_layers"],
                     heads=c["encoder_attention_heads"], ffn=c["encoder_ffn_dim"], vocab=c["vocab_size"],
                     max_positions=c["max_position_embeddings"], scale_embedding=c["scale_embedding"],
                     normalize_before=c.get("normalize_before", False), activation=c["activation_function"],
                     positions="concatenated", tie=c.get("tie_word_embeddings", True),
                     share=c.get("share_encoder_decoder_embeddings", True), pad=c["pad_token_id"],
                     eos=c["eos_token_id"], decoder_start=c["decoder_start_token_id"],
                     bad_words=c.get("bad_words_ids", [[c["pad_token_id"]]]))
    model = ref.Model(cfg)
    model.load_state_dict(ref.read_safetensors(os.path.join(model_dir, "model.safetensors")))
    model.eval()
    # generate() takes forced_eos_token_id from generation_config.json when there is one.
    generation = c
    if os.path.exists(os.path.join(model_dir, "generation_config.json")):
        with open(os.path.join(model_dir, "generation_config.json")) as f:
            generation = json.load(f)
    model.forced_eos_token_id = generation.get("forced_eos_token_id")
    return model


@torch.no_grad()
def translate(model, tok, sources, beam, alpha, max_new, progress=True, beam_stop="heuristic"):
    hypotheses, start = [], time.time()
    for n, text in enumerate(sources):
        ids = torch.tensor([tok.encode(text)])
        memory, mask = model.encode(ids, [ids.shape[1]])
        if beam == 1:
            out, _ = ref.greedy(model, memory, mask, max_new, forced_eos=forced_eos(model))
        else:
            out = ref.beam_search(model, memory, mask, beam, max_new, alpha, stop=beam_stop,
                                  forced_eos=forced_eos(model))[0][0]
        hypotheses.append(tok.decode(out))
        if progress and (n + 1) % 200 == 0:
            print(f"  {n + 1}/{len(sources)} sentences, {time.time() - start:.0f}s", file=sys.stderr, flush=True)
    return hypotheses


def report(hypotheses, references):
    chrf = metrics.corpus_chrf(hypotheses, references)
    bleu = metrics.corpus_bleu(hypotheses, references)
    print(f"chrF2 = {chrf:.2f}")
    print(bleu)
    return chrf, bleu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("translate")
    t.add_argument("model_dir")
    t.add_argument("--source", default="tests/fixtures/en-de/test.en")
    t.add_argument("--reference", default="tests/fixtures/en-de/test.de")
    t.add_argument("--beam", type=int, default=4)
    t.add_argument("--alpha", type=float, default=1.0)
    t.add_argument("--max-new", type=int, default=255)
    t.add_argument("--limit", type=int, help="only the first N sentences")
    t.add_argument("--output", help="write the hypotheses here")
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--beam-stop", choices=["heuristic", "first-k"], default="heuristic",
                   help="heuristic: generate()'s default (early_stopping=False); first-k: early_stopping=True")
    s = sub.add_parser("score")
    s.add_argument("hypotheses")
    s.add_argument("references")
    args = parser.parse_args()

    if args.command == "score":
        report(metrics.read_lines(args.hypotheses), metrics.read_lines(args.references))
        return
    torch.set_num_threads(args.threads)
    sources, references = metrics.read_lines(args.source), metrics.read_lines(args.reference)
    if args.limit:
        sources, references = sources[:args.limit], references[:args.limit]
    model, tok = load_model(args.model_dir), MarianTokenizer(args.model_dir)
    start = time.time()
    hypotheses = translate(model, tok, sources, args.beam, args.alpha, args.max_new, beam_stop=args.beam_stop)
    print(f"{len(sources)} sentences, {'greedy' if args.beam == 1 else f'beam {args.beam}'}, "
          f"{time.time() - start:.0f}s")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.writelines(h + "\n" for h in hypotheses)
    report(hypotheses, references)


if __name__ == "__main__":
    main()
