#!/usr/bin/env python3
"""Trains Petrel's real English -> German model: a small MarianMT-layout Transformer
(marian_reference's Model, so the oracle runs exactly what was trained) on the gettext
pairs of make_en_de_data.py with the vocabularies of make_en_de_vocab.py, and writes it as a
Hugging Face MarianMT checkpoint directory.

    python3 tools/reference/train_en_de.py train  --data build/en-de/data --vocab build/en-de/vocab \\
        --work build/en-de/train [--max-minutes 150]
    python3 tools/reference/train_en_de.py export --data build/en-de/data --vocab build/en-de/vocab \\
        --work build/en-de/train --out tools/en-de-model

`train` resumes from WORK/checkpoint.pt when it exists (saved every --save-minutes: model,
optimizer, step, epoch and batch position, RNG states, the dev history, elapsed time), so a
run that is cut off continues where it stopped; run it under nohup. Every --eval-steps it
measures the dev split (loss, and chrF of batched greedy decoding) and keeps the weights of
that point in WORK/eval-STEP.pt; it stops after --max-minutes of training wall time or when
dev chrF has not improved by 0.2 for --patience evaluations. `export` picks the best on dev
of: the best evaluation point, the last step (when the run stopped between evaluations) and
the average of the last --average of these snapshots, and
writes config.json, model.safetensors (f16), source.spm, target.spm, vocab.json,
tokenizer_config.json and generation_config.json.

The recipe (measured on this project's 2-core machine, see tools/en-de-model/README.md):
d_model 256, 3+3 post-LN layers, 4 heads, FFN 1024, swish, concatenated sinusoidal positions,
scaled, shared and tied embeddings, a trained final_logits_bias, dropout 0.1 (as opus-mt);
Adam (0.9, 0.98, eps 1e-9), inverse-square-root schedule with 500 warm-up steps to 2e-3,
label smoothing 0.1, gradient norm clipped at 1.0, batches of at most 3000 padded tokens per
side grouped by length. The decoder start token is <pad>, whose embedding stays zero (as in
Hugging Face's Marian, where it is the embedding's padding_idx).
"""
import argparse
import json
import math
import os
import random
import shutil
import sys
import time

# Threads of a loaded machine must not spin while they wait for each other: libgomp's default
# busy-waiting made a 2-thread step 3x slower than 1 thread while other jobs ran (measured).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_reference as ref  # noqa: E402
from marian_tokenizer import MarianTokenizer  # noqa: E402
from metrics import corpus_chrf  # noqa: E402

MODEL = dict(d_model=256, encoder_layers=3, decoder_layers=3, heads=4, ffn=1024, activation="swish",
             positions="concatenated", scale_embedding=True, normalize_before=False, tie=True, share=True,
             max_positions=512, dropout=0.1)
MAX_TOKENS = 256  # longer sentences (none after make_en_de_data's 200-character rule) are skipped
SEED = 1


# --- data --------------------------------------------------------------------------------
def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def target_ids(tok, text):
    """The labels: tokenizer(text_target=text).input_ids (target spm, same vocab.json)."""
    return [tok.vocab.get(p, tok.unk_id) for p in tok.target.encode(text, out_type=str)] + [tok.eos_id]


def load_split(tok, data_dir, name):
    sources, targets = read_lines(f"{data_dir}/{name}.en"), read_lines(f"{data_dir}/{name}.de")
    pairs = [(tok.encode(s), target_ids(tok, t)) for s, t in zip(sources, targets)]
    keep = [i for i, (s, t) in enumerate(pairs) if len(s) <= MAX_TOKENS and len(t) <= MAX_TOKENS]
    return [pairs[i] for i in keep], [sources[i] for i in keep], [targets[i] for i in keep]


def make_batches(pairs, max_tokens, rng):
    """Index lists of pairs of similar length, each at most max_tokens padded tokens a side,
    in shuffled order (the same rng state gives the same batches)."""
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), len(pairs[i][1]), rng.random()))
    batches, current, longest = [], [], 0
    for i in order:
        length = max(len(pairs[i][0]), len(pairs[i][1]))
        if current and max(longest, length) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, length)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def pad(seqs, value):
    longest = max(map(len, seqs))
    return torch.tensor([s + [value] * (longest - len(s)) for s in seqs])


