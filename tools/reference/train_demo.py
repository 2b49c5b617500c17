#!/usr/bin/env python3
"""Trains Petrel's bundled demo model: numbers in digits -> English words
("4096" -> "four thousand ninety six"), a MarianMT-layout Transformer (post-LN,
swish, scaled embeddings, tied output, sinusoidal positions) small enough to train
in a few minutes on 2 CPU cores. Writes a Hugging Face style checkpoint directory
(config.json, model.safetensors, vocab.json) for petrel-convert.

    /usr/bin/python3 tools/reference/train_demo.py tools/demo-model

Debian's torch uses the reference BLAS unless an optimised one is installed;
`apt-get install libopenblas0-pthread` makes training about 10x faster.

Held out from training (and used by Petrel's accuracy test): every n in 0..999999
with held_out(n) below; tests/test_demo.cpp applies the same rule.
"""
import json
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_reference as ref  # noqa: E402

ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
VOCAB = ["</s>", "<unk>"] + [str(d) for d in range(10)] + ONES + TENS[2:] + ["hundred", "thousand", "<pad>"]
IDS = {t: i for i, t in enumerate(VOCAB)}
EOS, PAD = IDS["</s>"], IDS["<pad>"]
MAX_N = 999_999


def words(n):
    """The rule the model learns (and the test checks): no "and", no hyphens."""
    if n < 20:
        return [ONES[n]]
    if n < 100:
        return [TENS[n // 10]] + ([ONES[n % 10]] if n % 10 else [])
    if n < 1000:
        return [ONES[n // 100], "hundred"] + (words(n % 100) if n % 100 else [])
    return words(n // 1000) + ["thousand"] + (words(n % 1000) if n % 1000 else [])


def held_out(n):
    """2% of the numbers from 1000 up (Knuth's multiplicative hash); every number
    below 1000 is trained, since each small number teaches its own word."""
    return n >= 1000 and (n * 2654435761 % 2**32) % 50 == 0


def sample_number(rng):
    digits = rng.randint(1, 6)  # uniform over lengths so short numbers are learned too
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10 ** digits - 1)


def batch(rng, size):
    src, tgt = [], []
    while len(src) < size:
        n = sample_number(rng)
        if held_out(n):
            continue
        src.append([IDS[c] for c in str(n)] + [EOS])
        tgt.append([IDS[w] for w in words(n)] + [EOS])
    return src, tgt


def pad(seqs, value):
    longest = max(map(len, seqs))
    return torch.tensor([s + [value] * (longest - len(s)) for s in seqs])


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tools/demo-model"
    steps = int(os.environ.get("DEMO_STEPS", "2000"))
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rng = random.Random(0)
    cfg = ref.Config(d_model=64, encoder_layers=2, decoder_layers=2, heads=4, ffn=256, vocab=len(VOCAB),
                     max_positions=32, activation="swish", positions="concatenated", scale_embedding=True,
                     pad=PAD, eos=EOS, decoder_start=PAD, bad_words=[[PAD]])
    model = ref.Model(cfg)
    with torch.no_grad():
        model.model.shared.weight.normal_(0, cfg.d_model ** -0.5)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=steps, pct_start=0.1)
    start = time.time()
    for step in range(steps):
        src, tgt = batch(rng, 256)
        ids = pad(src, PAD)
        dec_in = pad([[cfg.decoder_start] + t[:-1] for t in tgt], PAD)
        labels = pad(tgt, -100)
        memory, mask = model.encode(ids, [len(s) for s in src])
        logits = model.decode_full(dec_in, memory, mask)
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), labels.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 250 == 0 or step == steps - 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  {time.time() - start:.0f}s", flush=True)

    model.eval()
    test_rng = random.Random(1)
    held = sorted({n for n in (test_rng.randint(0, MAX_N) for _ in range(200_000)) if held_out(n)})[:300]
    correct = 0
    with torch.no_grad():
        for n in held:
            ids = torch.tensor([[IDS[c] for c in str(n)] + [EOS]])
            memory, mask = model.encode(ids, [ids.shape[1]])
            out, _ = ref.greedy(model, memory, mask, 16)
            correct += [VOCAB[i] for i in out] == words(n)
    print(f"held-out exact match (PyTorch, greedy): {correct}/{len(held)}")

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg.hf_config(), f, indent=2)
    with open(os.path.join(out_dir, "vocab.json"), "w") as f:
        json.dump(IDS, f, indent=1)
    ref.write_safetensors(os.path.join(out_dir, "model.safetensors"), ref.state_dict_for_export(model))


if __name__ == "__main__":
    main()