def batch_loss(model, pairs, smoothing):
    cfg = model.cfg
    src = [p[0] for p in pairs]
    tgt = [p[1] for p in pairs]
    memory, mask = model.encode(pad(src, cfg.pad), [len(s) for s in src])
    logits = model.decode_full(pad([[cfg.decoder_start] + t[:-1] for t in tgt], cfg.pad), memory, mask)
    labels = pad(tgt, -100)
    loss_sum = F.cross_entropy(logits.reshape(-1, cfg.vocab), labels.reshape(-1), ignore_index=-100,
                               label_smoothing=smoothing, reduction="sum")
    tokens = int((labels != -100).sum())
    return loss_sum, tokens


# --- model -------------------------------------------------------------------------------
def build_model(vocab_size, pad_id, eos_id):
    cfg = ref.Config(vocab=vocab_size, pad=pad_id, eos=eos_id, decoder_start=pad_id, bad_words=[[pad_id]], **MODEL)
    model = ref.Model(cfg)
    # Trained, unlike the reference's zero buffer; same name and shape in the state dict.
    model.final_logits_bias = torch.nn.Parameter(torch.zeros(1, vocab_size))
    return model


def initialize(model):
    torch.manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("shared.weight"):
                p.normal_(0, model.cfg.d_model ** -0.5)  # unit scale after * sqrt(d_model)
                p[model.cfg.pad].zero_()
            elif p.dim() == 2:
                torch.nn.init.xavier_uniform_(p)
            elif "layer_norm" in name and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.zero_()


def learning_rate(step, peak, warmup):
    step = max(step, 1)
    return peak * min(step / warmup, math.sqrt(warmup / step))


# --- evaluation --------------------------------------------------------------------------
@torch.no_grad()
def greedy_batch(model, sources, max_new):
    """Batched greedy decoding with the reference's cached decoder step and bad-word mask
    (the same argmax rule as marian_reference.greedy, many sentences at once)."""
    cfg = model.cfg
    bad = [w[0] for w in cfg.bad_words]
    memory, mask = model.encode(pad(sources, cfg.pad), [len(s) for s in sources])
    cache = [None] * cfg.decoder_layers
    token = torch.full((len(sources),), cfg.decoder_start)
    outputs = [[] for _ in sources]
    done = [False] * len(sources)
    for step in range(max_new):
        lp = ref.step_log_probs(model.decode_step(token, step, cache, memory, mask), bad)
        token = lp.argmax(-1)
        for i, t in enumerate(token.tolist()):
            if not done[i]:
                if t == cfg.eos:
                    done[i] = True
                else:
                    outputs[i].append(t)
        if all(done):
            break
    return outputs


def evaluate(model, tok, pairs, references, smoothing, batch_size=64):
    model.eval()
    loss_sum, tokens = 0.0, 0
    hypotheses = [None] * len(pairs)
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]))
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            batch = [pairs[i] for i in idx]
            loss, n = batch_loss(model, batch, smoothing)
            loss_sum += float(loss)
            tokens += n
            max_new = 2 * max(len(p[0]) for p in batch) + 10
            for i, out in zip(idx, greedy_batch(model, [p[0] for p in batch], max_new)):
                hypotheses[i] = tok.decode(out)
    model.train()
    return loss_sum / tokens, corpus_chrf(hypotheses, references), hypotheses


# --- checkpoints -------------------------------------------------------------------------
def save_atomic(obj, path):
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def train(args):
    torch.set_num_threads(args.threads)
    os.makedirs(args.work, exist_ok=True)
    tok = MarianTokenizer(args.vocab)
    train_pairs, _, _ = load_split(tok, args.data, "train")
    dev_pairs, _, dev_refs = load_split(tok, args.data, "dev")
    model = build_model(len(tok.vocab), tok.pad_id, tok.eos_id)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    ckpt_path = os.path.join(args.work, "checkpoint.pt")
    state = {"step": 0, "epoch": 0, "batch": 0, "elapsed": 0.0, "history": [], "best_chrf": -1.0,
             "best_step": 0}
    if os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        torch.set_rng_state(ckpt["torch_rng"])
        state = ckpt["state"]
        print(f"resumed at step {state['step']} (epoch {state['epoch']}, batch {state['batch']}, "
              f"{state['elapsed'] / 60:.1f} min trained)", flush=True)
    else:
        initialize(model)
        torch.manual_seed(SEED)
    model.train()
    print(f"{len(train_pairs)} training pairs, {len(dev_pairs)} dev pairs, vocabulary {len(tok.vocab)}, "
          f"{sum(p.numel() for p in model.parameters())} parameters", flush=True)

    def checkpoint():
        save_atomic({"model": model.state_dict(), "optimizer": opt.state_dict(), "torch_rng": torch.get_rng_state(),
                     "state": state}, ckpt_path)

    session_start = time.time()
    elapsed_at_start = state["elapsed"]
    last_save = time.time()
    window_loss, window_tokens, window_steps, window_start = 0.0, 0, 0, time.time()
    stop = None
    while stop is None:
        batches = make_batches(train_pairs, args.max_tokens, random.Random(SEED * 1000 + state["epoch"]))
        while state["batch"] < len(batches):
            batch = [train_pairs[i] for i in batches[state["batch"]]]
            state["step"] += 1
            state["batch"] += 1
            for group in opt.param_groups:
                group["lr"] = learning_rate(state["step"], args.lr, args.warmup)
            loss_sum, tokens = batch_loss(model, batch, args.label_smoothing)
            opt.zero_grad()
            (loss_sum / tokens).backward()
            model.model.shared.weight.grad[model.cfg.pad] = 0  # the start token's embedding stays zero
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            window_loss += float(loss_sum)
            window_tokens += tokens
            window_steps += 1
            state["elapsed"] = elapsed_at_start + time.time() - session_start

            if state["step"] % 50 == 0:
                rate = window_steps / (time.time() - window_start) * 60
                print(f"step {state['step']:5d}  epoch {state['epoch']}  loss {window_loss / window_tokens:.3f}  "
                      f"lr {learning_rate(state['step'], args.lr, args.warmup):.2e}  {rate:.1f} steps/min  "
                      f"{state['elapsed'] / 60:.1f} min", flush=True)
                window_loss, window_tokens, window_steps, window_start = 0.0, 0, 0, time.time()

            if state["step"] % args.eval_steps == 0:
                t0 = time.time()
                dev_loss, dev_chrf, _ = evaluate(model, tok, dev_pairs, dev_refs, args.label_smoothing)
                point = {"step": state["step"], "epoch": state["epoch"], "minutes": round(state["elapsed"] / 60, 1),
                         "dev_loss": round(dev_loss, 4), "dev_chrf_greedy": round(dev_chrf, 2)}
                state["history"].append(point)
                save_atomic(model.state_dict(), os.path.join(args.work, f"eval-{state['step']}.pt"))
                if dev_chrf > state["best_chrf"] + 0.2:
                    state["best_chrf"], state["best_step"] = dev_chrf, state["step"]
                print(f"dev {json.dumps(point)}  (best {state['best_chrf']:.2f} at {state['best_step']}, "
                      f"eval {time.time() - t0:.0f}s)", flush=True)
                with open(os.path.join(args.work, "history.json"), "w") as f:
                    json.dump(state["history"], f, indent=1)
                evals_since_best = (state["step"] - state["best_step"]) // args.eval_steps
                if evals_since_best >= args.patience:
                    stop = f"dev chrF plateaued ({args.patience} evaluations without +0.2)"
                checkpoint()
                last_save = time.time()
            if state["elapsed"] >= args.max_minutes * 60:
                stop = stop or f"time budget of {args.max_minutes} minutes reached"
            if stop:
                break
            if time.time() - last_save >= args.save_minutes * 60:
                checkpoint()
                last_save = time.time()
            if os.path.exists(os.path.join(args.work, "STOP")):
                stop = "STOP file"
                break
        if state["batch"] >= len(batches):
            state["epoch"] += 1
            state["batch"] = 0
    state["stopped"] = stop
    checkpoint()
    print(f"stopped: {stop}; step {state['step']}, {state['elapsed'] / 60:.1f} min, best dev chrF "
          f"{state['best_chrf']:.2f} at step {state['best_step']}", flush=True)


# --- export ------------------------------------------------------------------------------
def hf_config(cfg, dtype):
    """Every key transformers' MarianConfig (4.2x-4.3x) defines, plus the generation defaults
    and the fields opus-mt's own config.json files carry."""
    config = cfg.hf_config()
    config.update({
        "activation_dropout": 0.0, "attention_dropout": 0.0, "dropout": cfg.dropout, "classifier_dropout": 0.0,
        "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "init_std": 0.02, "use_cache": True,
        "is_encoder_decoder": True, "num_hidden_layers": cfg.encoder_layers, "gradient_checkpointing": False,
        "forced_eos_token_id": cfg.eos, "bos_token_id": 0, "max_length": 256, "num_beams": 4,
        "static_position_embeddings": True, "add_bias_logits": False, "add_final_layer_norm": False,
        "normalize_embedding": False, "torch_dtype": dtype,
    })
    return config


def generation_config(cfg):
    return {"_from_model_config": True, "bad_words_ids": cfg.bad_words, "bos_token_id": 0,
            "decoder_start_token_id": cfg.decoder_start, "eos_token_id": cfg.eos, "forced_eos_token_id": cfg.eos,
            "max_length": 256, "num_beams": 4, "pad_token_id": cfg.pad}


def tokenizer_config():
    return {"tokenizer_class": "MarianTokenizer", "source_lang": "en", "target_lang": "de",
            "unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>", "model_max_length": 512,
            "separate_vocabs": False, "sp_model_kwargs": {}, "clean_up_tokenization_spaces": False}


def export(args):
    torch.set_num_threads(args.threads)
    tok = MarianTokenizer(args.vocab)
    dev_pairs, _, dev_refs = load_split(tok, args.data, "dev")
    model = build_model(len(tok.vocab), tok.pad_id, tok.eos_id)
    with open(os.path.join(args.work, "history.json")) as f:
        history = json.load(f)
    best = max(history, key=lambda p: p["dev_chrf_greedy"])

    def snapshot(step):  # an evaluation point's weights, or the last step's (checkpoint.pt)
        if step == "final":
            return torch.load(os.path.join(args.work, "checkpoint.pt"))["model"]
        return torch.load(os.path.join(args.work, f"eval-{step}.pt"))

    # The run may stop between evaluations: its last step is a candidate of its own.
    final_step = torch.load(os.path.join(args.work, "checkpoint.pt"))["state"]["step"]
    snapshots = [p["step"] for p in history if os.path.exists(os.path.join(args.work, f"eval-{p['step']}.pt"))]
    candidates = {f"best evaluation (step {best['step']})": [best["step"]]}
    if final_step != snapshots[-1]:
        snapshots.append("final")
        candidates[f"last step ({final_step})"] = ["final"]
    if args.average > 1 and len(snapshots) >= 2:
        last = snapshots[-args.average:]
        candidates["average of steps " + ", ".join(str(final_step if s == "final" else s) for s in last)] = last
    results = {}
    for label, steps in candidates.items():
        states = [snapshot(s) for s in steps]
        averaged = {k: sum(s[k] for s in states) / len(states) for k in states[0]}
        model.load_state_dict(averaged)
        _, chrf, _ = evaluate(model, tok, dev_pairs, dev_refs, 0.0)
        results[label] = (chrf, averaged)
        print(f"{label}: dev chrF (greedy) {chrf:.2f}", flush=True)
    chosen = max(results, key=lambda k: results[k][0])
    model.load_state_dict(results[chosen][1])
    model.eval()

    os.makedirs(args.out, exist_ok=True)
    cfg = model.cfg
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(hf_config(cfg, "float16"), f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump(generation_config(cfg), f, indent=2)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(), f, indent=2)
    for name in ("source.spm", "target.spm", "vocab.json"):
        shutil.copyfile(os.path.join(args.vocab, name), os.path.join(args.out, name))
    ref.write_safetensors(os.path.join(args.out, "model.safetensors"), ref.state_dict_for_export(model), "F16")
    summary = {"chosen": chosen, "dev_chrf_greedy": round(results[chosen][0], 2),
               "candidates": {k: round(v[0], 2) for k, v in results.items()}}
    with open(os.path.join(args.work, "export.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"wrote {args.out}: {json.dumps(summary)}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["train", "export"])
    parser.add_argument("--data", default="build/en-de/data")
    parser.add_argument("--vocab", default="build/en-de/vocab")
    parser.add_argument("--work", default="build/en-de/train")
    parser.add_argument("--out", default="tools/en-de-model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-minutes", type=float, default=150)
    parser.add_argument("--save-minutes", type=float, default=5)
    parser.add_argument("--eval-steps", type=int, default=400)
    parser.add_argument("--patience", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=3000)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--average", type=int, default=4, help="export: also try the average of the last N evaluations")
    args = parser.parse_args()
    (train if args.command == "train" else export)(args)


if __name__ == "__main__":
    main()
